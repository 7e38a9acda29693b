"""Recordings written together (a burst of misses): the same recordings, ids and memory as one at a time,
and the store thread's batching hands each caller its own id, or its failure."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from entries import chat, fingerprints, new_entry

from semula.engine.engine import Engine
from semula.proxy.run.storethread import StoreThread


def _news(engine: Engine, texts: list[str], body: bytes = b'{"ok": true}') -> list[Any]:
    inputs = engine.settings_for("p").fingerprint_inputs
    return [new_entry(chat(text), "p", *inputs, body=body) for text in texts]


@pytest.mark.parametrize("size", [3, 12])  # DuckDB: a statement each below 8, Arrow from 8
def test_recordings_written_together_are_what_writing_each_leaves(engine: Engine, size: int) -> None:
    texts = [f"Summarise incident report {k} for the on-call team" for k in range(size)]
    before = engine.record(_news(engine, [texts[0]], b'{"old": true}')[0])
    news = _news(engine, texts) + _news(engine, [texts[1]], b'{"latest": true}')  # a request twice: the last wins
    ids = engine.record_many(news)
    assert len(ids) == size + 1 and ids[0] == before  # re-recording keeps the entry's id (aliases stay valid)
    assert ids[1] == ids[-1] and len(set(ids)) == size
    inputs = engine.settings_for("p").fingerprint_inputs
    for text, entry_id in zip(texts, ids):
        found = engine.match("p", *fingerprints(chat(text), *inputs))
        assert found is not None and found.entry_id == entry_id and found.tier == "exact"
    assert engine.entry(ids[1]).body == b'{"latest": true}'  # type: ignore[union-attr]
    assert engine.entry(ids[0]).body == b'{"ok": true}'  # type: ignore[union-attr]
    assert engine.store.get_entry(ids[0]).body == b'{"ok": true}'  # type: ignore[union-attr]
    # the full-text tier finds the new ones before any index build
    assert ids[2] in engine.lexical.propose("p", texts[2])


class _Engine:
    """The store thread's side of an engine: `record_many` as it is called (a unit test of the batching)."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.calls: list[list[Any]] = []
        self.fail = fail

    def record_many(self, news: list[Any]) -> list[int]:
        self.calls.append(list(news))
        if self.fail is not None:
            raise self.fail
        return [100 + int(new) for new in news]


def _burst(thread: StoreThread, engine: _Engine, count: int) -> list[int | None]:
    """`count` recordings asked for while the store thread is busy with something else."""
    async def run() -> list[int | None]:
        busy, release = threading.Event(), threading.Event()
        thread.executor.submit(lambda: (busy.set(), release.wait(10)))
        await asyncio.get_running_loop().run_in_executor(None, busy.wait)
        waiting = [asyncio.ensure_future(thread.record(engine, k)) for k in range(count)]  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in waiting)
        release.set()
        return list(await asyncio.gather(*waiting))

    try:
        return asyncio.run(run())
    finally:
        thread.executor.shutdown(wait=True)
        thread.readers.shutdown(wait=True)


def test_recordings_that_wait_for_the_store_thread_are_written_in_one_turn() -> None:
    engine = _Engine()
    thread = StoreThread()
    assert _burst(thread, engine, 5) == [100, 101, 102, 103, 104]  # each caller its own id
    assert engine.calls == [[0, 1, 2, 3, 4]] and thread.write_problem is None


def test_a_failed_write_fails_each_recording_of_the_turn_with_one_line(caplog: pytest.LogCaptureFixture) -> None:
    engine = _Engine(OSError("No space left on device"))
    thread = StoreThread()
    with caplog.at_level(logging.WARNING, logger="semula"):
        assert _burst(thread, engine, 3) == [None, None, None]
    assert thread.write_problem == "No space left on device"
    assert [r.getMessage() for r in caplog.records] == [
        "semula: recording failed: No space left on device (3 not stored; hits are still served from memory)"]


def test_a_recording_asked_for_after_the_stop_fails_instead_of_hanging() -> None:
    thread = StoreThread()
    thread.executor.shutdown(wait=True)

    async def run() -> int | None:
        return await asyncio.wait_for(thread.record(_Engine(), 1), 5)  # type: ignore[arg-type]

    assert asyncio.run(run()) is None and "shutdown" in (thread.write_problem or "")
    thread.readers.shutdown(wait=True)


def test_recordings_written_together_close_their_requests_review_candidates(engine: Engine) -> None:
    from semula.core.cascade import Candidate
    from semula.core.nearmatch import Verdict
    from semula.core.tiers import Tier

    stored = engine.record(_news(engine, ["Summarise the incident report for the on-call team"])[0])
    asked = _news(engine, ["Summarise the incident report for the on-call team, briefly",
                           "Please summarise the incident report for the on-call team"])
    verdict = Verdict(Tier.LEXICAL, 0.8, serve=False, review=True, reason="below the serve threshold")
    for new in asked:
        queued = engine.review.queue("p", chat(new.last_text), new.request_fp, new.normalised_fp,
                                     [Candidate(stored, verdict)], {})
        assert len(queued) == 1 and engine.review.has_open("p", new.normalised_fp)
    engine.record_many([*asked, *_news(engine, ["An unrelated question about tides"])])
    assert engine.store.candidates("p", status="open") == []
    assert len(engine.store.candidates("p", status="closed")) == 2
    if not engine.store.follows_changes:  # a shared store's follower thread reloads the open requests at any time
        assert not any(engine.review.has_open("p", new.normalised_fp) for new in asked)
