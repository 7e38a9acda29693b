#!/usr/bin/env python3
"""Tune and measure the lexical tier and its guard on the request-pair corpora.

Prints markdown for benchmark/results/lexical.md:

1. what the pipeline (exact -> normalised -> lexical near-match) does with each
   category of ../shared/corpus/dev-pairs.jsonl at the default settings;
2. the tuning of the review floor and the word handling (stemming, spelled-out
   numbers) on the ODD-numbered pair ids, with the EVEN-numbered ones reported
   beside them so that overfitting shows, and how often a request's nearest
   *unrelated* recording (another pair of the same corpus) would be queued;
3. the public paraphrase pairs: review recall and how often the guard refuses;
4. the serve-threshold sweep (0.80-1.00, step 0.02) with the guard on and off;
5. the `different` pairs the guard alone (serve threshold 0) does not stop;
6. timings of guard() and near_match() (cold caches and warm), with a
   calibration loop so numbers from different machines can be compared.

    .venv/bin/python scripts/sweep_lexical.py [--corpus DIR] [--out FILE]

A script, not a test: it never asserts targets (tests/test_nearmatch_corpus.py does).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import time
import timeit
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "addon"))

from semula import guard as guard_module  # noqa: E402
from semula import nearmatch as nearmatch_module  # noqa: E402
from semula import normalise as normalise_module  # noqa: E402
from semula.core.canonical import CanonicalRequest, normalised_fingerprint  # noqa: E402
from semula.core.guard import guard  # noqa: E402
from semula.core.nearmatch import (  # noqa: E402
    dice,
    lexical_words,
    near_match,
    pipeline_outcome,
    sweep,
    sweep_markdown,
)
from semula.engine.evaluate import canonical_of  # noqa: E402
from semula.core.settings import ProjectSettings  # noqa: E402

FLOORS = (0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70)
VARIANTS = {
    "words": {"stem": False, "spell_numbers": False},
    "+ spelled numbers as digits": {"stem": False, "spell_numbers": True},
    "+ plural stemming": {"stem": True, "spell_numbers": False},
    "+ both": {"stem": True, "spell_numbers": True},
}


@dataclasses.dataclass(frozen=True)
class Pair:
    id: str
    number: int
    category: str
    expect: str
    stored: CanonicalRequest
    incoming: CanonicalRequest



def load(path: Path) -> list[Pair]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            p = json.loads(line)
            number = int(re.search(r"(\d+)$", p["id"]).group(1))  # type: ignore[union-attr]
            pairs.append(
                Pair(p["id"], number, p["category"], p["expect"], canonical_of(p["stored"]), canonical_of(p["incoming"]))
            )
    return pairs


def roles(c: CanonicalRequest) -> tuple[str, ...]:
    return tuple(m.role for m in c.messages)


def queued_or_served(pair: Pair, floor: float, options: dict[str, bool]) -> bool:
    """At serve threshold 1: served by a fingerprint, or score >= floor with the same speakers."""
    if normalised_fingerprint(pair.stored) == normalised_fingerprint(pair.incoming):
        return True
    a = lexical_words(pair.incoming.last_user_text(), **options)
    b = lexical_words(pair.stored.last_user_text(), **options)
    return bool(a) and bool(b) and dice(a, b) >= floor and roles(pair.stored) == roles(pair.incoming)


def nearest_unrelated(pairs: list[Pair], options: dict[str, bool]) -> list[float]:
    """For each request, the best score against a request of another pair (same speakers)."""
    sides = [(p.id, c) for p in pairs for c in (p.stored, p.incoming)]
    scored = [(pid, c, lexical_words(c.last_user_text(), **options), roles(c)) for pid, c in sides]
    best = []
    for pid, c, w, r in scored:
        best.append(
            max(
                (
                    dice(w, w2)
                    for pid2, c2, w2, r2 in scored
                    if pid2 != pid and r2 == r and c2.last_user_text() != c.last_user_text()
                ),
                default=0.0,
            )
        )
    return best


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def section_defaults(dev: list[Pair]) -> str:
    by_category: dict[str, Counter[str]] = defaultdict(Counter)
    for p in dev:
        outcome = pipeline_outcome(p.stored, p.incoming, ProjectSettings())
        key = f"served ({outcome.tier})" if outcome.action == "served" else outcome.action
        by_category[f"{p.category} ({p.expect})"][key] += 1
    columns = ["served (exact)", "served (normalised)", "served (lexical)", "review", "miss"]
    rows = [[cat, sum(c.values()), *(c[k] for k in columns)] for cat, c in sorted(by_category.items())]
    return table(["category", "n", *columns], rows)


def section_tuning(dev: list[Pair]) -> str:
    out = []
    for name, options in VARIANTS.items():
        row_odd, row_even = [name + " (odd)"], [name + " (even)"]
        for floor in FLOORS:
            for parity, row in ((1, row_odd), (0, row_even)):
                same = [p for p in dev if p.expect == "same" and p.number % 2 == parity]
                row.append(f"{sum(queued_or_served(p, floor, options) for p in same) / len(same):.3f}")
        out += [row_odd, row_even]
    recall = table(["review recall of `same` pairs", *(f"floor {f:.2f}" for f in FLOORS)], out)
    noise_rows = []
    for parity in (1, 0):
        half = [p for p in dev if p.number % 2 == parity]
        best = nearest_unrelated(half, VARIANTS["+ spelled numbers as digits"])
        noise_rows.append(
            [f"{'odd' if parity else 'even'} ids ({len(best)} requests)"]
            + [f"{sum(b >= f for b in best) / len(best):.3f}" for f in FLOORS]
        )
    noise = table(["nearest unrelated request >= floor", *(f"{f:.2f}" for f in FLOORS)], noise_rows)
    return recall + "\n\n" + noise


def section_public(public: list[Pair]) -> str:
    rows = []
    for floor in (0.6, 0.55):
        settings = ProjectSettings(lexical_review_threshold=floor)
        actions = Counter(pipeline_outcome(p.stored, p.incoming, settings).action for p in public)
        rows.append([f"{floor:.2f}", actions["served"], actions["review"], actions["miss"],
                     f"{(actions['served'] + actions['review']) / len(public):.3f}"])  # fmt: skip
    recall = table(["review floor", "served", "review", "miss", "review recall"], rows)
    reasons = Counter()
    for p in public:
        reason = guard(p.stored.last_user_text(), p.incoming.last_user_text())
        reasons[reason.split(":")[0].split(" ")[0] if reason else "passes"] += 1
    refused = len(public) - reasons["passes"]
    by_check = ", ".join(f"{k} {v}" for k, v in reasons.most_common() if k != "passes")
    return f"{recall}\n\nGuard refusal rate on the public pairs: {refused / len(public):.3f} ({refused}/{len(public)}; {by_check})."


def section_guard_alone(dev: list[Pair]) -> str:
    settings = ProjectSettings(lexical_serve_threshold=0.0)
    lines = []
    for p in dev:
        if p.expect != "different":
            continue
        verdict = near_match(p.incoming, p.stored, settings)
        if verdict.serve:
            lines.append(f"- {p.id} ({p.category}): served")
    return "\n".join(lines) or "None: every `different` pair is refused by the guard, the context or the shape check."


def _clear_caches() -> None:
    """Cold means no cached analysis, word list or normalised text for the pair."""
    guard_module.analyse.cache_clear()
    nearmatch_module._cached_word_counts.cache_clear()
    normalised = getattr(normalise_module, "_normalise_cached", None)  # the normalise module's own cache
    if normalised is not None:
        normalised.cache_clear()


def _timings(pairs: list[Pair]) -> list[list[Any]]:
    settings = ProjectSettings()
    functions = {
        "guard()": lambda p: guard(p.stored.last_user_text(), p.incoming.last_user_text()),
        "near_match()": lambda p: near_match(p.incoming, p.stored, settings),
    }
    rows = []
    for name, fn in functions.items():
        cold, warm = [], []
        for p in pairs:
            for _ in range(3):
                _clear_caches()
                start = time.perf_counter()
                fn(p)
                cold.append(time.perf_counter() - start)
                start = time.perf_counter()
                fn(p)
                warm.append(time.perf_counter() - start)
        q = lambda xs, f: statistics.quantiles(xs, n=100)[f - 1] * 1000  # noqa: E731
        rows.append([name, f"{q(cold, 50):.3f}", f"{q(cold, 99):.3f}", f"{q(warm, 50):.3f}", f"{q(warm, 99):.3f}"])
    return rows


def section_speed(dev: list[Pair], public: list[Pair]) -> str:
    calibration = min(timeit.repeat("sum(range(1000))", number=1000, repeat=7)) / 1000 * 1e6
    pairs = [p for p in dev if p.category not in ("format", "volatile")] + public[:300]
    rows = _timings(pairs)
    return (
        table(["function", "cold p50 ms", "cold p99 ms", "warm p50 ms", "warm p99 ms"], rows)
        + f"\n\n{len(pairs)} pairs; calibration: `sum(range(1000))` takes {calibration:.1f} µs on this machine."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, help="also write the markdown to this file")
    parser.add_argument("--no-speed", action="store_true", help="skip the timings")
    args = parser.parse_args()
    dev = load(args.corpus / "dev-pairs.jsonl")
    public = load(args.corpus / "public-paraphrase-pairs.jsonl")
    parts = [
        "## Dev pairs at the default settings\n\n" + section_defaults(dev),
        "## Tuning the review floor and the word handling (odd ids tune, even ids check)\n\n" + section_tuning(dev),
        "## Public paraphrase pairs (all `same`)\n\n" + section_public(public),
        "## Serve-threshold sweep (review floor at its default)\n\n"
        + sweep_markdown(sweep([(p.expect, p.stored, p.incoming) for p in dev],
                               [(p.expect, p.stored, p.incoming) for p in public])),  # fmt: skip
        "## `different` pairs the guard alone lets through (serve threshold 0)\n\n" + section_guard_alone(dev),
    ]
    if not args.no_speed:
        parts.append("## Speed\n\n" + section_speed(dev, public))
    text = "\n\n".join(parts) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
