"""The store thread's stop: it does not wait for an open that is still loading the recordings folder."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from semula.proxy.run.startup import STOP_LOAD_ABOVE_FILES, LoadStop
from semula.proxy.run.storethread import StoreThread
from semula.recordings.files import SyncStopped


class LoadingStart:
    """An `EngineStart` whose open loads until the proxy stops (a folder of thousands of recordings):
    like `RecordingsFolder.sync`, it stops between files once `stopping` is set."""

    recordings = None  # no folder watch

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.loading = threading.Event()

    def open(self) -> None:
        self.loading.set()
        self.stopping.wait()
        raise SyncStopped("the proxy stopped while loading rec")


def test_a_stop_ends_an_open_still_loading_instead_of_waiting_for_it(caplog: pytest.LogCaptureFixture) -> None:
    thread = StoreThread()
    start = LoadingStart()
    thread.configure(start)  # type: ignore[arg-type]

    async def start_then_stop() -> None:
        loop = asyncio.get_running_loop()
        opening = asyncio.ensure_future(thread.ensure_open())
        await loop.run_in_executor(None, start.loading.wait)
        await loop.run_in_executor(None, thread.close)  # before: waited for the whole load (seconds at 5,000)
        await opening

    with caplog.at_level(logging.WARNING, logger="semula"):
        asyncio.run(start_then_stop())
    assert thread.engine is None and thread.problem == "the proxy is stopping"
    assert "store unavailable" not in caplog.text  # a stop is not the store's failure


def test_a_folder_load_stops_for_the_proxys_stop_only_while_many_files_are_left() -> None:
    """A small folder always loads whole, so a run that made no call still names its bad files; a large
    one (seconds from a clean clone) stops at its next file."""
    stopping = threading.Event()
    stop = LoadStop(stopping)
    assert not stop(STOP_LOAD_ABOVE_FILES + 1)
    stopping.set()
    assert stop(STOP_LOAD_ABOVE_FILES + 1) and not stop(STOP_LOAD_ABOVE_FILES)
