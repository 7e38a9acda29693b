"""Calibrated serve mode, measured on held-out verdicts.
Thresholds are learnt from the "reviewed" half of each pair corpus; false hits and the served share are
measured on the "new" half.

1. Every pair of every corpus goes once through `semula eval`'s cascade (the proxy's own) in calibrated
   mode with no learnt threshold, so nothing is served beyond the defaults and each queued pair says
   why: a reason calibration may lift ("calibrated: …") or not (guard, edit checks, shape).
2. Per seed, each corpus's pairs are split in half. The reviewed halves' queued pairs become verdicts
   (approved = `same`, rejected = `different`), pooled as one project's review history, and
   `core.calibration.learn` picks the thresholds.
3. On the new halves, a pair is served in calibrated mode when the defaults serve it, or when its queued
   verdict was liftable and its score reaches its tier's learnt threshold. For the first seed the real
   cascade runs again with the learnt thresholds and must agree (the "check" line).

Writes benchmark/results/calibration.md and calibration.json. A script, not a test.

    .venv/bin/python scripts/bench.py calibration                  # writes benchmark/results/calibration.md (+ .json)
    .venv/bin/python scripts/bench.py calibration --no-embeddings  # the lexical tier alone
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench import common

SEEDS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
CALIBRATED = {"near_serve": "calibrated", "max_false_hit_rate": 0.01}


def corpora() -> dict[str, Path]:
    sets = {name: common.corpus_file(f"{name}-pairs.jsonl")
            for name in ("dev", "heldout-1", "public-paraphrase")}
    for path in sorted((common.REPO / "tests" / "data").glob("*-pairs.jsonl")):
        name = path.name.removesuffix("-pairs.jsonl")
        if name not in sets:  # the repo keeps copies of dev and heldout-1
            sets[f"repo:{name}"] = path
    return sets


def use_embeddings() -> None:
    os.environ.update(SEMULA_EMBEDDINGS="on", SEMULA_EMBEDDINGS_MODEL=MODEL, SEMULA_EMBEDDINGS_OFFLINE="on",
                      SEMULA_EMBEDDINGS_MODEL_PATH=str(common.shared_path("models", "all-MiniLM-L6-v2-onnx")))


def run_rows(path: Path, learnt: dict[str, float] | None = None, only: Any = None) -> list[dict[str, Any]]:
    from semula.engine.evaluate import evaluate

    rows: list[dict[str, Any]] = []
    evaluate(path, CALIBRATED, pairs_out=rows.append, learnt=learnt or {}, only=only)
    return rows


def verdicts_of(rows: list[dict[str, Any]]) -> list[Any]:
    from semula.core.calibration import LabelledVerdict, counts_for_calibration

    return [LabelledVerdict(r["tier"], r["score"], r["expect"] == "same") for r in rows
            if r["outcome"] == "review" and counts_for_calibration(r["reason"], r["guard_reason"])]


def calibrated_outcome(row: dict[str, Any], thresholds: dict[str, float]) -> str:
    from semula.core.calibration import counts_for_calibration

    if row["outcome"] == "review" and counts_for_calibration(row["reason"], row["guard_reason"]):
        learnt = thresholds.get(row["tier"])
        if learnt is not None and row["score"] >= learnt:
            return "calibrated"
    return row["outcome"]


REVIEWED_SHARE = 0.5


def halves(n: int, seed: int, name: str) -> tuple[set[int], set[int]]:
    """(reviewed, new): a seeded split of a corpus's pair indices (`REVIEWED_SHARE` reviewed)."""
    order = list(range(n))
    random.Random(f"{seed}:{name}").shuffle(order)
    cut = round(n * REVIEWED_SHARE)
    return set(order[:cut]), set(order[cut:])


def measure(rows: list[dict[str, Any]], new: set[int], thresholds: dict[str, float]) -> dict[str, Any]:
    same = [i for i in new if rows[i]["expect"] == "same"]
    different = [i for i in new if rows[i]["expect"] == "different"]
    outcome = {i: calibrated_outcome(rows[i], thresholds) for i in new}
    served = lambda ids: sum(1 for i in ids if outcome[i] in ("served", "calibrated"))  # noqa: E731
    lifted = [i for i in new if outcome[i] == "calibrated"]
    return {"same": len(same), "different": len(different),
            "hit_rate": served(same) / len(same) if same else None,
            "default_hit_rate": sum(1 for i in same if rows[i]["outcome"] == "served") / len(same) if same else None,
            "false_hits": served(different), "false_hit_rate": served(different) / len(different) if different else None,
            "calibrated_served": len(lifted),
            "calibrated_wrong": sum(1 for i in lifted if rows[i]["expect"] == "different")}


def one_seed(seed: int, all_rows: dict[str, list[dict[str, Any]]], bound: float) -> dict[str, Any]:
    from semula.core.calibration import learn

    splits = {name: halves(len(rows), seed, name) for name, rows in all_rows.items()}
    pooled = [v for name, rows in all_rows.items() for v in verdicts_of([rows[i] for i in sorted(splits[name][0])])]
    calibration = learn(pooled, bound)
    thresholds = calibration.thresholds()
    per_set = {name: measure(rows, splits[name][1], thresholds) for name, rows in all_rows.items()}
    served = sum(m["calibrated_served"] for m in per_set.values())
    wrong = sum(m["calibrated_wrong"] for m in per_set.values())
    return {"seed": seed, "thresholds": thresholds,
            "tiers": {t: {k: getattr(v, k) for k in ("threshold", "approved", "rejected", "approved_above",
                                                      "rejected_above", "estimate", "upper_bound", "reason")}
                      for t, v in calibration.tiers.items()},
            "sets": per_set, "calibrated_served": served, "calibrated_wrong": wrong,
            "measured_wrong_share": wrong / served if served else None}


def check_seed(seed_result: dict[str, Any], paths: dict[str, Path], all_rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The real cascade with the learnt thresholds on the new halves: outcomes must match the replay."""
    agree = disagree = 0
    differing: list[dict[str, Any]] = []
    for name, path in paths.items():
        new = halves(len(all_rows[name]), seed_result["seed"], name)[1]
        rows = run_rows(path, seed_result["thresholds"], only=lambda i, new=new: i in new)
        for index, row in zip(sorted(new), rows):
            expected = calibrated_outcome(all_rows[name][index], seed_result["thresholds"])
            real = "calibrated" if row["outcome"] == "served" and row["tier"].endswith("-calibrated") else row["outcome"]
            agree += real == expected
            disagree += real != expected
            if real != expected:
                first = all_rows[name][index]
                differing.append({"set": name, "id": row["id"], "replay": expected, "real": real,
                                  "first": [first["tier"], first["score"], first["reason"]],
                                  "second": [row["tier"], row["score"], row["reason"]]})
    return {"agree": agree, "disagree": disagree, "differing": differing}


def reason_class(row: dict[str, Any]) -> str:
    """What decided a pair in the first pass (calibrated mode, no learnt threshold)."""
    from semula.core.calibration import counts_for_calibration

    reason = row["reason"] or ""
    if row["outcome"] == "served":
        return f"served by the defaults ({row['tier']})"
    if row["outcome"] == "review" and counts_for_calibration(row["reason"], row["guard_reason"]):
        return f"liftable: a learnt {row['tier']} threshold may serve it"
    if row["guard_reason"]:
        return f"guard: {row['guard_reason'].split(':')[0]}"
    if reason.startswith("small edit"):
        return reason.split(":")[0]
    if row["outcome"] == "miss":
        return "miss: below the review thresholds (or not proposed)"
    return reason.split(":")[0][:60] or "other"


def blockers(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    from collections import Counter

    return Counter(reason_class(r) for r in rows if r["expect"] == "same").most_common()


def spread(values: list[float | None]) -> str:
    xs = [v for v in values if v is not None]
    if not xs:
        return "n/a"
    if all(float(x).is_integer() for x in xs):  # counts
        return f"{statistics.mean(xs):.1f} (min {min(xs):.0f}, max {max(xs):.0f})"
    return f"{statistics.mean(xs):.3f} (min {min(xs):.3f}, max {max(xs):.3f})"


def render(data: dict[str, Any]) -> str:
    seeds = data["seeds"]
    lines = ["# Calibrated serve mode on held-out verdicts", "",
             "Generated by `scripts/bench/calibration.py` (figures: calibration.json beside this file). "
             "A script, not a test: nothing here is asserted.", "", "## Machine", "", "|  |  |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in data["machine"].items()]
    lines += ["", "## Method", "", data["method"], "",
              f"Bound: max_false_hit_rate {data['bound']}, one-sided Clopper-Pearson at 95 %; at least "
              f"{data['min_verdicts']} verdicts at or above a threshold. {len(seeds)} seeds "
              f"({', '.join(str(s['seed']) for s in seeds)}); figures are mean (min, max) over seeds.", "",
              "## Learnt thresholds", "", "| tier | threshold | verdicts (approved/rejected) | at or above | "
              "estimate | upper bound | serves in seeds |", "|---|---|---|---|---|---|---|"]
    for tier in ("lexical", "embedding"):
        rows = [s["tiers"][tier] for s in seeds if tier in s["tiers"]]
        th = [r["threshold"] for r in rows]
        lines.append(f"| {tier} | {spread(th)} | {spread([r['approved'] for r in rows])} / "
                     f"{spread([r['rejected'] for r in rows])} | {spread([r['approved_above'] + r['rejected_above'] for r in rows])} | "
                     f"{spread([r['estimate'] for r in rows])} | {spread([r['upper_bound'] for r in rows])} | "
                     f"{sum(t is not None for t in th)}/{len(rows)} |")
    lines += ["", "## On the new halves", "", "| set | same / different (new half) | hit rate default | "
              "hit rate calibrated | false hits (count) | false-hit rate |", "|---|---|---|---|---|---|"]
    for name in seeds[0]["sets"]:
        ms = [s["sets"][name] for s in seeds]
        lines.append(f"| {name} | {ms[0]['same']} / {ms[0]['different']} | {spread([m['default_hit_rate'] for m in ms])} | "
                     f"{spread([m['hit_rate'] for m in ms])} | {spread([m['false_hits'] for m in ms])} | "
                     f"{spread([m['false_hit_rate'] for m in ms])} |")
    lines += ["", "## Estimate against measurement", "",
              "Among the pairs calibration served on the new halves (beyond the defaults), the share that was "
              "`different`, against the learnt upper bounds:", "",
              f"- measured wrong share: {spread([s['measured_wrong_share'] for s in seeds])} "
              f"({spread([s['calibrated_served'] for s in seeds])} served a seed)",
              f"- check (seed {seeds[0]['seed']}): the real cascade with the learnt thresholds agreed with the replay "
              f"on {data['check']['agree']} pairs, disagreed on {data['check']['disagree']}", "",
              "## What holds the public paraphrases back", "",
              "The first pass's verdict on every public paraphrase pair (all `same`), before any threshold:", "",
              "| what decided it | pairs | share |", "|---|---:|---:|",
              *[f"| {k} | {v} | {v / data['paraphrases']:.1%} |" for k, v in data["blockers"]], "",
              "## Notes", "", *[f"- {n}" for n in data["notes"]], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    global REVIEWED_SHARE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(SEEDS))
    parser.add_argument("--bound", type=float, default=0.01)
    parser.add_argument("--no-embeddings", action="store_true")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "calibration.md")
    parser.add_argument("--rows", type=Path, default=None,
                        help="keep the first pass's per-pair rows in this JSON file (reused when it exists)")
    parser.add_argument("--no-check", action="store_true", help="skip the second run through the real cascade")
    parser.add_argument("--note", action="append", default=[], help="a line for the results file's notes")
    parser.add_argument("--reviewed-share", type=float, default=REVIEWED_SHARE,
                        help="the share of each corpus that is 'reviewed' (learnt from); the rest is 'new'")
    parser.add_argument("--render-only", action="store_true", help="re-render the results file from its JSON")
    args = parser.parse_args(argv)
    if args.render_only:
        args.out.write_text(render(json.loads(args.out.with_suffix(".json").read_text())), encoding="utf-8")
        return 0
    REVIEWED_SHARE = args.reviewed_share
    if not args.no_embeddings:
        use_embeddings()
    from semula.core.calibration import MIN_VERDICTS

    paths = corpora()
    t0 = time.perf_counter()
    all_rows = json.loads(args.rows.read_text()) if args.rows and args.rows.exists() else {}
    for name, path in paths.items():
        if name not in all_rows:
            common.log(f"calibration: {name} ({path})")
            all_rows[name] = run_rows(path)
    if args.rows:
        common.write_json(args.rows, all_rows)
    seeds = [one_seed(seed, all_rows, args.bound) for seed in SEEDS[: args.seeds]]
    common.log("calibration: checking the first seed through the real cascade")
    check = {"agree": None, "disagree": None} if args.no_check else check_seed(seeds[0], paths, all_rows)
    data = {"machine": common.machine(embeddings="off" if args.no_embeddings else MODEL),
            "bound": args.bound, "min_verdicts": MIN_VERDICTS, "reviewed_share": REVIEWED_SHARE, "seeds": seeds, "check": check,
            "seconds": round(time.perf_counter() - t0, 1),
            "method": __doc__.split("\n\n", 1)[1].rsplit("\n\nWrites", 1)[0],
            "paraphrases": sum(1 for r in all_rows["public-paraphrase"] if r["expect"] == "same"),
            "blockers": blockers(all_rows["public-paraphrase"]),
            "notes": args.note}
    common.write_json(args.out.with_suffix(".json"), data)
    args.out.write_text(render(data), encoding="utf-8")
    print(json.dumps({"check": check, "seconds": data["seconds"],
                      "sets": {n: seeds[0]["sets"][n] for n in seeds[0]["sets"]}}, indent=1))
    return 0
