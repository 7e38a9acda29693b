"""Tuning tables of the lexical tier and its guard on the request-pair corpora.

On the dev pairs and the public paraphrase pairs: outcomes per category at the defaults, the review
floor and word handling tuned on odd pair ids and checked on even ones, the public pairs, the
serve-threshold sweep with the guard on and off, what the guard alone lets through, and the speed of
guard() and near_match().

    .venv/bin/python scripts/bench.py sweep            # full run: writes benchmark/results/sweep.md (+ .json)
    .venv/bin/python scripts/bench.py sweep --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

`sweep` is imported by tests/slow/test_nearmatch_corpus.py, so this module imports only semula at
the top (scripts/bench/common.py is imported where it is needed).
"""

from __future__ import annotations

import argparse
import re
import time
import timeit
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from semula.core.request.canonical import CanonicalRequest, normalised_fingerprint
from semula.core.guard import guard
from semula.core.nearmatch import lexical_words, near_match
from semula.core.pair import pipeline_outcome
from semula.core.redact import FingerprintKey
from semula.core.text import dice
from semula.core.settings import ProjectSettings
from semula.engine.evaluate import canonical_of, load_pairs

FLOORS = (0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70)
WORD_HANDLING = {"words": {"stem": False, "spell_numbers": False},
                 "+ spelled numbers as digits": {"stem": False, "spell_numbers": True},
                 "+ plural stemming": {"stem": True, "spell_numbers": False},
                 "+ both": {"stem": True, "spell_numbers": True}}
LabelledPair = tuple[str, CanonicalRequest, CanonicalRequest]  # (expect, stored, incoming)


@dataclass(frozen=True)
class SweepRow:
    serve_threshold: float
    guard: bool
    dev_hit_rate: float
    dev_false_hit_rate: float
    dev_false_hits: int
    public_hit_rate: float | None


def labelled(path: Path) -> list[LabelledPair]:
    key = FingerprintKey.generate()  # one for the whole corpus: the same secret must match itself
    return [(p["expect"], canonical_of(p["stored"], key), canonical_of(p["incoming"], key)) for p in load_pairs(path)]


def _served(pairs: Sequence[LabelledPair], settings: ProjectSettings) -> Counter[tuple[str, bool]]:
    """Served pairs per (expect, guard on)."""
    served: Counter[tuple[str, bool]] = Counter()
    for expect, stored, incoming in pairs:
        outcome = pipeline_outcome(stored, incoming, settings)
        served[(expect, True)] += outcome.action == "served"
        served[(expect, False)] += outcome.served_without_guard
    return served


def sweep(dev_pairs: Sequence[LabelledPair], public_pairs: Sequence[LabelledPair] = (),
          thresholds: Iterable[float] = tuple(round(0.8 + 0.02 * i, 2) for i in range(11)),
          settings: ProjectSettings | None = None) -> list[SweepRow]:
    """Hit and false-hit rates per lexical serve threshold, with the guard on and off."""
    base = settings or ProjectSettings()
    totals = Counter(expect for expect, _, _ in dev_pairs)
    public_same = sum(expect == "same" for expect, _, _ in public_pairs)
    rate = lambda n, total: n / total if total else 0.0  # noqa: E731
    rows = []
    for threshold in thresholds:
        chosen = replace(base, lexical_serve_threshold=threshold)
        dev, public = _served(dev_pairs, chosen), _served(public_pairs, chosen) if public_pairs else None
        for use_guard in (True, False):
            false_hits = dev[("different", use_guard)]
            rows.append(SweepRow(threshold, use_guard, rate(dev[("same", use_guard)], totals["same"]),
                                 rate(false_hits, totals["different"]), false_hits,
                                 rate(public[("same", use_guard)], public_same) if public is not None else None))
    return rows


# --- the tuning tables (scripts/bench.py sweep) -------------------------------------------------


@dataclass(frozen=True)
class Pair:
    id: str
    number: int
    category: str
    expect: str
    stored: CanonicalRequest
    incoming: CanonicalRequest


def load(path: Path, limit: int | None = None) -> list[Pair]:
    key = FingerprintKey.generate()
    return [Pair(p["id"], int(re.search(r"(\d+)$", p["id"]).group(1)), p["category"], p["expect"],  # type: ignore[union-attr]
                 canonical_of(p["stored"], key), canonical_of(p["incoming"], key)) for p in load_pairs(path)[:limit]]


def roles(c: CanonicalRequest) -> tuple[str, ...]:
    return tuple(m.role for m in c.messages)


def queued_or_served(p: Pair, floor: float, options: dict[str, bool]) -> bool:
    """At serve threshold 1: served by a fingerprint, or score >= floor with the same speakers."""
    if normalised_fingerprint(p.stored) == normalised_fingerprint(p.incoming):
        return True
    a, b = (lexical_words(c.last_user_text(), **options) for c in (p.incoming, p.stored))
    return bool(a) and bool(b) and dice(a, b) >= floor and roles(p.stored) == roles(p.incoming)


def nearest_unrelated(pairs: list[Pair], options: dict[str, bool]) -> list[float]:
    """For each request, its best score against a request of another pair with the same speakers."""
    sides = [(p.id, c.last_user_text(), lexical_words(c.last_user_text(), **options), roles(c))
             for p in pairs for c in (p.stored, p.incoming)]
    return [max((dice(w, w2) for pid2, t2, w2, r2 in sides if pid2 != pid and r2 == r and t2 != t), default=0.0)
            for pid, t, w, r in sides]


def tables(dev: list[Pair], public: list[Pair], speed: bool) -> dict[str, Any]:
    defaults: dict[str, Counter[str]] = {}
    for p in dev:
        o = pipeline_outcome(p.stored, p.incoming, ProjectSettings())
        defaults.setdefault(f"{p.category} ({p.expect})", Counter())[f"served ({o.tier})" if o.action == "served" else o.action] += 1
    recall = {f"{name} ({'odd' if parity else 'even'})": [
        sum(queued_or_served(p, f, opts) for p in same) / len(same) for f in FLOORS]
        for name, opts in WORD_HANDLING.items() for parity in (1, 0)
        for same in [[p for p in dev if p.expect == "same" and p.number % 2 == parity]]}
    noise = {}
    for parity in (1, 0):
        best = nearest_unrelated([p for p in dev if p.number % 2 == parity], WORD_HANDLING["+ spelled numbers as digits"])
        noise[f"{'odd' if parity else 'even'} ids ({len(best)} requests)"] = [sum(b >= f for b in best) / len(best) for f in FLOORS]
    public_rows = {}
    for floor in (0.6, 0.55):
        actions = Counter(pipeline_outcome(p.stored, p.incoming, ProjectSettings(lexical_review_threshold=floor)).action
                          for p in public)
        public_rows[f"{floor:.2f}"] = {**actions, "review recall": (actions["served"] + actions["review"]) / max(len(public), 1)}
    refusals = Counter((r.split(":")[0].split(" ")[0] if (r := guard(p.stored.last_user_text(), p.incoming.last_user_text()))
                        else "passes") for p in public)
    at_zero = ProjectSettings(lexical_serve_threshold=0.0)
    through = [f"{p.id} ({p.category})" for p in dev if p.expect == "different" and near_match(p.incoming, p.stored, at_zero).serve]
    rows = sweep([(p.expect, p.stored, p.incoming) for p in dev], [(p.expect, p.stored, p.incoming) for p in public])
    out = {"floors": FLOORS, "defaults": {k: dict(v) for k, v in sorted(defaults.items())}, "review_recall": recall,
           "nearest_unrelated": noise, "public": public_rows, "public_pairs": len(public),
           "guard_refusals": dict(refusals), "guard_alone_serves": through, "sweep": [r.__dict__ for r in rows]}
    if speed:
        out["speed"] = timings([p for p in dev if p.category not in ("format", "volatile")] + public[:300])
    return out


def timings(pairs: list[Pair]) -> dict[str, Any]:
    """guard() and near_match() per pair: the first call (each pair's texts are new to the caches) and a repeat."""
    from bench.common import pct

    settings = ProjectSettings()
    functions = {"guard()": lambda p: guard(p.stored.last_user_text(), p.incoming.last_user_text()),
                 "near_match()": lambda p: near_match(p.incoming, p.stored, settings)}
    rows = {}
    for name, fn in functions.items():
        first, repeat = [], []
        for p in pairs:
            for sink in (first, repeat):
                t0 = time.perf_counter()
                fn(p)
                sink.append((time.perf_counter() - t0) * 1000)
        rows[name] = {"first p50": pct(first, 50), "first p99": pct(first, 99),
                      "repeat p50": pct(repeat, 50), "repeat p99": pct(repeat, 99)}
    calibration_us = min(timeit.repeat("sum(range(1000))", number=1000, repeat=7)) / 1000 * 1e6
    return {"pairs": len(pairs), "rows": rows, "calibration_us": calibration_us}


def main(argv: list[str] | None = None) -> int:
    from bench import common

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=None, help="folder of the pair files (default: the shared corpus)")
    parser.add_argument("--quick", action="store_true", help="the first 300 public pairs, no timings")
    parser.add_argument("--no-speed", action="store_true", help="skip the timings")
    parser.add_argument("--out", type=Path, default=None, help="results markdown (default benchmark/results/sweep.md)")
    parser.add_argument("--json", type=Path, default=None, help="figures (default: --out with .json)")
    args = parser.parse_args(argv)
    folder = args.corpus or common.corpus_file("dev-pairs.jsonl").parent
    dev = load(folder / "dev-pairs.jsonl")
    public = load(folder / "public-paraphrase-pairs.jsonl", 300 if args.quick else None)
    common.finish("sweep", {"command": common.command("sweep", argv),
                            "machine": common.machine(), "corpus": str(folder),
                            **tables(dev, public, not (args.quick or args.no_speed))}, args.out, args.json, args.quick)
    return 0
