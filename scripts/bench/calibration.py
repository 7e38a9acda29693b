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


Thresholds = dict[str, dict[str, float]]  # {tier: {stratum: threshold}}


def strata(path: Path) -> list[str]:
    """Each pair's stratum: the languages of its two last user texts (`core.guard.language`)."""
    from semula.core.guard.language import languages_of_pair
    from semula.core.redact import FingerprintKey
    from semula.engine.evaluate import canonical_of, load_pairs

    key = FingerprintKey(b"calibration-bench-salt")
    return [languages_of_pair(canonical_of(p["stored"], key).last_user_text(),
                              canonical_of(p["incoming"], key).last_user_text()).stratum for p in load_pairs(path)]


def run_rows(path: Path, learnt: Thresholds | None = None, only: Any = None) -> list[dict[str, Any]]:
    from semula.engine.evaluate import evaluate

    rows: list[dict[str, Any]] = []
    evaluate(path, CALIBRATED, pairs_out=rows.append, learnt=learnt or {}, only=only)
    if learnt is None:
        for row, stratum in zip(rows, strata(path)):
            row["stratum"] = stratum
    return rows


def stratum_of(row: dict[str, Any], pooled: bool) -> str:
    return "all" if pooled else row["stratum"]


def verdicts_of(rows: list[dict[str, Any]], pooled: bool = False) -> list[Any]:
    from semula.core.calibration import LabelledVerdict, counts_for_calibration

    return [LabelledVerdict(r["tier"], r["score"], r["expect"] == "same", stratum_of(r, pooled)) for r in rows
            if r["outcome"] == "review" and counts_for_calibration(r["reason"], r["guard_reason"])]


def calibrated_outcome(row: dict[str, Any], thresholds: Thresholds, pooled: bool = False) -> str:
    from semula.core.calibration import counts_for_calibration

    if row["outcome"] == "review" and counts_for_calibration(row["reason"], row["guard_reason"]):
        learnt = thresholds.get(row["tier"], {}).get(stratum_of(row, pooled))
        if learnt is not None and row["score"] >= learnt:
            return "calibrated"
    return row["outcome"]


# The issue-38 scenario: a few rejected near-matches in other languages, scoring high (they passed the
# guard), pooled with the project's verdicts. Synthetic: (tier, score, stratum).
FOREIGN_REJECTIONS = (("embedding", 0.97, "pt"), ("embedding", 0.93, "de"), ("lexical", 0.96, "fr"))


def foreign_rejections(pooled: bool) -> list[Any]:
    from semula.core.calibration import LabelledVerdict

    return [LabelledVerdict(tier, score, False, "all" if pooled else stratum)
            for tier, score, stratum in FOREIGN_REJECTIONS]


REVIEWED_SHARE = 0.5


def halves(n: int, seed: int, name: str) -> tuple[set[int], set[int]]:
    """(reviewed, new): a seeded split of a corpus's pair indices (`REVIEWED_SHARE` reviewed)."""
    order = list(range(n))
    random.Random(f"{seed}:{name}").shuffle(order)
    cut = round(n * REVIEWED_SHARE)
    return set(order[:cut]), set(order[cut:])


def measure(rows: list[dict[str, Any]], new: set[int], thresholds: Thresholds, pooled: bool = False) -> dict[str, Any]:
    same = [i for i in new if rows[i]["expect"] == "same"]
    different = [i for i in new if rows[i]["expect"] == "different"]
    outcome = {i: calibrated_outcome(rows[i], thresholds, pooled) for i in new}
    served = lambda ids: sum(1 for i in ids if outcome[i] in ("served", "calibrated"))  # noqa: E731
    lifted = [i for i in new if outcome[i] == "calibrated"]
    return {"same": len(same), "different": len(different),
            "hit_rate": served(same) / len(same) if same else None,
            "default_hit_rate": sum(1 for i in same if rows[i]["outcome"] == "served") / len(same) if same else None,
            "false_hits": served(different), "false_hit_rate": served(different) / len(different) if different else None,
            "calibrated_served": len(lifted),
            "calibrated_wrong": sum(1 for i in lifted if rows[i]["expect"] == "different")}


# The variants every seed is measured in: (name, verdicts pooled across strata, foreign rejections added,
# correction). The first is the one the proxy runs.
VARIANTS = (
    ("per stratum + foreign rejections", False, True, "fixed-sequence"),
    ("per stratum", False, False, "fixed-sequence"),
    ("pooled + foreign rejections", True, True, "fixed-sequence"),
    ("pooled", True, False, "fixed-sequence"),
    ("per stratum + foreign rejections, Bonferroni", False, True, "bonferroni"),
)


def one_seed(seed: int, all_rows: dict[str, list[dict[str, Any]]], bound: float) -> dict[str, Any]:
    splits = {name: halves(len(rows), seed, name) for name, rows in all_rows.items()}
    out: dict[str, Any] = {"seed": seed}
    for variant, pooled, foreign, correction in VARIANTS:
        out[variant] = one_variant(all_rows, splits, bound, pooled, foreign, correction)
    return out


def one_variant(all_rows: dict[str, list[dict[str, Any]]], splits: dict[str, tuple[set[int], set[int]]],
                bound: float, pooled: bool, foreign: bool, correction: str) -> dict[str, Any]:
    from semula.core.calibration import learn

    verdicts = [v for name, rows in all_rows.items()
                for v in verdicts_of([rows[i] for i in sorted(splits[name][0])], pooled)]
    if foreign:
        verdicts += foreign_rejections(pooled)
    calibration = learn(verdicts, bound, correction=correction)
    thresholds = calibration.thresholds()
    per_set = {name: measure(rows, splits[name][1], thresholds, pooled) for name, rows in all_rows.items()}
    served = sum(m["calibrated_served"] for m in per_set.values())
    wrong = sum(m["calibrated_wrong"] for m in per_set.values())
    return {"thresholds": thresholds,
            "strata": [{k: getattr(v, k) for k in ("tier", "stratum", "threshold", "approved", "rejected",
                                                   "approved_above", "rejected_above", "estimate", "upper_bound",
                                                   "reason")} for v in calibration.strata],
            "sets": per_set, "calibrated_served": served, "calibrated_wrong": wrong,
            "measured_wrong_share": wrong / served if served else None}


def check_seed(seed_result: dict[str, Any], paths: dict[str, Path], all_rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The real cascade with the learnt thresholds on the new halves: outcomes must match the replay."""
    agree = disagree = 0
    differing: list[dict[str, Any]] = []
    thresholds = seed_result[VARIANTS[0][0]]["thresholds"]
    for name, path in paths.items():
        new = halves(len(all_rows[name]), seed_result["seed"], name)[1]
        rows = run_rows(path, thresholds, only=lambda i, new=new: i in new)
        for index, row in zip(sorted(new), rows):
            expected = calibrated_outcome(all_rows[name][index], thresholds)
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
    main_variant = VARIANTS[0][0]
    lines = ["# Calibrated serve mode on held-out verdicts", "",
             "Generated by `scripts/bench/calibration.py` (figures: calibration.json beside this file). "
             "A script, not a test: nothing here is asserted.", "", "## Machine", "", "|  |  |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in data["machine"].items()]
    lines += ["", "## Method", "", data["method"], "",
              f"Bound: max_false_hit_rate {data['bound']}, one-sided Clopper-Pearson at 95 % for the whole search "
              f"over a fixed grid of thresholds (1.00 down to 0.50 by 0.01); at least {data['min_verdicts']} "
              f"verdicts at or above a threshold. Reviewed share {data['reviewed_share']:.0%}. {len(seeds)} seeds; "
              "figures are mean (min, max) over seeds.", "",
              "Foreign rejections (the issue-38 scenario): " + ", ".join(
                  f"a rejected {t} pair at {sc} in `{st}`" for t, sc, st in FOREIGN_REJECTIONS)
              + ", added to every seed's verdicts (pooled: all in one stratum).", "",
              "## Variants", "",
              "| variant | public paraphrases served | false hits, all sets (count) | wrong share of calibrated serves | "
              "calibrated serves a seed | English embedding stratum serves in seeds |", "|---|---|---|---|---|---|"]
    for variant, pooled, _foreign, _correction in VARIANTS:
        vs = [sd[variant] for sd in seeds]
        english = "all" if pooled else "en"
        serves = sum(1 for v in vs if english in v["thresholds"].get("embedding", {}))
        lines.append(f"| {variant} | {spread([v['sets']['public-paraphrase']['hit_rate'] for v in vs])} | "
                     f"{spread([sum(m['false_hits'] for m in v['sets'].values()) for v in vs])} | "
                     f"{spread([v['measured_wrong_share'] for v in vs])} | "
                     f"{spread([v['calibrated_served'] for v in vs])} | {serves}/{len(vs)} |")
    lines += ["", f"## Learnt thresholds ({main_variant})", "",
              "| tier | stratum | threshold | verdicts (approved/rejected) | at or above | upper bound | serves in seeds |",
              "|---|---|---|---|---|---|---|"]
    keys: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for sd in seeds:
        for row in sd[main_variant]["strata"]:
            keys.setdefault((row["tier"], row["stratum"]), []).append(row)
    for (tier, stratum), rows in sorted(keys.items(), key=lambda kv: -sum(r["approved"] + r["rejected"] for r in kv[1])):
        th = [r["threshold"] for r in rows]
        lines.append(f"| {tier} | {stratum} | {spread(th)} | {spread([r['approved'] for r in rows])} / "
                     f"{spread([r['rejected'] for r in rows])} | "
                     f"{spread([r['approved_above'] + r['rejected_above'] for r in rows])} | "
                     f"{spread([r['upper_bound'] for r in rows])} | {sum(t is not None for t in th)}/{len(seeds)} |")
    lines += ["", f"## On the new halves ({main_variant})", "", "| set | same / different (new half) | hit rate default | "
              "hit rate calibrated | false hits (count) | false-hit rate |", "|---|---|---|---|---|---|"]
    for name in seeds[0][main_variant]["sets"]:
        ms = [sd[main_variant]["sets"][name] for sd in seeds]
        lines.append(f"| {name} | {ms[0]['same']} / {ms[0]['different']} | {spread([m['default_hit_rate'] for m in ms])} | "
                     f"{spread([m['hit_rate'] for m in ms])} | {spread([m['false_hits'] for m in ms])} | "
                     f"{spread([m['false_hit_rate'] for m in ms])} |")
    lines += ["", "## Check", "",
              f"- seed {seeds[0]['seed']}: the real cascade with the learnt thresholds ({main_variant}) agreed with the "
              f"replay on {data['check']['agree']} pairs, disagreed on {data['check']['disagree']}", "",
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
                      "variants": {v[0]: {"public served": seeds[0][v[0]]["sets"]["public-paraphrase"]["hit_rate"],
                                          "false hits": sum(m["false_hits"] for m in seeds[0][v[0]]["sets"].values())}
                                   for v in VARIANTS}}, indent=1))
    return 0
