"""Memory budgets count everything a cache holds (issue 12 item 10), by counted bytes, not RSS."""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import tracemalloc

import pytest
from entries import chat, new_entry

from semula.engine import recordings
from semula.engine.engine import Engine
from semula.engine.index import AnswerCache, entry_bytes, json_held_bytes
from semula.store.duckdb.store import DuckDBStore
from semula.store.types import Entry

PROMPT_20KB = "please review the quarterly budget figures for the northern region " * 300


def entry_of(i: int, prompt: str, body: bytes = b'{"ok": true}') -> Entry:
    new = new_entry(chat(f"{prompt} {i}"), "p", body=body)
    return Entry(**{f.name: getattr(new, f.name) for f in dataclasses.fields(new)}, id=i)


def test_a_cached_entry_counts_its_request_and_text_not_just_its_body():
    entry = entry_of(1, PROMPT_20KB)
    assert len(entry.body) < 100
    assert entry_bytes(entry) > 2 * len(PROMPT_20KB)  # the parsed request and the last text both hold it


def test_the_count_is_close_to_what_the_parsed_request_holds():
    def walk(value) -> int:
        if isinstance(value, dict):
            return sys.getsizeof(value) + sum(walk(k) + walk(v) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return sys.getsizeof(value) + sum(walk(v) for v in value)
        return sys.getsizeof(value)

    for content in ("hi", PROMPT_20KB, [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]):
        canonical = chat(content).to_json()
        counted = json_held_bytes(json.dumps(canonical, ensure_ascii=False, separators=(",", ":")))
        assert walk(canonical) <= counted <= 1.3 * walk(canonical), content


@pytest.mark.slow
@pytest.mark.parametrize("n_headers", [2, 15])
def test_a_served_entry_holds_no_more_than_it_counts(n_headers):
    """Measured (tracemalloc) with what serving it adds, its headers' wire form: a provider's answer carries
    15-20 headers, and counting them once let the cache hold ~10 % more than its budget."""
    def build(i: int) -> Entry:
        entry = entry_of(i, "soak new question, client 7 number", body=json.dumps(
            {"id": f"chatcmpl-{i}", "choices": [{"message": {"content": f"answer number {i} " * 10}}]}).encode())
        canonical = json.loads(json.dumps(entry.canonical))  # as the store gives it: parsed, not shared
        return dataclasses.replace(entry, canonical=canonical, last_text=entry.last_text + " ",
                                   headers=[(f"x-header-{k}", f"value {k} {i}") for k in range(n_headers)])

    # Once before measuring: what the first build fills for the process (compiled patterns, caches, lazy
    # imports) is not the entries' memory, and whether an earlier test on this worker filled it is luck.
    warm = [build(-i) for i in range(1, 4)]
    assert all(entry.wire_headers for entry in warm)
    del warm
    gc.collect()
    tracemalloc.start()
    try:
        entries = [build(i) for i in range(500)]
        for entry in entries:
            assert entry.wire_headers
        # Garbage the collector had not reached yet is not held, and when it runs depends on what earlier
        # tests on this worker left (it was ~400 bytes an entry, the margin this test failed by once).
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] / len(entries)
    finally:
        tracemalloc.stop()
    counted = sum(map(entry_bytes, entries)) / len(entries)
    assert held <= counted <= 1.3 * held, (held, counted)


@pytest.mark.slow
def test_the_answer_cache_stays_within_its_budget_by_counted_bytes():
    cache = AnswerCache(max_bytes=1_000_000)
    for i in range(100):  # ~100 × 40+ KB held, tiny bodies: counting bodies only would keep them all
        cache.put(entry_of(i, PROMPT_20KB))
    assert cache.nbytes <= 1_000_000
    assert cache.nbytes == sum(entry_bytes(cache.get(i)) for i in range(100) if cache.get(i) is not None)
    assert cache.get(99) is not None and cache.get(0) is None  # least recently used out first


def test_an_entry_bigger_than_the_whole_budget_is_not_cached():
    cache = AnswerCache(max_bytes=100_000)
    cache.put(entry_of(1, "short"))
    cache.put(entry_of(2, PROMPT_20KB * 10))
    assert cache.get(2) is None and cache.get(1) is not None and cache.nbytes <= 100_000


@pytest.mark.slow
def test_the_preload_counts_whole_entries(tmp_path, monkeypatch):
    store = DuckDBStore.open(tmp_path)
    for i in range(120):
        store.upsert_entry(new_entry(chat(f"{PROMPT_20KB} {i}"), "p"))
    monkeypatch.setattr(recordings, "PRELOAD_BYTES", 1_000_000)
    engine = Engine.open(store)
    try:
        assert engine.preloaded(timeout=60)
        assert 0 < engine.answers.nbytes <= 1_000_000
    finally:
        engine.close()


def test_a_20mb_prompt_leaves_a_bounded_fresh_word_list(duckdb_engine):
    engine = duckdb_engine
    before = engine.lexical.nbytes()
    huge = " ".join(f"word{i % 50_000}" for i in range(2_000_000))  # ~20 MB of text
    engine.lexical.written(10**9, "p", huge)
    assert engine.lexical.nbytes() - before < 1_000_000
