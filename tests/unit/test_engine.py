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


def test_overlapping_reloads_leave_the_newest_read_in_memory(duckdb_engine):
    """A shared store's follower reloads on its own thread (a settings change) while the caller re-fingerprints
    and reloads: the reload that read the store first must not replace memory last (CI saw the re-fingerprinted
    recording missed on Postgres, once in ~10 runs)."""
    import threading

    engine = duckdb_engine
    record(engine, "Summarise run-4711 please")
    read, go_on, written = threading.Event(), threading.Event(), threading.Event()
    index_rows, set_fingerprints = engine.store.index_rows, engine.store.set_fingerprints

    def rows_then_pause():
        rows = index_rows()
        if threading.current_thread().name == "follower":
            read.set()
            go_on.wait(30)
        return rows

    def set_then_tell(*args):
        set_fingerprints(*args)
        written.set()

    engine.store.index_rows, engine.store.set_fingerprints = rows_then_pause, set_then_tell
    follower = threading.Thread(target=engine.recordings.reload, name="follower")
    follower.start()
    read.wait(30)  # the follower has read the old fingerprints
    caller = threading.Thread(target=engine.recordings.config_set, args=("p", "scrub_patterns", '["run-\\\\d+"]'))
    caller.start()
    written.wait(30)
    caller.join(0.5)  # its reload waits for the follower's (before: it finished here, and the follower's came last)
    go_on.set()
    follower.join(30)
    caller.join(30)
    assert lookup(engine, "Summarise run-9999 please").tier == "normalised"
