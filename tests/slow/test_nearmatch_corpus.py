"""The lexical tier and its guard against the request-pair corpora (../shared/corpus).

Each pair runs through the matching pipeline as it would after ``stored`` was
recorded: exact fingerprint, normalised fingerprint, then the lexical
near-match (semula.core.nearmatch.pipeline_outcome). Targets, from issue 3:
no `different` pair is ever served (default settings, serve threshold 0.9,
and the guard alone at serve threshold 0); every `format` and `volatile` pair
is served by a fingerprint; review recall of `same` pairs is at least 0.9.

The review floor and the word handling were tuned on the odd-numbered pair
ids; the even-numbered ones are checked separately so that overfitting shows
(scripts/bench.py sweep writes the tables).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from functools import cache
from typing import Any

import pytest

from semula.core.request.canonical import CanonicalRequest
from semula.core.guard import guard
from semula.core.nearmatch import near_match
from semula.core.pair import PairOutcome, pipeline_outcome
from semula.engine.evaluate import canonical_of
from semula.core.settings import ProjectSettings
from shared_paths import REPO, corpus_file, import_path
from entries import TEST_KEY

sweep = import_path("bench_sweep", REPO / "scripts" / "bench" / "sweep.py").sweep

CORPUS = corpus_file("dev-pairs.jsonl").parent
DEFAULTS = ProjectSettings()
# The floor the odd-id tuning chose (the ADR's untuned 0.6 before; the default is now 0.50, for full recall).
TUNED_REVIEW_FLOOR = 0.55
GUARDED = ("number", "spelled_number", "negation", "antonym", "entity", "date", "unit", "subtle")


@dataclasses.dataclass(frozen=True)
class Pair:
    id: str
    number: int
    category: str
    expect: str
    note: str
    stored: CanonicalRequest
    incoming: CanonicalRequest


def _canonical(side: dict[str, Any]) -> CanonicalRequest:
    canonical = canonical_of(side, TEST_KEY)
    assert canonical.parsed, f"{side['provider']} {side['path']} was not understood"
    return canonical


def _load(name: str) -> list[Pair]:
    path = corpus_file(name)
    if not path.exists():
        return []
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            p = json.loads(line)
            number = int(re.search(r"(\d+)$", p["id"]).group(1))  # type: ignore[union-attr]
            pairs.append(
                Pair(p["id"], number, p["category"], p["expect"], p.get("note", ""),
                     _canonical(p["stored"]), _canonical(p["incoming"]))  # fmt: skip
            )
    return pairs


DEV = _load("dev-pairs.jsonl")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not DEV, reason=f"request-pair corpus not found under {CORPUS}")]


@cache
def _public() -> tuple[Pair, ...]:
    return tuple(_load("public-paraphrase-pairs.jsonl"))


@cache
def _outcomes(settings: ProjectSettings, public: bool = False) -> dict[str, PairOutcome]:
    pairs = _public() if public else DEV
    return {p.id: pipeline_outcome(p.stored, p.incoming, settings) for p in pairs}


def _false_hits(settings: ProjectSettings) -> Counter[str]:
    outcomes = _outcomes(settings)
    return Counter(p.category for p in DEV if p.expect == "different" and outcomes[p.id].action == "served")


def _review_recall(pairs: list[Pair] | tuple[Pair, ...], outcomes: dict[str, PairOutcome]) -> float:
    same = [p for p in pairs if p.expect == "same"]
    return sum(outcomes[p.id].action in ("served", "review") for p in same) / len(same)


@pytest.mark.parametrize(
    "settings",
    [DEFAULTS, dataclasses.replace(DEFAULTS, lexical_serve_threshold=0.9)],
    ids=["defaults", "serve threshold 0.9"],
)
def test_no_different_pair_is_served(settings: ProjectSettings) -> None:
    assert _false_hits(settings) == Counter(), "false hits per category"


@pytest.mark.parametrize("pair", [p for p in DEV if p.category in ("format", "volatile")], ids=lambda p: p.id)
def test_format_and_volatile_pairs_are_served_by_a_fingerprint(pair: Pair) -> None:
    outcome = _outcomes(DEFAULTS)[pair.id]
    assert (outcome.action, outcome.tier in ("exact", "normalised")) == ("served", True), pair.note


def test_review_recall_with_defaults() -> None:
    assert _review_recall(DEV, _outcomes(DEFAULTS)) >= 0.9


@pytest.mark.parametrize("parity", ["odd", "even"])
@pytest.mark.parametrize("floor", [DEFAULTS.lexical_review_threshold, TUNED_REVIEW_FLOOR])
def test_review_recall_on_each_half(parity: str, floor: float) -> None:
    half = [p for p in DEV if p.number % 2 == (parity == "odd")]
    outcomes = _outcomes(dataclasses.replace(DEFAULTS, lexical_review_threshold=floor))
    assert _review_recall(half, outcomes) >= 0.9


@pytest.mark.parametrize(
    "pair", [p for p in DEV if p.expect == "different" and p.category in GUARDED], ids=lambda p: p.id
)
def test_the_guard_alone_refuses_every_guarded_category(pair: Pair) -> None:
    settings = dataclasses.replace(DEFAULTS, lexical_serve_threshold=0.0)
    verdict = near_match(pair.incoming, pair.stored, settings)
    assert not verdict.serve, pair.note
    assert guard(pair.stored.last_user_text(), pair.incoming.last_user_text()) is not None, pair.note


@pytest.mark.parametrize("pair", [p for p in DEV if p.category == "shape"], ids=lambda p: p.id)
def test_shape_pairs_are_stopped_by_context_or_shape(pair: Pair) -> None:
    verdict = near_match(pair.incoming, pair.stored, dataclasses.replace(DEFAULTS, lexical_serve_threshold=0.0))
    assert not verdict.serve
    assert verdict.reason is not None
    assert verdict.reason.startswith(("context differs", "shape differs", "tools differ", "parameters differ", "model"))


def test_no_false_hit_at_any_swept_threshold_with_the_guard() -> None:
    rows = sweep([(p.expect, p.stored, p.incoming) for p in DEV])
    assert [r.serve_threshold for r in rows if r.guard and r.dev_false_hits] == []
    assert any(not r.guard and r.dev_false_hits for r in rows), "without the guard the sweep should show false hits"


@pytest.mark.slow
def test_public_paraphrase_pairs() -> None:
    public = _public()
    if not public:
        pytest.skip("public-paraphrase-pairs.jsonl not found")
    # Measured: 0.622 at 0.6, 0.699 at 0.55, 0.800 at the default 0.50; QQP duplicates are loose paraphrases.
    assert _review_recall(public, _outcomes(DEFAULTS, public=True)) >= 0.75
    tuned = dataclasses.replace(DEFAULTS, lexical_review_threshold=TUNED_REVIEW_FLOOR)
    assert _review_recall(public, _outcomes(tuned, public=True)) >= 0.65
    # Measured 0.266: the guard refuses about a quarter of loose paraphrases (they go to review).
    refused = sum(guard(p.stored.last_user_text(), p.incoming.last_user_text()) is not None for p in public)
    assert refused / len(public) < 0.35
