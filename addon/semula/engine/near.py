"""The near-match search: the lexical index (and the opt-in embedding tier) propose recordings,
`near_match` judges each, and the best is served or the reviewable ones are queued.

The verdict for one pair is pure (`core.nearmatch.near_match`); this module applies it to the
indexes' proposals. A rejected pairing is never served or queued again. `find` (the lexical
tier: reads only) runs on any thread with its own store handle, so misses search in parallel;
`settle` (the embedding tier, the review queue's writes) runs on the store thread.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from collections.abc import Callable, Mapping
from typing import Any

from semula.core.request.canonical import CanonicalRequest
from semula.core.cascade import Candidate, NearQuery, NearSearch
from semula.core.decision import Match
from semula.core.nearmatch import Verdict, near_match
from semula.core.settings import ProjectSettings, threshold_for
from semula.engine.review import ReviewQueue
from semula.store.base import LexicalProposer, RecordingStore
from semula.store.types import StoreError

log = logging.getLogger("semula")

# Calibrated mode's learnt thresholds: (store handle, project, settings) -> {tier: threshold}.
Learnt = Callable[[RecordingStore, str, ProjectSettings], Mapping[str, float]]


def served_tier(verdict: Verdict) -> str:
    """The call log's tier for a served near-match: `lexical-calibrated` when a learnt threshold served it."""
    return f"{verdict.tier}-calibrated" if verdict.calibrated else verdict.tier


class NearSearcher:
    def __init__(self, store: RecordingStore, lexical: LexicalProposer, review: ReviewQueue, embeddings: Any = None,
                 learnt: Learnt | None = None):
        self.store = store
        self.learnt = learnt
        self.lexical = lexical
        self.review = review
        self.embeddings = embeddings

    def search(self, query: NearQuery, queue: bool = True) -> NearSearch:
        """The whole search on the caller's (store) thread: `find`, then `settle`."""
        lexical, paired = self.find(self.store, query)
        return self.settle(query, lexical, queue, paired)

    def find(self, store: RecordingStore, query: NearQuery) -> tuple[list[Candidate], dict[int, str] | None]:
        """The lexical tier's verdicts and the request's pairings so far, reads only: any thread with
        its own `store` handle may run it."""
        request = query.request
        text = request.last_user_text()
        if not request.parsed or not text.strip():
            return [], None
        ids = self.lexical.propose(query.project, text)
        if not ids:
            return [], None
        stored = store.canonicals_by_ids(ids)
        paired = store.paired_entries(query.project, query.normalised_fp)
        learnt = self._learnt(store, query).get("lexical")
        candidates = []
        for entry_id in ids:
            if entry_id not in stored or paired.get(entry_id) == "rejected":
                continue  # a rejected pairing is never served or queued again
            verdict = near_match(request, CanonicalRequest.from_json(stored[entry_id]), query.settings,
                                 tier="lexical", near_bypass_reason=query.bypass_reason, learnt_threshold=learnt)
            candidates.append(Candidate(entry_id, verdict))
        return candidates, paired

    def embedding_only_queues(self, settings: ProjectSettings) -> bool:
        """The embedding tier is on but cannot serve (no serve threshold for its model): it only queues."""
        tier = self.embeddings
        if settings.near_serve == "calibrated":
            return False  # a learnt threshold may serve it: search before forwarding
        return tier is not None and threshold_for(settings.embedding_serve_threshold, tier.embedder.name) is None

    def _learnt(self, store: RecordingStore, query: NearQuery) -> Mapping[str, float]:
        if self.learnt is None or query.settings.near_serve != "calibrated":
            return {}
        try:
            return self.learnt(store, query.project, query.settings)
        except StoreError as e:  # without its verdicts calibrated mode serves nothing more than the thresholds
            log.warning("semula: could not read review verdicts for calibrated mode (%s)", e)
            return {}

    def settle_needs_store(self, lexical: list[Candidate], queue: bool = True, embed: bool = True) -> bool:
        """Whether `settle` reads or writes the store (else it is pure and may run anywhere)."""
        if self.embeddings is not None and embed:
            return True
        return queue and not any(c.verdict.serve for c in lexical) and any(c.verdict.review for c in lexical)

    def settle(self, query: NearQuery, lexical: list[Candidate], queue: bool = True,
               paired: dict[int, str] | None = None, embed: bool = True) -> NearSearch:
        """Add the embedding tier's candidates, then serve the best or queue the reviewable (store thread).

        `paired` as `find` read it on this thread; None: read it here (another thread's read may be stale).
        `embed=False` leaves the embedding tier to `queue_embedding_candidates`, after the call.
        """
        project, request = query.project, query.request
        candidates = list(lexical)
        searchable = request.parsed and request.last_user_text().strip()
        if self.settle_needs_store(lexical, queue, embed) and searchable:
            if paired is None:
                paired = self.store.paired_entries(project, query.normalised_fp)
                candidates = [c for c in candidates if paired.get(c.entry_id) != "rejected"]
            if embed:
                candidates += self._embedding_candidates(query, paired)
        if not candidates:
            return NearSearch()
        candidates.sort(key=lambda c: (c.verdict.serve, c.verdict.score, c.entry_id), reverse=True)
        best = candidates[0]
        if best.verdict.serve:
            return NearSearch(served=Match(served_tier(best.verdict), best.entry_id, best.verdict.score), best=best)
        queued: list[Candidate] = []
        if queue:
            try:
                queued = self.review.queue(project, request, query.request_fp, query.normalised_fp, candidates,
                                           paired or {})
            except StoreError as e:  # the verdict stands and is logged; only the queueing is lost
                log.warning("semula: could not queue review candidates (%s); the call stays a miss", e)
        best = next((c for c in queued if c.entry_id == best.entry_id), best)
        return NearSearch(best=best, queued=tuple(queued))

    def queue_embedding_candidates(self, query: NearQuery) -> list[Candidate]:
        """The embedding tier for a miss already forwarded (it could only queue): queue what it finds
        beside what the lexical tier queued (store thread)."""
        paired = self.store.paired_entries(query.project, query.normalised_fp)
        found = [c for c in self._embedding_candidates(query, paired) if c.entry_id not in paired]
        found.sort(key=lambda c: (c.verdict.score, c.entry_id), reverse=True)
        if not found:
            return []
        return self.review.queue(query.project, query.request, query.request_fp, query.normalised_fp, found, paired)

    def _embedding_candidates(self, query: NearQuery, paired: dict[int, str]) -> list[Candidate]:
        """The embedding tier (opt-in): cosine neighbours the lexical tier did not propose."""
        request = query.request
        tier = self.embeddings
        if tier is None:
            return []
        model = tier.embedder.name
        review_floor = threshold_for(query.settings.embedding_review_threshold, model)
        serve_floor = threshold_for(query.settings.embedding_serve_threshold, model)
        floors = [t for t in (review_floor, serve_floor) if t is not None]
        if not floors:
            return []  # no threshold for this model: its cosines mean nothing yet
        settings = replace(query.settings, embedding_review_threshold=review_floor if review_floor is not None else 1.1,
                           embedding_serve_threshold=serve_floor)
        try:
            found = [(e, c) for e, c in tier.search(query.project, request, settings)
                     if paired.get(e) != "rejected" and c >= min(floors)]
        except Exception as e:  # an embedder failure is logged; the call carries on as a miss
            log.warning("semula: embedding search failed (%s); carrying on without it", e)
            return []
        stored = self.store.canonicals_by_ids([e for e, _ in found])
        learnt = self._learnt(self.store, query).get("embedding")
        return [
            Candidate(entry_id, near_match(request, CanonicalRequest.from_json(stored[entry_id]), settings,
                                           tier="embedding", score=cosine, near_bypass_reason=query.bypass_reason,
                                           learnt_threshold=learnt))
            for entry_id, cosine in found if entry_id in stored
        ]
