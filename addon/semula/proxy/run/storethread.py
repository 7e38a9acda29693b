"""The store thread: everything that touches the store runs here, and fails open here.

One worker thread owns the engine (DuckDB allows one writer, and the near-match search must
not race a write). Whatever goes wrong with the store, `run` logs one line, drops the handle
so that the next call reopens it, and returns None: the caller treats the call as a miss
(auto/record: upstream; replay: the clear error), never a 5xx of semula's own making.
"""

from __future__ import annotations

import asyncio
import os
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from semula.core.redact import FingerprintKey
from semula.engine.engine import Engine
from semula.proxy.run.folderwatch import FolderWatch
from semula.proxy.run.startup import EngineStart
from semula.proxy.run.terminal import terminal_safe
from semula.recordings.files import SyncStopped
from semula.store.types import NewEntry, StoreError

log = logging.getLogger("semula")
T = TypeVar("T")

STORE_RETRY_SECONDS = 5.0
LOAD_WAIT_SECONDS = 60.0  # a request that comes while the store loads waits this long (semula_load_timeout)
ADMIN_TIMEOUT_SECONDS = 600
# Near-searches read on their own cursors, this many at once, so misses don't queue on the store thread.
NEAR_READERS = 4


class StoreThread:
    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semula-store")
        self.readers = ThreadPoolExecutor(max_workers=NEAR_READERS, thread_name_prefix="semula-near")
        self.engine: Engine | None = None
        self.problem: str | None = "the store is not open yet"
        self._next_attempt = 0.0
        self._start: EngineStart | None = None  # what to open: set by `configure` when the proxy runs
        self._opening: asyncio.Future[None] | None = None
        self.load_wait = LOAD_WAIT_SECONDS
        self.write_problem: str | None = None  # why the last write failed, if it did
        self._store_file: Path | None = None
        self._file_id: tuple[int, int] | None = None  # the store file's (device, inode) when opened
        self._file_gone: str | None = None
        # Keys the requests decided while the store is unavailable: they are neither matched nor recorded.
        self._unstored_key = FingerprintKey.generate()
        self._watch: FolderWatch | None = None
        # Recordings waiting for the store thread's next turn, written together (`record`).
        self._recordings: list[tuple[Engine, NewEntry, asyncio.Future[int | None]]] = []
        self._recordings_lock = threading.Lock()

    @property
    def fingerprint_key(self) -> FingerprintKey:
        """The open store's salt for redacted secrets (`Adapter.canonicalise` needs it)."""
        engine = self.engine
        return engine.fingerprint_key if engine is not None else self._unstored_key

    def configure(self, start: EngineStart, load_wait: float = LOAD_WAIT_SECONDS) -> None:
        """What to open (`proxy/run/startup.py`); the opening itself runs on this thread (`ensure_open`)."""
        self.load_wait = load_wait
        self._start = start
        if start.recordings and self._watch is None:
            self._watch = FolderWatch(lambda: self.engine, self.background)
            self._watch.start()

    async def ensure_open(self, force: bool = False) -> None:
        """Open the store if it is not open; after a failure, retry at most every few seconds.

        A request that arrives while the proxy is still starting or loading its recordings waits
        for that, up to `load_wait` seconds: nothing is refused for being early.
        """
        deadline = time.monotonic() + self.load_wait
        while self._start is None and time.monotonic() < deadline:  # `running` has not configured us yet
            await asyncio.sleep(0.05)
        if self.engine is not None or self._start is None:
            return
        if self._opening is None:
            if not force and time.monotonic() < self._next_attempt:
                return
            self._next_attempt = time.monotonic() + STORE_RETRY_SECONDS
            self._opening = asyncio.ensure_future(self._open_now())
        try:
            await asyncio.wait_for(asyncio.shield(self._opening), max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            self.problem = f"the store is still loading after {self.load_wait:.0f} s"

    async def _open_now(self) -> None:
        assert self._start is not None
        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, self._open_here)
            self.problem = None
        except Exception as e:
            if self._start.stopping.is_set():  # `close` stopped the open: not the store's failure
                self.problem = "the proxy is stopping"
                if isinstance(e, SyncStopped):
                    print(terminal_safe(f"semula: {e} (the next start loads the rest; `semula recordings check` "
                                        "checks every file now)"), flush=True)
                return
            if self.problem != str(e):
                log.warning(
                    "semula: store unavailable: %s — calls are forwarded unrecorded in auto/record mode "
                    "and refused in replay mode; retrying every %.0f s", e, STORE_RETRY_SECONDS,
                )
            self.problem = str(e)
        finally:
            self._opening = None

    def _open_here(self) -> None:
        """Open the engine, on the store thread; a second opener (an admin call queued behind the
        start-up's) finds it open instead of opening another engine on the same file."""
        assert self._start is not None
        if self.engine is None:
            engine = self._start.open()
            if engine.store.follows_changes:  # a shared store: other proxies' writes reach this one's memory
                engine.dispatch = self.background_quietly
            self._store_file = engine.store.file
            self._file_id, self._file_gone = _file_id(self._store_file), None
            self.engine = engine

    async def run(self, what: str, fn: Callable[..., T], *args: Any, write: bool = False) -> T | None:
        """Run `fn` on the store thread; on failure log why and return None.

        A failed read drops the handle (the next call reopens it); a failed `write` (a full disk)
        keeps it: the recordings in memory still serve hits, only this write is lost.
        """
        if write and (gone := self._store_file_gone()):
            self.write_problem = gone
            return None
        try:
            result = await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
        except Exception as e:
            if not write:
                self.failed(what, e)
                return None
            self.write_problem = str(e)
            log.warning("semula: %s failed: %s (not stored; hits are still served from memory)", what, e)
            return None
        if write:
            self.write_problem = None
        return result

    async def record(self, engine: Engine, new: NewEntry) -> int | None:
        """Store a recording (`Engine.record`); None when that failed (logged, as a failed `run` write).

        Recordings that arrive while the store thread is busy wait for its next turn and are written
        together (`Engine.record_many`: one transaction for all; a transaction is most of a recording's
        cost in DuckDB), so a burst of misses costs the store thread less than a recording each."""
        if gone := self._store_file_gone():
            self.write_problem = gone
            return None
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int | None] = loop.create_future()
        with self._recordings_lock:
            self._recordings.append((engine, new, done))
            first = len(self._recordings) == 1
        if first:
            try:
                self.executor.submit(self._write_recordings, loop)
            except RuntimeError as e:  # shut down: the proxy is stopping
                self._recorded(self._take_recordings(), None, e)
        return await done

    def _take_recordings(self) -> list[tuple[Engine, NewEntry, asyncio.Future[int | None]]]:
        with self._recordings_lock:
            taken, self._recordings = self._recordings, []
        return taken

    def _write_recordings(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the store thread: every recording waiting, one `record_many` per engine they were made for."""
        waiting = self._take_recordings()
        for engine in {id(e): e for e, _, _ in waiting}.values():
            batch = [item for item in waiting if item[0] is engine]
            try:
                ids: list[int] | None = engine.record_many([new for _, new, _ in batch])
                error = None
            except Exception as e:
                ids, error = None, e
            loop.call_soon_threadsafe(self._recorded, batch, ids, error)

    def _recorded(self, batch: list[tuple[Engine, NewEntry, asyncio.Future[int | None]]], ids: list[int] | None,
                  error: Exception | None) -> None:
        """On the event loop: each waiting caller gets its entry id, or None and the reason in `write_problem`."""
        if error is not None:
            self.write_problem = str(error)
            log.warning("semula: recording failed: %s (%d not stored; hits are still served from memory)",
                        error, len(batch))
        elif batch:
            self.write_problem = None
        for k, (_, _, done) in enumerate(batch):
            if not done.done():
                done.set_result(ids[k] if ids is not None else None)

    def _store_file_gone(self) -> str | None:
        """Whether the store file was deleted or replaced since it was opened (then writes cannot persist)."""
        if self._file_gone is None and self._file_id is not None and _file_id(self._store_file) != self._file_id:
            self._file_gone = (f"the store file {self._store_file} was deleted or replaced under the running proxy: "
                               "new recordings cannot persist; restart the proxy")
            print(f"semula: WARNING: {self._file_gone}", flush=True)
        return self._file_gone

    def failed(self, what: str, e: Exception) -> None:
        if self.engine is not None and self.engine.store.reconnects:
            # a server store reconnects by itself: keep the engine, whose memory still serves hits
            log.warning("semula: %s failed: %s (failing open; hits are served from memory)", what, e)
            return
        self.problem = str(e)
        log.warning("semula: %s failed: %s (failing open; the store is reopened on the next call)", what, e)
        engine, self.engine = self.engine, None
        if engine:
            self.executor.submit(engine.close)

    def background_quietly(self, fn: Callable[[], Any]) -> None:
        """Queue `fn` on the store thread (other proxies' changes); nothing once the thread is shut down."""
        try:
            self.background("applying other proxies' changes", fn)
        except RuntimeError:
            pass

    def background(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Queue work nobody waits for; a failure is logged, never raised."""
        def quietly() -> None:
            try:
                fn(*args)
            except Exception as e:
                log.warning("semula: %s failed: %s", what, e)

        self.executor.submit(quietly)

    def admin(self, operation: Callable[[Engine], T]) -> T:
        """Run an admin operation from another thread, opening the store if needed."""
        def run() -> T:
            if self.engine is None:
                if self._start is None:
                    raise StoreError("the proxy has not started its store yet")
                try:
                    self._open_here()
                    self.problem = None
                except Exception as e:
                    raise StoreError(f"the proxy cannot open its store: {e}") from e
            assert self.engine is not None
            return operation(self.engine)

        return self.executor.submit(run).result(timeout=ADMIN_TIMEOUT_SECONDS)

    def close(self) -> None:
        if self._start is not None:
            self._start.stopping.set()  # an open still loading a large folder stops between files
        if self._watch is not None:
            self._watch.stop()
        engine, self.engine = self.engine, None
        self.readers.shutdown(wait=True)  # no search reads from the engine being closed
        self.executor.submit(self._close_here, engine).result(timeout=60)
        self.executor.shutdown(wait=True)

    def _close_here(self, engine: Engine | None) -> None:
        """On the store thread, so after the start-up's open if that is still under way: close what is open."""
        late, self.engine = self.engine, None
        for opened in {id(e): e for e in (engine, late) if e is not None}.values():
            opened.close()


def _file_id(path: Path | None) -> tuple[int, int] | None:
    try:
        st = os.stat(path) if path is not None else None
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if st is not None else None
