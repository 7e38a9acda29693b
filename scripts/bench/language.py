"""The language gate's cost on the miss path: py3langid's load, and identifying a near-match pair's languages.

A near-match that would be served (and, in calibrated mode, one whose stratum is asked for) first has its
two last user texts' languages identified (`core.guard.language.languages_of_pair`). Measured here:

- the model's one load per process (lazy, on the first near-match that needs it);
- one pair, cold (no cache: every segment identified) and warm (the stored text's segments cached, as
  when one recording meets many requests), over every pair of the corpora;
- long texts: a RAG-like prompt of N KB where one sentence differs (only differing segments are
  identified), and the worst case: two unrelated texts of N KB (everything identified);
- `near_match` on the corpora's pairs with the gate against without it (the gate patched out).

Writes benchmark/results/language.md (+ .json). A script, not a test.

    .venv/bin/python scripts/bench.py language
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import common

SETS = ("dev", "heldout-1", "public-paraphrase")


def _requests() -> list[tuple[Any, Any]]:
    """(stored, incoming) canonical requests of every pair of the corpora."""
    from semula.core.redact import FingerprintKey
    from semula.engine.evaluate import canonical_of, load_pairs

    key = FingerprintKey(b"language-bench-salt-0")
    return [(canonical_of(pair["stored"], key), canonical_of(pair["incoming"], key))
            for name in SETS for pair in load_pairs(common.corpus_file(f"{name}-pairs.jsonl"))]


def _clear() -> None:
    from semula.core.guard import language

    language._segments.cache_clear()
    language._ranked.cache_clear()


def _per_call(fn: Any, items: list[Any], clear: bool) -> dict[str, float]:
    times = []
    for item in items:
        if clear:
            _clear()
        t0 = time.perf_counter()
        fn(*item)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"n": len(times), "mean_ms": round(statistics.mean(times), 3), "p50_ms": round(times[len(times) // 2], 3),
            "p99_ms": round(times[int(len(times) * 0.99)], 3), "max_ms": round(times[-1], 3)}


def _long(kb: int) -> tuple[str, str, str]:
    sentence = "The quarterly report lists revenue by region, with notes on each office's staffing and costs. "
    body = (sentence * (kb * 1024 // len(sentence) + 1))[: kb * 1024]
    other = ("Ein ganz anderer Text über Gärten, Bäume und das Wetter im Frühling in Süddeutschland. "
             * (kb * 1024 // 80 + 1))[: kb * 1024]
    return body + "\nWhich region grew fastest?", body + "\nWhich region shrank the most?", other


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=common.RESULTS / "language.md")
    args = parser.parse_args(argv)
    from semula.core import nearmatch
    from semula.core.guard import language
    from semula.core.settings import ProjectSettings
    from semula.core.tiers import Tier

    t0 = time.perf_counter()
    language.preload()
    load_s = time.perf_counter() - t0
    requests = _requests()
    pairs = [(stored.last_user_text(), incoming.last_user_text()) for stored, incoming in requests]
    common.log(f"language: {len(pairs)} pairs")
    results: dict[str, Any] = {"model_load_s": round(load_s, 2)}
    results["pair_cold"] = _per_call(language.languages_of_pair, pairs, clear=True)
    _clear()
    for a, _ in pairs:  # the stored side cached, as when a recording meets many requests
        language.languages_of_pair(a, a)
    results["pair_warm_stored"] = _per_call(language.languages_of_pair, pairs, clear=False)
    for kb in (10, 100, 1000):
        stored, incoming, other = _long(kb)
        results[f"long_{kb}kb_one_sentence"] = _per_call(language.languages_of_pair, [(stored, incoming)] * 3, clear=True)
        results[f"long_{kb}kb_unrelated"] = _per_call(language.languages_of_pair, [(stored, other)] * 3, clear=True)

    settings = ProjectSettings(embedding_serve_threshold=0.9)
    judge = lambda stored, incoming: nearmatch.near_match(  # noqa: E731
        incoming, stored, settings, tier=Tier.EMBEDDING, score=0.95)
    _clear()
    results["near_match_with_gate"] = _per_call(judge, requests, clear=True)
    real = nearmatch.languages_of_pair
    nearmatch.languages_of_pair = lambda a, b: language.Languages(("en",), ())  # type: ignore[assignment]
    try:
        results["near_match_without_gate"] = _per_call(judge, requests, clear=True)
    finally:
        nearmatch.languages_of_pair = real  # type: ignore[assignment]
    data = {"machine": common.machine(), "results": results}
    common.write_json(args.out.with_suffix(".json"), data)
    args.out.write_text(render(data), encoding="utf-8")
    print(json.dumps(results, indent=1))
    return 0


def render(data: dict[str, Any]) -> str:
    r = data["results"]
    lines = ["# The language gate's cost (py3langid)", "",
             "Generated by `scripts/bench/language.py` (figures: language.json beside this file). "
             "A script, not a test.", "", "## Machine", "", "|  |  |", "|---|---|",
             *[f"| {k} | {v} |" for k, v in data["machine"].items()], "",
             f"Model load (once per process, on the first near-match that needs it): **{r['model_load_s']} s**.", "",
             "| what | calls | mean ms | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|"]
    for key, value in r.items():
        if isinstance(value, dict):
            lines.append(f"| {key.replace('_', ' ')} | {value['n']} | {value['mean_ms']} | {value['p50_ms']} | "
                         f"{value['p99_ms']} | {value['max_ms']} |")
    lines += ["", "`pair cold`: no cache, every segment of both texts identified. `pair warm stored`: the stored "
              "text's segments cached. `near match with/without gate`: `near_match` at embedding_serve_threshold 0.9 "
              "with a score of 0.95 on the same pairs (the gate runs only on a pair every other rule would serve, and "
              "in calibrated mode on one only the score holds back); without: the identification replaced by a "
              "constant. Long texts: only segments that differ are identified; past 50,000 differing characters "
              "the pair is not identified at all (and not served).", ""]
    return "\n".join(lines)
