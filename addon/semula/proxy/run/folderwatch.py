"""The recordings folder's watch: a checkout, a pull or a merge under a running proxy is loaded.

Every second a daemon thread compares the folder's directory times with those of the last load
(the proxy's own writes excepted); a difference queues an incremental load on the store thread,
which stats each file and reads only the changed ones. Polling directories costs a few stats a
second and needs no library or OS watch API, and git replaces a file it checks out (a new inode,
so its directory changes). A miss checks its own file too (`Engine.folder_changed_for`), so a
request that arrives before the next poll still finds the recording the checkout brought.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("semula")

WATCH_SECONDS = 1.0


class FolderWatch:
    def __init__(self, engine_of: Callable[[], Any], queue: Callable[[str, Callable[..., Any]], None],
                 interval: float = WATCH_SECONDS):
        """`engine_of()`: the open engine or None; `queue(what, fn)`: run fn on the store thread."""
        self._engine_of = engine_of
        self._queue = queue
        self._interval = interval
        self._stop = threading.Event()
        self._queued = threading.Event()
        self._thread = threading.Thread(target=self._run, name="semula-folder-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            engine = self._engine_of()
            if engine is None or engine.folder is None or self._queued.is_set():
                continue
            try:
                changed = engine.folder.changed_on_disk()
            except OSError:
                continue
            if changed:
                self._queued.set()
                try:
                    self._queue("loading the recordings folder's changes", lambda: self._refresh(engine))
                except RuntimeError:  # the store thread is shut down
                    return

    def _refresh(self, engine: Any) -> None:
        try:
            engine.refresh_folder()
        finally:
            self._queued.clear()
