"""A near search reads each proposal's stored request from the answer cache when it holds the recording,
from the store otherwise: the same verdicts either way."""

from __future__ import annotations

from entries import chat, fingerprints, new_entry

from semula.core.cascade import NearQuery
from semula.core.settings import ProjectSettings
from semula.engine.engine import Engine

STORED = ["How many trains leave Berlin for Hamburg today", "How many trains leave Berlin for Munich today",
          "Wie viele Züge fahren heute von Berlin nach Köln", "How many buses leave Berlin for Hamburg tonight"]


def test_a_search_reads_stored_requests_from_memory_when_cached_with_the_same_verdicts(engine: Engine,
                                                                                      monkeypatch) -> None:
    key = engine.fingerprint_key
    for text in STORED:
        engine.record(new_entry(chat(text, key=key), "p"))
    asked = chat("How many trains leave Berlin for Hamburg today?", key=key)
    query = NearQuery("p", asked, *fingerprints(asked), ProjectSettings(lexical_review_threshold=0.2))
    read: list[list[int]] = []
    real = engine.store.canonicals_by_ids
    monkeypatch.setattr(engine.store, "canonicals_by_ids", lambda ids: read.append(list(ids)) or real(ids))

    from_memory = engine.searcher.find(engine.store, query)[0]
    assert from_memory and read == []  # every recording was cached when written
    engine.answers.clear()
    from_store = engine.searcher.find(engine.store, query)[0]
    assert read and {c.entry_id for c in from_store} <= set(read[0])
    assert [(c.entry_id, c.verdict) for c in from_memory] == [(c.entry_id, c.verdict) for c in from_store]
    assert any(c.verdict.serve or c.verdict.review for c in from_store)
