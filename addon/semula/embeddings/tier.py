"""The opt-in embedding tier, wired to a store: vectors after writes, cosine search after misses.

Vectors are made by a background worker after an entry is written (writes never wait for the
model) and stored through the worker's own handle on the store's vector table. A request is
embedded only after exact, normalised, alias and lexical all missed: hits never touch the model.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from semula.core.canonical import CanonicalRequest
from semula.core.settings import ProjectSettings
from semula.embeddings.model import Embedder, embedding_text
from semula.embeddings.worker import EmbeddingWorker, VectorIndex
from semula.store.base import VectorStore

log = logging.getLogger("semula")
WORKER_BATCH = 8


class EmbeddingTier:
    def __init__(self, vectors: VectorStore, embedder: Embedder):
        self.embedder = embedder
        self.vectors = vectors  # bound to the store thread: searches load through it
        self._writer = vectors.for_thread()  # the worker thread's own handle
        self.index = VectorIndex(lambda project: self.vectors.load(embedder.name, project))
        # Small batches: a miss waits behind the worker's batch for the one model session.
        self.worker = EmbeddingWorker(embedder, self._write, batch_size=WORKER_BATCH)
        self._projects: dict[int, str] = {}

    def _write(self, model: str, rows: list[tuple[int, np.ndarray]]) -> Any:
        written = self._writer.put(model, rows)
        by_project: dict[str, list[tuple[int, np.ndarray]]] = {}
        for entry_id, vector in rows:
            if (project := self._projects.pop(entry_id, None)) is not None:
                by_project.setdefault(project, []).append((entry_id, vector))
        for project, items in by_project.items():  # fold in, don't reload the whole matrix
            self.index.add(project, [e for e, _ in items], np.stack([v for _, v in items]))
        return written

    def entry_written(self, entry_id: int, project: str, canonical: dict[str, Any], settings: ProjectSettings) -> None:
        text = embedding_text(canonical, settings.scrub_patterns)
        if text.strip():
            self._projects[entry_id] = project
            self.worker.submit(entry_id, project, text)

    def search(self, project: str, request: CanonicalRequest, settings: ProjectSettings, k: int = 5) -> list[tuple[int, float]]:
        text = embedding_text(request, settings.scrub_patterns)
        if not text.strip():
            return []
        vector = self.embedder.embed([text])[0]
        return self.index.search(project, vector, k)

    def close(self) -> None:
        self.worker.close()
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001 - closing on shutdown
            pass
