"""The lexical tier over a real store: freshness, bad input, review-queue rules."""

from __future__ import annotations

import threading
import time

import pytest
from entries import chat, fingerprints, new_entry
from work_counter import count_work

from semula.core.cascade import NearQuery
from semula.core.guard.diff import MAX_CHANGED_TOKENS
from semula.engine.engine import Engine
from semula.core.settings import ProjectSettings
from semula.store.duckdb.fts import MAX_QUERY_CHARS

canonical = chat


def record(cache: Engine, content, project="p") -> int:
    return cache.record(new_entry(chat(content), project))


def near(cache: Engine, content, project="p", settings=None):
    c = chat(content)
    return cache.searcher.search(NearQuery(project, c, *fingerprints(c), settings or ProjectSettings()))


@pytest.fixture
def cache(engine):
    return engine


def test_a_new_recording_is_findable_at_once_and_after_the_rebuild(cache):
    entry = record(cache, "Which trains leave Lyon for Paris before noon on Saturday")
    result = near(cache, "Which trains leave Lyon for Paris before midday on Saturday")
    assert result.best.entry_id == entry and result.served is None and result.queued
    if not hasattr(cache.lexical, "_fresh"):
        return  # Postgres full text is current at commit: there is no rebuild
    deadline = time.monotonic() + 10
    while cache.lexical._fresh and time.monotonic() < deadline:  # builds are not due at once: ask for one
        cache.lexical.maybe_rebuild(wait=True)  # (a no-op while the start-up build still runs)
        time.sleep(0.05)
    assert not cache.lexical._fresh, "the rebuild folds fresh entries into the index"
    other = near(cache, "Which trains leave Lyon for Paris before lunch on Saturday")
    assert other.best.entry_id == entry


def _indexed(cache) -> None:
    """Every recording in the built index (DuckDB): new ones are found by a scan until a build."""
    if not hasattr(cache.lexical, "_fresh"):
        return  # Postgres full text is current at commit
    deadline = time.monotonic() + 30
    while (cache.lexical._fresh or not cache.lexical._built) and time.monotonic() < deadline:
        cache.lexical.maybe_rebuild(wait=True)
        time.sleep(0.05)
    assert not cache.lexical._fresh and cache.lexical._built


@pytest.mark.parametrize("asked", ["Could you say hi", "  say HI!!  ", "Say hi now", "Then do it again"])
def test_a_prompt_of_common_words_is_proposed_from_the_index(cache, asked):
    """The index was built with English stopwords, which dropped "say", "hi", "could", "you", "now",
    "then", "it", "again" (Postgres's list drops "do", "it", "then", "again"): such a prompt proposed nothing, so nothing was queued for review."""
    said = record(cache, "Say hi")
    again = record(cache, "Do it again")
    record(cache, "Translate the contract into Portuguese")
    _indexed(cache)
    proposed = cache.lexical.propose("p", asked)
    assert (again if "again" in asked else said) in proposed, proposed


def test_never_the_same_pairing_twice_and_at_most_three(cache):
    for i in range(5):
        record(cache, f"Describe the red bicycle parked near the station entrance number {i}")
    first = near(cache, "Describe the blue bicycle parked near the station entrance number 1")
    again = near(cache, "Describe the blue bicycle parked near the station entrance number 1")
    assert 1 <= len(first.queued) <= 3 and again.queued == ()


def test_serving_needs_the_same_context(cache):
    settings = ProjectSettings(lexical_serve_threshold=0.8)
    record(cache, "Summarise the quarterly report for the board in five bullet points")
    assert near(cache, "Please summarise the quarterly report for the board in five bullet points",
                settings=settings).served is not None
    # below a perfect score only known harmless edits are served: "short" changes the answer
    assert near(cache, "Summarise the quarterly report for the board in five short bullet points",
                settings=settings).served is None
    c = canonical("Summarise the quarterly report for the board in five short bullet points")
    other_system = canonical([{"type": "text", "text": "Summarise the quarterly report for the board in five short bullet points"}])
    assert other_system.last_user_text() == c.last_user_text()


@pytest.mark.parametrize(
    "stored, incoming",
    [
        ("東京の天気はどうですか", "大阪の天気はどうですか"),
        ("ما هو الطقس في القاهرة اليوم", "ما هو الطقس في الرياض اليوم"),
        ("the and of to a", "not the and of to a"),
        ("?!... ,,, ;;;", "?!... ,,, ;;;;"),
        ("", ""),
    ],
)
def test_bad_input_never_serves_and_never_crashes(cache, stored, incoming):
    record(cache, stored)
    result = near(cache, incoming, settings=ProjectSettings(lexical_serve_threshold=0.0))
    assert result.served is None


def test_images_only_message(cache):
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    record(cache, image)
    assert near(cache, image).served is None


@pytest.mark.slow
def test_a_1mb_prompt_is_fast_enough(cache):
    # "Fast enough", counted rather than timed: the index query is cut to MAX_QUERY_CHARS, one
    # verdict per candidate, and the per-token steps read only the texts' differing middles.
    big = "lorem ipsum dolor sit amet " * 40_000
    record(cache, big + " first")
    with count_work(max_diff_tokens=2 * MAX_CHANGED_TOKENS) as work:
        result = near(cache, big + " second")
    assert result.served is None
    assert work.query_chars and max(work.query_chars) <= MAX_QUERY_CHARS
    assert work.verdicts == 1
    assert work.tokenised_chars <= 4_000  # of 2 MB of text
    assert work.largest_diff <= 2 * MAX_CHANGED_TOKENS


def test_project_names_are_bound_parameters(cache):
    record(cache, "hello world from quotes", project="p")
    assert near(cache, "hello world from quotes!", project="p' OR '1'='1").best is None


class _GatedCursor:
    """The rebuild's cursor, held inside its first statement until the test lets it go."""

    def __init__(self, real) -> None:
        self.real, self.entered, self.release = real, threading.Event(), threading.Event()

    def execute(self, *args):
        self.entered.set()
        assert self.release.wait(30), "the test never released the rebuild"
        return self.real.execute(*args)

    def __getattr__(self, name):  # close, fetchone, …: the real cursor's
        return getattr(self.real, name)


@pytest.mark.slow
def test_closing_the_store_mid_rebuild_waits_for_it_and_no_build_runs_after(tmp_path, monkeypatch, caplog):
    """The "full-text index rebuild failed (Connection already closed!)" warnings at shutdown: the
    connection was closed under a background build. Whoever closes the store now stops the builds first."""
    from semula.store.duckdb import fts
    from semula.store.duckdb.store import DuckDBStore

    monkeypatch.setattr(fts, "REBUILD_MIN_SECONDS", 0.0)
    monkeypatch.setattr(fts, "FRESH_MAX_SECONDS", 0.0)
    store = DuckDBStore.open(tmp_path)
    engine = Engine.open(store)
    deadline = time.monotonic() + 30  # the start-up build: let it finish, then arm the gate for the next one
    while engine.lexical._building and time.monotonic() < deadline:
        time.sleep(0.01)
    with engine.lexical._build_lock:
        pass
    gate = engine.lexical._cursor = _GatedCursor(engine.lexical._cursor)
    record(engine, "Which trains leave Lyon for Paris before noon on Saturday")
    assert gate.entered.wait(30), "no rebuild started"
    closer = threading.Thread(target=store.close)  # the store itself, as a failed engine start closes it
    closer.start()
    closer.join(1.0)
    assert closer.is_alive(), "the store closed its connection under a running rebuild"
    gate.release.set()
    closer.join(30)
    assert not closer.is_alive()
    engine.lexical.written(999, "p", "a write after close schedules nothing")
    engine.lexical.maybe_rebuild()
    assert engine.lexical._timer is None and not engine.lexical._building
    assert not [r for r in caplog.records if "rebuild failed" in r.getMessage()], caplog.text


def _settled(tmp_path, monkeypatch):
    """A DuckDB engine whose start-up build is done, builds allowed back to back (the fresh rules aside)."""
    from semula.store.duckdb import fts
    from semula.store.duckdb.store import DuckDBStore

    monkeypatch.setattr(fts, "REBUILD_MIN_SECONDS", 0.0)
    engine = Engine.open(DuckDBStore.open(tmp_path))
    deadline = time.monotonic() + 30
    while (engine.lexical._building or not engine.lexical._built) and time.monotonic() < deadline:
        engine.lexical.maybe_rebuild(wait=True)
        time.sleep(0.01)
    assert engine.lexical._built and not engine.lexical._building
    return engine


def test_a_few_fresh_entries_wait_for_their_age_not_a_build_per_write(tmp_path, monkeypatch):
    """A build re-indexes the whole table: at one a write, a recording proxy built without pause and its
    RSS rose with each build. A few new entries wait (found by the fresh scan) until the oldest is
    FRESH_MAX_SECONDS old."""
    from semula.store.duckdb import fts

    engine = _settled(tmp_path, monkeypatch)
    try:
        built_at = engine.lexical._last_build
        entry = record(engine, "Which trains leave Lyon for Paris before noon on Saturday")
        time.sleep(0.3)
        assert not engine.lexical._building and engine.lexical._fresh, "a build started at the first write"
        assert engine.lexical._timer is not None, "nothing will build it later"
        assert near(engine, "Which trains leave Lyon for Paris before midday on Saturday").best.entry_id == entry
        with engine.lexical._lock:  # the oldest fresh entry is now old enough
            engine.lexical._stale_since -= fts.FRESH_MAX_SECONDS
        engine.lexical.maybe_rebuild()
        deadline = time.monotonic() + 30
        while engine.lexical._fresh and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not engine.lexical._fresh and engine.lexical._last_build > built_at
    finally:
        engine.close()


def test_many_fresh_words_build_at_once(tmp_path, monkeypatch):
    from semula.store.duckdb import fts

    monkeypatch.setattr(fts, "FRESH_WORDS_REBUILD", 40)
    engine = _settled(tmp_path, monkeypatch)
    try:
        record(engine, " ".join(f"word{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(60)))  # 60 > 40
        deadline = time.monotonic() + 30
        while engine.lexical._fresh and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not engine.lexical._fresh, "the fresh words passed their bound and no build ran"
        assert engine.lexical._fresh_words == 0
    finally:
        engine.close()


def test_a_miss_queues_the_recording_its_message_names_when_the_index_proposed_none(cache, monkeypatch):
    """The miss message ranks the endpoint's recordings too; one it names at or above the review
    threshold (by the queue's own score) is queued, so a person can approve what the message points at."""
    entry = record(cache, "Wie spät ist es in Lima")
    record(cache, "Translate the contract into Portuguese")
    monkeypatch.setattr(cache.lexical, "propose", lambda *args, **kwargs: [])
    request = chat("Bitte: wie spät ist es in Lima")
    _, normalised_fp = fingerprints(request)
    assert near(cache, "Bitte: wie spät ist es in Lima").queued == ()
    context = cache.miss_context("p", request, normalised_fp, None)
    best = context.nearest[0]
    assert best.entry_id == entry and best.reviewable and best.similarity >= ProjectSettings().lexical_review_threshold
    assert context.candidate is not None and context.candidate.candidate_id is not None
    (row,) = cache.review.list("p")
    assert row["entry_id"] == entry and round(row["score"], 3) == best.similarity
    again = cache.miss_context("p", request, normalised_fp, None)  # never queued twice
    assert again.candidate.candidate_id == context.candidate.candidate_id and len(cache.review.list("p")) == 1
