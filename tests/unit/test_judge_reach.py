"""The near tiers judge only the proposals that can matter (`engine.tiers.base.judge`): leaving out the rest
changes no search's outcome. Every stored side of the dev pairs (and hand-written near-duplicates in
other languages) in one project, so each incoming request meets many proposals; each search is run
twice, pruned and with every proposal judged, and must serve, queue and name the same recordings."""

from __future__ import annotations

import json
import time

import pytest
from entries import chat, fingerprints, new_entry
from shared_paths import corpus_file

import semula.engine.tiers.base as tiers_base
from semula.core.cascade import Candidate, NearQuery
from semula.core.settings import ProjectSettings
from semula.engine.evaluate import canonical_of

pytestmark = pytest.mark.slow  # ~600 recordings and ~1,000 searches, twice: the whole suite runs it

# Near-duplicates with one word changed, in other languages than the corpus's main one: many proposals
# score above the review threshold, some at the serve threshold.
FAMILIES = [
    "Wie viele Züge fahren heute von Berlin nach {} ab",
    "¿Cuántos trenes salen hoy de Madrid hacia {}?",
    "Combien de trains partent aujourd'hui de Lyon pour {} ce soir",
    "Quanti treni partono oggi da Roma per {} domani mattina",
    "Hoeveel treinen vertrekken vandaag uit Utrecht naar {}",
]
PLACES = ["Hamburg", "München", "Köln", "Sevilla", "Valencia", "Paris", "Marseille", "Milano", "Napoli", "Amsterdam"]


def _key(c: Candidate) -> tuple[bool, float, int]:
    return c.verdict.serve, c.verdict.score, c.entry_id  # as NearSearcher.settle orders them


def _what_matters(found: list[Candidate]) -> tuple[Candidate | None, dict[int, object]]:
    """The best candidate, and every one that serves or could be queued, with its verdict."""
    best = max(found, key=_key, default=None)
    return best, {c.entry_id: c.verdict for c in found if c.verdict.serve or c.verdict.review}


@pytest.mark.parametrize("settings", [
    ProjectSettings(),
    ProjectSettings(lexical_review_threshold=0.2, lexical_serve_threshold=0.8),
    ProjectSettings(near_serve="calibrated"),
], ids=["defaults", "low-thresholds", "calibrated"])
def test_pruned_judging_serves_queues_and_names_what_judging_all_would(duckdb_engine, monkeypatch, settings):
    engine = duckdb_engine
    key = engine.fingerprint_key
    incoming = []
    for line in corpus_file("dev-pairs.jsonl").read_text().splitlines():
        pair = json.loads(line)
        try:
            stored, asked = canonical_of(pair["stored"], key), canonical_of(pair["incoming"], key)
        except Exception:  # a side no adapter reads is not a near-match case
            continue
        engine.record(new_entry(stored, "p"))
        incoming.append(asked)
    for family in FAMILIES:
        for place in PLACES:
            engine.record(new_entry(chat(family.format(place), key=key), "p"))
        incoming += [chat(family.format(p), key=key) for p in ("Dresden", "Bilbao", "Nantes", "Torino", "Gent")]
    deadline = time.monotonic() + 60  # the same proposals in both runs: every recording in the built index
    while (engine.lexical._fresh or not engine.lexical._built) and time.monotonic() < deadline:
        engine.lexical.maybe_rebuild(wait=True)  # (a no-op while the start-up build still runs)
        time.sleep(0.05)
    assert not engine.lexical._fresh and engine.lexical._built

    def searched(pruned: bool) -> list[tuple[Candidate | None, dict[int, object]]]:
        with monkeypatch.context() as m:
            if not pruned:
                m.setattr(tiers_base, "near_reach", lambda *a, **k: (0.0, True))
            return [_what_matters(engine.searcher.find(engine.store, NearQuery(
                "p", c, *fingerprints(c), settings))[0]) for c in incoming]

    judged: list[int] = []
    real_judge = tiers_base.near_match
    monkeypatch.setattr(tiers_base, "near_match", lambda *a, **k: judged.append(1) or real_judge(*a, **k))
    pruned = searched(True)
    pruned_count = len(judged)
    full = searched(False)
    assert pruned_count < len(judged) - pruned_count, "the pruning leaves proposals unjudged"
    print(f"judged {pruned_count} of {len(judged) - pruned_count} proposals")
    assert sum(1 for best, _ in full if best is not None) > len(incoming) / 2
    assert any(matters for _, matters in full), "some proposals serve or could be queued"
    for c, (best, matters), (full_best, full_matters) in zip(incoming, pruned, full):
        assert matters == full_matters, c.last_user_text()
        assert (best.entry_id, best.verdict) == (full_best.entry_id, full_best.verdict) if full_best else best is None
