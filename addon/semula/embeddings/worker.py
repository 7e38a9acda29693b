"""The embedding tier's moving parts: the in-memory vector index and the background worker.

Kept apart from the model (`embeddings.model`) so both can be used and tested with any embedder
and any vector source; `engine.tiers.embedding` wires them to a store.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

log = logging.getLogger("semula")


# ---------------------------------------------------------------------------------------------
# The in-memory index


class VectorIndex:
    """Per-project matrices of unit vectors, loaded through `loader(project)` when first needed or invalidated.

    Thread-safe. `loader` returns (ids, matrix) as `VectorTable.load` does; the owner decides which thread
    reads the store (e.g. a loader that asks the store thread and waits).
    """

    def __init__(self, loader: Callable[[str], tuple[np.ndarray, np.ndarray]]):
        self._loader = loader
        self._lock = threading.Lock()
        self._data: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._stale: set[str] = set()

    def invalidate(self, project: str | None = None) -> None:
        """The stored set changed: reload `project` (None: every project) on its next search."""
        with self._lock:
            if project is None:
                self._stale.update(self._data)
            else:
                self._stale.add(project)

    def set(self, project: str, ids: np.ndarray, matrix: np.ndarray) -> None:
        with self._lock:
            self._data[project] = (np.asarray(ids, dtype=np.int64), np.asarray(matrix, dtype=np.float32))
            self._stale.discard(project)

    def add(self, project: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        """New or re-made vectors: fold them into a loaded matrix instead of reloading it."""
        with self._lock:
            if project not in self._data or project in self._stale:
                return  # not loaded (or already due a reload): the next search loads everything
            old_ids, old_matrix = self._data[project]
            new_ids = np.asarray(ids, dtype=np.int64)
            keep = ~np.isin(old_ids, new_ids)
            matrix = np.asarray(vectors, dtype=np.float32).reshape(len(new_ids), -1)
            if old_matrix.shape[0] and old_matrix.shape[1] != matrix.shape[1]:
                self._stale.add(project)
                return
            self._data[project] = (np.concatenate([old_ids[keep], new_ids]),
                                   np.concatenate([old_matrix[keep], matrix]) if old_matrix.shape[0] else matrix)

    def _get(self, project: str) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if project in self._data and project not in self._stale:
                return self._data[project]
        ids, matrix = self._loader(project)
        self.set(project, ids, matrix)
        return self._data[project]

    def size(self, project: str) -> int:
        return int(self._get(project)[0].shape[0])

    def search(self, project: str, vector: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
        ids, matrix = self._get(project)
        if ids.shape[0] == 0:
            return []
        v = np.asarray(vector, dtype=np.float32).ravel()
        if matrix.shape[1] != v.shape[0]:
            log.warning("embeddings: query has %d dims, project %s index has %d; no search",
                        v.shape[0], project, matrix.shape[1])
            return []
        scores = matrix @ v
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top]


# ---------------------------------------------------------------------------------------------
# The background worker


class EmbeddingWorker:
    """Embeds submitted entries in batches on its own thread; vectors go out through `write(model, rows)`.

    `rows` is a list of (entry_id, vector). `on_written(projects)` (optional) runs after a successful
    write, e.g. to invalidate those projects in a VectorIndex. Failures are logged and counted in
    `failed`; the thread never dies of them.
    """

    def __init__(self, embedder: Any, write: Callable[[str, list[tuple[int, np.ndarray]]], Any],
                 batch_size: int = 32, on_written: Callable[[set[str]], Any] | None = None,
                 name: str = "semula-embeddings"):
        self.embedder = embedder
        self._write = write
        self._on_written = on_written
        self.batch_size = batch_size
        self.embedded = 0
        self.failed = 0
        self._queue: queue.Queue[tuple[int, str, str] | None] = queue.Queue()
        self._pending = 0
        self._cond = threading.Condition()
        # Submitted and not yet taken by the thread (a search may `claim` them), and being embedded.
        self._waiting: dict[int, tuple[str, str]] = {}
        self._running: dict[int, str] = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, entry_id: int, project: str, text: str) -> None:
        if self._stopped:
            return
        with self._cond:
            self._pending += 1
            self._waiting.pop(entry_id, None)
            self._waiting[entry_id] = (project, text)  # a re-recording: the newest text, newest place
        self._queue.put((entry_id, project, text))

    def claim(self, project: str, limit: int) -> list[tuple[int, str]]:
        """Take up to `limit` of `project`'s most recent entries the thread has not started: the
        caller embeds them itself (a search that must see what was just recorded)."""
        with self._cond:
            mine = [e for e, (p, _) in self._waiting.items() if p == project][-limit:] if limit > 0 else []
            return [(e, self._waiting.pop(e)[1]) for e in mine]

    def wait_running(self, project: str, timeout: float) -> bool:
        """Wait until no entry of `project` is being embedded by the thread; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while project in self._running.values():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until everything submitted so far is embedded or failed; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while len(batch) < self.batch_size:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            with self._cond:  # entries a search claimed meanwhile are skipped
                taken = [(e, *self._waiting.pop(e)) for e, _, _ in batch if e in self._waiting]
                self._running.update((e, p) for e, p, _ in taken)
            try:
                if taken:
                    self._process(taken)
            finally:
                with self._cond:
                    for entry_id, _, _ in taken:
                        self._running.pop(entry_id, None)
                    self._pending -= len(batch)
                    self._cond.notify_all()
            if stop:
                return

    def _process(self, batch: list[tuple[int, str, str]]) -> None:
        try:
            vectors = self.embedder.embed([text for _, _, text in batch])
            rows = [(entry_id, vectors[i]) for i, (entry_id, _, _) in enumerate(batch)]
            self._write(self.embedder.name, rows)
        except Exception:
            self.failed += len(batch)
            log.exception("embeddings: %d entries could not be embedded or stored; they stay without vectors",
                          len(batch))
            return
        self.embedded += len(batch)
        if self._on_written is not None:
            try:
                self._on_written({project for _, project, _ in batch})
            except Exception:
                log.exception("embeddings: on_written callback failed")
