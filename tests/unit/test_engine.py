"""The cache over a real store: index, admin operations, re-fingerprinting on settings changes."""

from __future__ import annotations

import pytest
from entries import chat, fingerprints, new_entry

from semula.engine.engine import Engine
from semula.engine.operations import run_operation
from semula.core.settings import SettingsError


def record(cache: Engine, text: str, project: str = "p", **params) -> int:
    return cache.record(new_entry(chat(text, **params), project, *cache.settings_for(project).fingerprint_inputs))


def lookup(cache: Engine, text: str, project: str = "p", **params):
    return cache.match(project, *fingerprints(chat(text, **params), *cache.settings_for(project).fingerprint_inputs))


@pytest.fixture
def cache(engine):
    return engine


def test_tiers_and_projects(cache):
    entry = record(cache, "Summarise run 4711 please")
    assert lookup(cache, "Summarise run 4711 please").tier == "exact"
    assert lookup(cache, "summarise   run 4711 please.").tier == "normalised"
    assert lookup(cache, "Summarise run 4711 please", project="other") is None
    assert lookup(cache, "Summarise run 4711 please", temperature=0.5) is None
    assert cache.entry(entry).body == b'{"ok": true}'


def test_scrub_pattern_refingerprints_recordings(cache):
    record(cache, "Summarise run-4711 please")
    assert lookup(cache, "Summarise run-9999 please") is None
    result = cache.recordings.config_set("p", "scrub_patterns", '["run-\\\\d+"]')
    assert result["refingerprinted"] == 1
    assert lookup(cache, "Summarise run-9999 please").tier == "normalised"
    # and it survives a restart: the new fingerprints are stored, not only indexed
    assert lookup(Engine.open(cache.store), "Summarise run-1 please").tier == "normalised"


def test_ignore_params_refingerprints(cache):
    record(cache, "hello", seed=1)
    assert lookup(cache, "hello", seed=2) is None
    cache.recordings.config_set("p", "ignore_params", "seed")
    assert lookup(cache, "hello", seed=2).tier == "normalised"


def test_operations_table_and_errors(cache):
    entry = record(cache, "hello")
    assert run_operation(cache, "entries.list", {"project": "p"})[0]["id"] == entry
    assert run_operation(cache, "entries.show", {"id": entry})["request"]["model"] == "gpt-4o"
    with pytest.raises(SettingsError, match="valid settings"):
        run_operation(cache, "config.set", {"project": "p", "key": "nope", "value": "1"})
    with pytest.raises(SettingsError, match="invalid project name"):
        run_operation(cache, "config.show", {"project": "x'; DROP TABLE entries; --"})
    with pytest.raises(ValueError, match="unknown operation"):
        run_operation(cache, "entries.nuke", {})
    assert run_operation(cache, "entries.delete", {"id": entry}) is True
    assert lookup(cache, "hello") is None


def test_a_bare_engine_does_no_start_up_work(tmp_path) -> None:
    """The constructor only assembles the parts; `Engine.open` syncs, builds the index and preloads."""
    import threading

    from entries import chat, new_entry
    from semula.engine.engine import Engine
    from semula.store.selection import StoreSpec, open_store

    store = open_store(StoreSpec.parse(None, tmp_path))
    store.upsert_entries([new_entry(chat("stored before the engine"))])
    before = {t.name for t in threading.enumerate()}
    bare = Engine(store)
    assert len(bare.index) == 0 and bare.preloaded(0) and "semula-preload" not in (
        {t.name for t in threading.enumerate()} - before)
    opened = Engine.open(store)
    assert opened.preloaded(30) and len(opened.index) == 1
    opened.close()


def test_a_change_read_before_a_delete_never_brings_the_recording_back(duckdb_engine, monkeypatch) -> None:
    """The follower thread applies another proxy's writes while this engine deletes: an entry it read just
    before the delete, or reads after it from an older change, stays out of memory (it would be served)."""
    from types import SimpleNamespace

    engine = duckdb_engine
    gone, kept = record(engine, "hello"), record(engine, "goodbye")
    read = engine.store.entries_by_ids

    def read_then_deleted(ids):
        entries = read(ids)  # read while it is still there...
        assert engine.recordings.delete_entry(gone)  # ...and deleted on the owner's thread meanwhile
        return entries

    monkeypatch.setattr(engine.store, "entries_by_ids", read_then_deleted)
    engine.apply_changes([SimpleNamespace(kind="entry", ref=gone), SimpleNamespace(kind="entry", ref=kept)])
    assert lookup(engine, "hello") is None and lookup(engine, "goodbye").entry_id == kept
    monkeypatch.setattr(engine.store, "entries_by_ids", lambda ids: [])  # an older change, read again later
    engine.apply_changes([SimpleNamespace(kind="entry", ref=gone)])
    assert lookup(engine, "hello") is None
