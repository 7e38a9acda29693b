"""The opt-in embedding tier, wired to a store: vectors after writes, cosine search after misses.

Vectors are made by a background worker after an entry is written (writes never wait for the
model) and stored through the worker's own handle on the store's vector table. A request is
embedded only after exact, normalised, alias and lexical all missed: hits never touch the model.
Its searches write fresh vectors and load the store thread's handle, so it runs on the store thread.
Cosines mean different things for different models: its thresholds are per model.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np

from semula.core.cascade import Candidate, NearQuery
from semula.core.request.canonical import CanonicalRequest
from semula.core.settings import ProjectSettings, threshold_for
from semula.core.tiers import NEAR_TIERS, Tier
from semula.embeddings.model import Embedder, embedding_text
from semula.embeddings.worker import EmbeddingWorker, VectorIndex
from semula.engine.tiers.base import LearntFor, SearchReads, judge
from semula.store.base import VectorStore
from semula.store.types import NewEntry

log = logging.getLogger("semula")
WORKER_BATCH = 8
# A search embeds at most this many of the project's not-yet-embedded entries itself (like the
# lexical tier's fresh scan); older ones wait for the worker.
FRESH_LIMIT = 32
RUNNING_WAIT = 10.0  # seconds a search waits for the worker's batch holding the project's entries


class EmbeddingTier:
    tier = Tier.EMBEDDING
    needs_store = True  # a search stores fresh vectors through the store thread's handle

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

    def _floors(self, settings: ProjectSettings) -> tuple[float | None, float | None]:
        """(serve, review) thresholds for this tier's model (None: none set for it)."""
        row = NEAR_TIERS[self.tier]
        model = self.embedder.name
        return threshold_for(getattr(settings, row.serve), model), threshold_for(getattr(settings, row.review), model)

    def serves(self, settings: ProjectSettings) -> bool:
        """No serve threshold for its model: it only queues (unless a learnt threshold may serve it)."""
        return settings.near_serve == "calibrated" or self._floors(settings)[0] is not None

    def candidates(self, reads: SearchReads, query: NearQuery, learnt: LearntFor) -> list[Candidate]:
        """Cosine neighbours the lexical tier did not propose, judged with this model's thresholds."""
        serve_floor, review_floor = self._floors(query.settings)
        floors = [t for t in (review_floor, serve_floor) if t is not None]
        if not floors:
            return []  # no threshold for this model: its cosines mean nothing yet
        row = NEAR_TIERS[self.tier]
        floors_given: dict[str, Any] = {row.review: review_floor if review_floor is not None else 1.1,
                                        row.serve: serve_floor}
        settings = replace(query.settings, **floors_given)
        try:
            found = [(e, c) for e, c in self.search(query.project, query.request, settings)
                     if not reads.rejected(e) and c >= min(floors)]
        except Exception as e:  # an embedder failure is logged; the call carries on as a miss
            log.warning("semula: embedding search failed (%s); carrying on without it", e)
            return []
        return judge(reads, query, self.tier, found, settings, learnt)

    def written(self, entry_id: int, new: NewEntry, settings: ProjectSettings) -> None:
        self.entry_written(entry_id, new.project, new.canonical, settings)

    def deleted(self, entry_id: int) -> None:
        self.index.invalidate()  # reloaded from the store at the next search

    def reloaded(self) -> None:
        pass  # its matrix loads per project, at the next search

    def entry_written(self, entry_id: int, project: str, canonical: dict[str, Any], settings: ProjectSettings) -> None:
        text = embedding_text(canonical, settings.scrub_patterns)
        if text.strip():
            self._projects[entry_id] = project
            self.worker.submit(entry_id, project, text)

    def search(self, project: str, request: CanonicalRequest, settings: ProjectSettings, k: int = 5) -> list[tuple[int, float]]:
        """Cosine neighbours of `request` among the project's recordings, those made just before included.

        The project's entries the worker has not started yet (the most recent FRESH_LIMIT) are
        embedded here in the query's batch, and entries it is embedding are waited for (at most
        RUNNING_WAIT seconds): a paraphrase sent right after its original finds it. Writes still
        never wait for the model; only a miss that reached this tier does.
        """
        text = embedding_text(request, settings.scrub_patterns)
        if not text.strip():
            return []
        fresh = self.worker.claim(project, FRESH_LIMIT)
        try:
            self.worker.wait_running(project, RUNNING_WAIT)
            vectors = self.embedder.embed([t for _, t in fresh] + [text])
            if fresh:
                rows = [(entry_id, vectors[i]) for i, (entry_id, _) in enumerate(fresh)]
                self.vectors.put(self.embedder.name, rows)
                self.index.add(project, [e for e, _ in rows], np.stack([v for _, v in rows]))
        except BaseException:
            for entry_id, claimed in fresh:  # the worker makes them after all
                self.worker.submit(entry_id, project, claimed)
            raise
        for entry_id, _ in fresh:
            self._projects.pop(entry_id, None)
        return self.index.search(project, vectors[-1], k)

    def close(self) -> None:
        self.worker.close()
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001 - closing on shutdown
            pass
