"""The near-match search: each near tier (`engine.tiers`) proposes recordings, `near_match` judges
each, and the best is served or the reviewable ones are queued.

The verdict for one pair is pure (`core.nearmatch.near_match`); this module runs the tiers and
owns where they run. `find` (the tiers that only read) runs on any thread with its own store
handle, so misses search in parallel; `settle` (the store thread's tiers, the review queue's
writes) runs where `plan` places it. A rejected pairing is never served or queued again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from semula.core.cascade import Candidate, NearQuery, NearSearch
from semula.core.decision import Match
from semula.core.settings import ProjectSettings
from semula.core.tiers import Tier
from semula.engine.review import ReviewQueue
from semula.engine.tiers.base import Cached, LearntFor, NearTier, SearchReads
from semula.store.base import RecordingStore
from semula.store.types import StoreError

log = logging.getLogger("semula")

# Calibrated mode's learnt thresholds: (store handle, project, settings) -> {tier: {stratum: threshold}}.
Learnt = Callable[[RecordingStore, str, ProjectSettings], Mapping[str, Mapping[str, float]]]


class Where(Enum):
    """Where `settle` runs."""

    HERE = "here"  # it neither reads nor writes the store: the caller's thread (the event loop)
    STORE = "store"  # the store thread, awaited before the call is decided
    QUEUE_LATER = "queue later"  # decided here without queueing; the queue write on the store thread, after


@dataclass(frozen=True)
class Placement:
    """The search's one answer to the proxy: where `settle` runs, with which store-thread tiers, and
    which tiers wait until the call was forwarded (they could only queue for review)."""

    where: Where
    tiers: tuple[NearTier, ...] = ()  # the store thread's tiers searched before deciding
    deferred: tuple[NearTier, ...] = field(default=())  # searched after the call (`queue_deferred`)


def _searchable(query: NearQuery) -> bool:
    """Every near tier compares the last user texts: none without one."""
    return bool(query.request.parsed and query.request.last_user_text().strip())


class NearSearcher:
    def __init__(self, store: RecordingStore, tiers: Sequence[NearTier], review: ReviewQueue,
                 learnt: Learnt | None = None, cached: Cached | None = None):
        self.store = store
        self.cached = cached  # recordings held in memory: their stored requests need no read
        self.tiers = tuple(tiers)
        self.learnt = learnt
        self.review = review

    @property
    def store_tiers(self) -> tuple[NearTier, ...]:
        return tuple(t for t in self.tiers if t.needs_store)

    def search(self, query: NearQuery, queue: bool = True) -> NearSearch:
        """The whole search on the caller's (store) thread: `find`, then `settle`."""
        found, paired = self.find(self.store, query)
        return self.settle(query, found, queue, paired)

    def find(self, store: RecordingStore, query: NearQuery) -> tuple[list[Candidate], dict[int, str] | None]:
        """The verdicts of the tiers that only read, and the request's pairings if they were read:
        any thread with its own `store` handle may run it."""
        if not _searchable(query):
            return [], None
        reads = SearchReads(store, query, cached=self.cached)
        learnt = self._learnt_for(store, query)
        candidates = [c for tier in self.tiers if not tier.needs_store
                      for c in tier.candidates(reads, query, learnt)]
        return candidates, reads.read

    def plan(self, query: NearQuery, found: list[Candidate], after_forward: bool = False) -> Placement:
        """Where `settle` runs for these `find` results. With `after_forward` (auto mode: a miss is
        forwarded whatever it queues), work that can only queue waits until after the call: the store
        thread's tiers that cannot serve, and a queue write that cannot change the decision."""
        store_tiers = self.store_tiers
        deferred = tuple(t for t in store_tiers if after_forward and not t.serves(query.settings))
        searched = tuple(t for t in store_tiers if t not in deferred)
        if not self._needs_store(found, searched, queue=True):
            return Placement(Where.HERE, searched, deferred)
        if after_forward and not self._needs_store(found, searched, queue=False):
            return Placement(Where.QUEUE_LATER, searched, deferred)
        return Placement(Where.STORE, searched, deferred)

    @staticmethod
    def _needs_store(found: list[Candidate], tiers: tuple[NearTier, ...], queue: bool) -> bool:
        """Whether `settle` reads or writes the store (else it is pure and may run anywhere)."""
        if tiers:
            return True
        return queue and not any(c.verdict.serve for c in found) and any(c.verdict.review for c in found)

    def _learnt_for(self, store: RecordingStore, query: NearQuery) -> LearntFor:
        """Calibrated mode's thresholds per tier (by stratum), read at most once and only when a tier asks."""
        cache: list[Mapping[str, Mapping[str, float]]] = []

        def learnt(tier: Tier) -> Mapping[str, float]:
            if not cache:
                cache.append(self._learnt(store, query))
            return cache[0].get(tier, {})

        return learnt

    def _learnt(self, store: RecordingStore, query: NearQuery) -> Mapping[str, Mapping[str, float]]:
        if self.learnt is None or query.settings.near_serve != "calibrated":
            return {}
        try:
            return self.learnt(store, query.project, query.settings)
        except StoreError as e:  # without its verdicts calibrated mode serves nothing more than the thresholds
            log.warning("semula: could not read review verdicts for calibrated mode (%s)", e)
            return {}

    def settle(self, query: NearQuery, found: list[Candidate], queue: bool = True,
               paired: dict[int, str] | None = None, tiers: Sequence[NearTier] | None = None) -> NearSearch:
        """Add the store thread's tiers' candidates, then serve the best or queue the reviewable.

        `paired` as `find` read it on this thread; None: read it here (another thread's read may be stale).
        `tiers`: the store thread's tiers to search (None: all; `Placement.tiers` leaves out the deferred).
        """
        project, request = query.project, query.request
        tiers = self.store_tiers if tiers is None else tuple(tiers)
        candidates = list(found)
        if self._needs_store(found, tiers, queue) and _searchable(query):
            if paired is None:
                paired = self.store.paired_entries(project, query.normalised_fp)
                candidates = [c for c in candidates if paired.get(c.entry_id) != "rejected"]
            reads = SearchReads(self.store, query, paired, self.cached)
            learnt = self._learnt_for(self.store, query)
            for tier in tiers:
                candidates += tier.candidates(reads, query, learnt)
        if not candidates:
            return NearSearch()
        candidates.sort(key=lambda c: (c.verdict.serve, c.verdict.score, c.entry_id), reverse=True)
        best = candidates[0]
        if best.verdict.serve:
            verdict = best.verdict
            return NearSearch(served=Match(verdict.tier, best.entry_id, verdict.score, verdict.calibrated), best=best)
        queued: list[Candidate] = []
        if queue:
            try:
                queued = self.review.queue(project, request, query.request_fp, query.normalised_fp, candidates,
                                           paired or {})
            except StoreError as e:  # the verdict stands and is logged; only the queueing is lost
                log.warning("semula: could not queue review candidates (%s); the call stays a miss", e)
        best = next((c for c in queued if c.entry_id == best.entry_id), best)
        return NearSearch(best=best, queued=tuple(queued))

    def queue_deferred(self, query: NearQuery, tiers: Sequence[NearTier]) -> list[Candidate]:
        """The tiers `plan` deferred, for a miss already forwarded (they could only queue): queue what
        they find beside what the others queued (store thread)."""
        paired = self.store.paired_entries(query.project, query.normalised_fp)
        reads = SearchReads(self.store, query, paired, self.cached)
        learnt = self._learnt_for(self.store, query)
        found = [c for tier in tiers for c in tier.candidates(reads, query, learnt)
                 if c.entry_id not in paired]
        found.sort(key=lambda c: (c.verdict.score, c.entry_id), reverse=True)
        if not found:
            return []
        return self.review.queue(query.project, query.request, query.request_fp, query.normalised_fp, found, paired)
