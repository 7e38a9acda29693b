"""DuckDB's own memory is bounded (issue 12: a long-running proxy grew ~10 KB resident per recording,
because DuckDB kept up to 80 % of RAM): a memory limit on every store connection, bulk loads in
chunks that fit it, and a preload that never holds the whole table's bodies at once."""

from __future__ import annotations

import gc
import hashlib
import tracemalloc

import pytest
from entries import chat, new_entry

from semula.core.decision import Match
from semula.core.fasthit import FastHit, fast_key
from semula.engine.index import FINGERPRINT_BYTES, FingerprintIndex, _key
from semula.proxy.call.fastpath import FAST_ENTRY_BYTES, FastPath
from semula.store.duckdb import store as duckdb_store
from semula.store.duckdb.connect import MEMORY_ENV
from semula.store.duckdb.errors import describe_duckdb_error
from semula.store.duckdb.store import DuckDBStore

PASS_ENTRIES = 50
BODY = b'{"answer": "' + b"x" * 200_000 + b'"}'  # 200 KB answers: 400 of them are 80 MB


def test_every_store_connection_has_a_memory_limit(tmp_path, monkeypatch):
    store = DuckDBStore.open(tmp_path / "a")
    limit = store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    store.close()
    assert limit.endswith("MiB") and float(limit.split()[0]) <= 512, limit
    monkeypatch.setenv(MEMORY_ENV, "64MB")
    store = DuckDBStore.open(tmp_path / "b")
    try:
        assert store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "61.0 MiB"
    finally:
        store.close()


@pytest.mark.slow  # 80 MB written and read back: the whole suite runs it, `scripts/test --quick` does not
def test_more_recordings_than_the_memory_limit_load_and_preload(tmp_path, monkeypatch):
    """80 MB of answers under a 64 MB limit: one bulk load and the preload both succeeded before only
    because DuckDB could take memory without bound (a transaction holds what it wrote; the preload's
    window held every body)."""
    monkeypatch.setenv(MEMORY_ENV, "64MB")
    monkeypatch.setattr(duckdb_store, "BULK_CHUNK_BYTES", 8 * 1024 * 1024)
    store = DuckDBStore.open(tmp_path)
    try:
        news = [new_entry(chat(f"question {i}"), body=BODY) for i in range(400)]
        ids = store.upsert_entries(news + news[:3])  # a repeated request is one entry, the same id
        assert len(set(ids)) == 400 and ids[400:] == ids[:3]
        assert all(store.get_entry(i).request_fp == n.request_fp for i, n in zip(ids, news))
        recent = store.recent_entries(30 * 1024 * 1024)
        assert 100 < len(recent) < 160  # ~30 MB of 200 KB answers
        assert [e.id for e in recent] == sorted(ids)[-len(recent):]  # the newest, oldest first
    finally:
        store.close()


def test_a_closing_engines_preload_stops_between_pages(tmp_path):
    """A stop does not wait for 64 MB of answers: the preload stops at its next page, keeping the newest."""
    store = DuckDBStore.open(tmp_path)
    try:
        ids = store.upsert_entries([new_entry(chat(f"question {i}")) for i in range(200)])
        asked = []
        recent = store.recent_entries(64 * 1024 * 1024, stopping=lambda: asked.append(1) or len(asked) > 1)
        assert 0 < len(recent) < 200 and [e.id for e in recent] == sorted(ids)[-len(recent):]
        assert len(store.recent_entries(64 * 1024 * 1024)) == 200
    finally:
        store.close()


def test_running_out_of_duckdbs_memory_says_how_to_raise_it(tmp_path):
    import duckdb

    message = describe_duckdb_error(duckdb.OutOfMemoryException(
        "Out of Memory Error: failed to pin block of size 256.0 KiB (121.9 MiB/122.0 MiB used)"), tmp_path)
    assert "SEMULA_DUCKDB_MEMORY" in message and "locked" not in message


@pytest.mark.parametrize("fp", ["a" * 64, "f00d" * 16, "not-a-digest", "A" * 64, "g" * 64, "", "fp2:" + "a" * 64,
                                "nfp2:" + "a" * 64, "fp2:" + "A" * 64, "fp2:" + "g" * 64, ":" + "a" * 64, "\ud800:" + "a" * 64])
def test_the_index_keys_any_fingerprint_and_keeps_projects_apart(fp):
    index = FingerprintIndex()
    index.load([(1, "p", fp, "n" + fp), (2, "q", fp, "m")], [("p", "alias", 1)], {})
    assert index.match("p", fp, None).entry_id == 1 and index.match("q", fp, None).entry_id == 2
    assert index.match("p", "other", "n" + fp).tier == "normalised"
    assert index.match("p", "other", "alias").tier == "alias" and index.match("q", "other", "alias") is None
    assert index.projects_with(fp) == {"p", "q"} and index.projects_with("b" * 64) == set()
    assert len(index) == 2


def test_versioned_digests_are_held_as_bytes_and_never_share_a_key():
    digest = "ab" * 32
    fps = [digest, f"fp2:{digest}", f"nfp2:{digest}", f"fp3:{digest}", f"p:fp2:{digest}", f":{digest}"]
    assert isinstance(_key(f"fp2:{digest}"), bytes) and isinstance(_key(f"nfp2:{digest}"), bytes)
    assert len({_key(fp) for fp in fps}) == len(fps)
    index = FingerprintIndex()
    for entry_id, fp in enumerate(fps):
        index.add(entry_id, "p", fp, "n")
    assert [index.match("p", fp, None).entry_id for fp in fps] == list(range(len(fps)))


def _held_per_item(fill, n: int = 5000) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fill(n)
        return tracemalloc.get_traced_memory()[0] / n
    finally:
        tracemalloc.stop()


def test_what_the_index_and_the_fast_path_say_they_hold_is_what_they_hold():
    """The soak judges RSS against what the proxy counts it holds: the estimates must be measured ones."""
    index, fast, owner = FingerprintIndex(), FastPath(), object()

    def fp(prefix: str, i: int) -> str:
        return prefix + hashlib.sha256(f"{prefix}{i}".encode()).hexdigest()

    def fill_index(n: int) -> None:
        for i in range(n):  # fresh strings, as each recording's are
            index.add(100_000 + i, "project", fp("fp2:", i), fp("nfp2:", i))

    def fill_fast(n: int) -> None:
        for i in range(n):
            key = fast_key("project", "POST", "api.openai.com", "/v1/chat/completions", (), (), f"body {i}".encode())
            fast.put(owner, key, FastHit(Match("exact", 100_000 + i), fp("fp2:", i), None, (), "openai", "gpt-4o-mini"))

    per_fingerprint, per_fast_entry = _held_per_item(fill_index), _held_per_item(fill_fast)
    assert 0.8 * FINGERPRINT_BYTES <= per_fingerprint <= 1.25 * FINGERPRINT_BYTES, per_fingerprint
    assert 0.8 * FAST_ENTRY_BYTES <= per_fast_entry <= 1.25 * FAST_ENTRY_BYTES, per_fast_entry
    assert index.nbytes() == len(index) * FINGERPRINT_BYTES and fast.nbytes() == len(fast) * FAST_ENTRY_BYTES


def test_upper_and_lower_case_digests_never_share_an_entry():
    index = FingerprintIndex()
    index.add(1, "p", "ab" * 32, "x")
    assert index.match("p", "AB" * 32, None) is None


def test_the_memory_operation_counts_what_the_proxy_holds(duckdb_engine):
    from semula.engine.operations import run_operation

    duckdb_engine.record(new_entry(chat("how much do you hold"), body=BODY))
    held = run_operation(duckdb_engine, "memory", {})
    assert held["fingerprints"] == 1 and held["answer_cache_budget"] == 64 * 1024 * 1024
    assert held["fingerprint_bytes"] == FINGERPRINT_BYTES
    assert 0 < held["answer_cache_bytes"] <= held["answer_cache_budget"]
    assert held["store_bytes"] > 0 and held["lexical_bytes"] >= 0


def test_malloc_arenas_are_capped_unless_the_user_chose(monkeypatch):
    from semula.proxy.run.malloc import limit_arenas

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_arenas() is False  # the user's setting stands
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert limit_arenas() is True  # glibc (this machine)


def test_the_heap_is_trimmed_on_one_thread_and_freed_pages_go_back():
    from semula.proxy.run.malloc import start_trimming, trim

    thread = start_trimming()
    assert thread is not None and thread.daemon and thread.is_alive()
    assert start_trimming() is thread  # one per process, however many addons load
    held = [bytes(20_000) for _ in range(3_000)]  # 60 MB in the heap, then every other one freed:
    del held[::2]  # holes the heap's top can't give back, the pages inside them can
    assert trim() is True


def test_a_pass_over_every_stored_request_reads_pages_not_the_whole_table(tmp_path, monkeypatch):
    """Re-fingerprinting (a settings change, an upgrade on open) read every canonical request of a
    project in one query: 10k prompts of 20 KB ran out of DuckDB's 512 MB and the store did not open
    (scripts/bench.py miss_explanation). Every such pass now reads pages of CANONICALS_PAGE rows."""
    from semula.core.settings import ProjectSettings
    from semula.engine.engine import Engine
    from semula.recordings.folder import RecordingsFolder
    from semula.store import base

    monkeypatch.setattr(base, "CANONICALS_PAGE", 7)
    store = DuckDBStore.open(tmp_path / "data")
    ids = store.upsert_entries([new_entry(chat(f"question {i}")) for i in range(PASS_ENTRIES)])
    pages: list[int] = []
    real = store.canonicals_after

    def counted(after_id: int, limit: int = 1000):
        rows = real(after_id, limit)
        pages.append(len(rows))
        return rows

    monkeypatch.setattr(store, "canonicals_after", counted)
    monkeypatch.setattr(store, "project_canonicals", None)  # no pass may read a project in one query
    assert [i for i, _, _ in base.each_canonical(store, "p")] == sorted(ids)
    assert not list(base.each_canonical(store, "another project"))
    assert max(pages) == 7 and sum(pages) == 2 * PASS_ENTRIES
    engine = Engine.open(store)  # a store these entries never went through: brought up to date on open
    try:
        read = sum(pages)
        assert engine.recordings.refingerprint("p", ProjectSettings(scrub_patterns=(r"question \d+",))) == PASS_ENTRIES
        assert sum(pages) - read == PASS_ENTRIES  # every request, a page at a time
        store.set_fingerprint_version("fp1")
        assert engine.recordings.upgrade_fingerprints() == PASS_ENTRIES
        assert RecordingsFolder(tmp_path / "recordings", tmp_path / "data").export(store) == PASS_ENTRIES
        assert max(pages) == 7
    finally:
        engine.close()
