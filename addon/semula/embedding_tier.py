"""The opt-in embedding tier, wired to a store: vectors after writes, cosine search after misses.

Vectors are made by a background worker after an entry is written (writes never wait for the
model) and stored through the worker's own DuckDB cursor. A request is embedded only after
exact, normalised, alias and lexical all missed: hits never touch the model.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from semula.canonical import CanonicalRequest
from semula.embeddings import Embedder, EmbeddingWorker, VectorIndex, embedding_text, load_vectors, put_vectors
from semula.settings import ProjectSettings

log = logging.getLogger("semula")


class EmbeddingTier:
    def __init__(self, con: Any, embedder: Embedder):
        self.embedder = embedder
        self.con = con  # the store thread's connection: searches run there
        self._writer = con.cursor()  # the worker thread's own handle
        self.index = VectorIndex(lambda project: load_vectors(self.con, embedder.name, project))
        self.worker = EmbeddingWorker(embedder, self._write, on_written=self._written)
        self.searches = 0

    def _write(self, model: str, rows: list[tuple[int, np.ndarray]]) -> Any:
        return put_vectors(self._writer, model, rows)

    def _written(self, projects: set[str]) -> None:
        for project in projects:
            self.index.invalidate(project)

    def entry_written(self, entry_id: int, project: str, canonical: dict[str, Any], settings: ProjectSettings) -> None:
        text = embedding_text(canonical, settings.scrub_patterns)
        if text.strip():
            self.worker.submit(entry_id, project, text)

    def search(self, project: str, request: CanonicalRequest, settings: ProjectSettings, k: int = 5) -> list[tuple[int, float]]:
        text = embedding_text(request, settings.scrub_patterns)
        if not text.strip():
            return []
        self.searches += 1
        vector = self.embedder.embed([text])[0]
        return self.index.search(project, vector, k)

    def close(self) -> None:
        self.worker.close()
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001 - closing on shutdown
            pass
