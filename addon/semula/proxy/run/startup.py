"""Opening the proxy's engine: the chosen store, the recordings folder synced into it, what the sync
found printed, the memory frozen for the collector.

The store thread runs `EngineStart.open` (at start-up, and again after a failure drops the engine) and
keeps only its own policy: when to retry, the fail-open, the store file's identity. What to open is
fixed when the proxy starts (`Lifecycle.running`): the options that choose it need a restart
(`proxy/run/options.RESTART_OPTIONS`).
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from semula.calllog.schema import ReviewEvent
from semula.core.request.ignore import IgnoreRules
from semula.engine.engine import Engine
from semula.proxy.run.terminal import terminal_safe
from semula.recordings.folder import RecordingsFolder
from semula.store.base import RecordingStore
from semula.store.selection import StoreSpec, open_store_with
from semula.store.types import StoreError

if TYPE_CHECKING:
    from semula.embeddings.model import Embedder

__all__ = ["EngineStart", "freeze_when_preloaded"]


@dataclass(frozen=True)
class EngineStart:
    """What the proxy's engine opens on: the store, the recordings folder (None: off), the review log
    and the embedding model (None: the tier is off); `ignore`, semula_ignore's (project, rules) to set."""

    spec: StoreSpec
    data_dir: str
    recordings: str | None
    review_log: Callable[[ReviewEvent], None]
    embedder: Embedder | None = None
    ignore: tuple[str, IgnoreRules] | None = None
    # Set when the proxy stops: an open still loading a large folder stops there, so the stop need not
    # wait for it (the next start loads what this one did not; `LoadStop`).
    stopping: threading.Event = field(default_factory=threading.Event)

    def open(self) -> Engine:
        """An engine ready to serve (on the store thread); StoreError or the store's own error says why not."""
        folder = RecordingsFolder(self.recordings, self.data_dir) if self.recordings else None
        if folder is not None:
            folder.stopping = LoadStop(self.stopping)

        def engine_on(store: RecordingStore) -> Engine:
            return Engine.open(store, review_log=self.review_log, embedder=self.embedder, folder=folder)

        engine = open_store_with(self.spec, engine_on)
        if engine.sync_report is not None and folder is not None:
            print(terminal_safe(engine.sync_report.line(folder.root)), flush=True)
            for rel, problem in engine.sync_report.bad:
                print(terminal_safe(f"semula: bad recording {folder.root / rel}: {problem}"), flush=True)
        if self.ignore is not None:
            declare_ignore(engine, *self.ignore)
        freeze_when_preloaded(engine)
        return engine


# A folder load stops for the proxy's stop only while more files than this are left: a small folder
# always loads whole and its report is printed (bad files named) even when the run made no call; 5,000
# files take ~3 s from a clean clone (~0.5 ms a file), and a stop waited for all of them.
STOP_LOAD_ABOVE_FILES = 1000


class LoadStop:
    """`RecordingsFolder.stopping`: whether the load under way stops (the proxy stops, and more than
    STOP_LOAD_ABOVE_FILES files are left to read)."""

    def __init__(self, stopping: threading.Event) -> None:
        self._stopping = stopping

    def __call__(self, left: int) -> bool:
        return left > STOP_LOAD_ABOVE_FILES and self._stopping.is_set()


def declare_ignore(engine: Engine, project: str, rules: IgnoreRules) -> None:
    """semula_ignore: the project's `ignore` setting made what the option says, as `semula config set`
    makes it (stored, in the folder's `_settings.json`, the project re-fingerprinted); nothing when it is."""
    if engine.settings_for(project).ignore == rules:
        return
    try:
        result = engine.recordings.config_set(project, "ignore", rules.to_json())
    except StoreError as e:  # a read-only store: the project keeps its setting, and says so
        print(f"semula: semula_ignore not applied to project '{project}' ({e}); its recordings keep their "
              "fingerprints: set it where the store is writable (`semula config set ignore …`)", flush=True)
        return
    print(f"semula: semula_ignore: project '{project}' ignores {json.dumps(rules.to_json())} "
          f"(re-fingerprinted {result['refingerprinted']} recordings)", flush=True)


def freeze_when_preloaded(engine: Engine) -> threading.Thread:
    """Move what the proxy holds for good (the index, then the preloaded answers) out of the garbage
    collector's reach: a full collection walked ~210k objects at 10k recordings, 60-120 ms with the
    event loop stopped, a hit's p99. Frozen now (the index) and again once the preload is done, on a
    thread of its own; nothing is collected first (a full collection is what this avoids), so only
    the few cycles already garbage at start-up are kept."""
    gc.freeze()

    def after_preload() -> None:
        if engine.preloaded(timeout=None):
            gc.freeze()

    thread = threading.Thread(target=after_preload, name="semula-freeze", daemon=True)
    thread.start()
    return thread
