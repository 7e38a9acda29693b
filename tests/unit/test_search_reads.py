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
    ids = [engine.record(new_entry(chat(text, key=key), "p")) for text in STORED]
    asked = chat("How many trains leave Berlin for Hamburg today?", key=key)
    query = NearQuery("p", asked, *fingerprints(asked), ProjectSettings(lexical_review_threshold=0.2))
    read: list[int] = []
    real = engine.store.canonicals_by_ids
    monkeypatch.setattr(engine.store, "canonicals_by_ids", lambda wanted: read.extend(wanted) or real(wanted))
    # What the cache holds is set here: a shared store's follower thread fills the engine's own at any time.
    held = {entry_id: engine.store.get_entry(entry_id) for entry_id in ids}

    def searched(cached: dict) -> list:
        read.clear()
        monkeypatch.setattr(engine.searcher, "cached", cached.get)
        return [(c.entry_id, c.verdict) for c in engine.searcher.find(engine.store, query)[0]]

    from_memory = searched(held)
    assert from_memory and read == []
    from_store = searched({})
    assert {entry_id for entry_id, _ in from_store} <= set(read)
    half = {entry_id: held[entry_id] for entry_id in ids[::2]}
    partly = searched(half)
    assert read and not set(read) & set(half)  # only what the cache does not hold is read
    assert from_memory == from_store == partly
    assert any(verdict.serve or verdict.review for _, verdict in from_store)
