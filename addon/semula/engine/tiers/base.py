"""What a near tier is to the search and to the writer: a proposer of judged candidates whose
index follows the recordings.

The search (`engine.near.NearSearcher`) asks each tier for its candidates and places it on a
thread by `needs_store`: a tier that only reads through the handle it is given runs on any
reader thread, so misses search in parallel; one that writes or holds thread-bound state runs
on the store thread. The verdict for one pair stays pure (`core.nearmatch.near_match`); `judge`
is the one place a tier's proposals meet it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from semula.core.cascade import Candidate, NearQuery
from semula.core.nearmatch import near_match, near_reach
from semula.core.request.canonical import CanonicalRequest
from semula.core.settings import ProjectSettings
from semula.core.tiers import Tier
from semula.store.base import RecordingStore
from semula.store.types import Entry, NewEntry

# A tier's thresholds learnt by calibrated mode, by stratum (empty: it serves by its static thresholds
# only); read lazily, only by a tier that proposed something.
LearntFor = Callable[[Tier], Mapping[str, float]]


# A recording held in memory (the answer cache), or None: its stored request without a read.
Cached = Callable[[int], Entry | None]


class SearchReads:
    """What one search reads beside its proposals, each once: the request's pairings so far ({entry id:
    open|approved|rejected}, read only when a tier proposed something; a rejected pairing is never served
    or queued again) and the proposals' stored requests (from memory when the answer cache holds them)."""

    def __init__(self, store: RecordingStore, query: NearQuery, read: Mapping[int, str] | None = None,
                 cached: Cached | None = None):
        self.store = store
        self._query = query
        self.read: dict[int, str] | None = dict(read) if read is not None else None
        self._cached = cached

    def get(self) -> dict[int, str]:
        if self.read is None:
            self.read = self.store.paired_entries(self._query.project, self._query.normalised_fp)
        return self.read

    def rejected(self, entry_id: int) -> bool:
        return self.get().get(entry_id) == "rejected"

    def stored_requests(self, ids: list[int]) -> dict[int, CanonicalRequest]:
        """The stored request of each id still recorded: the cached ones from memory, the rest in one read."""
        held = {entry_id: entry for entry_id in ids
                if self._cached is not None and (entry := self._cached(entry_id)) is not None}
        rest = [entry_id for entry_id in ids if entry_id not in held]
        read = self.store.canonicals_by_ids(rest) if rest else {}
        return {**{entry_id: CanonicalRequest.from_json(entry.canonical) for entry_id, entry in held.items()},
                **{entry_id: CanonicalRequest.from_json(canonical) for entry_id, canonical in read.items()}}


class NearTier(Protocol):
    """One near-match tier: its proposals judged, its index kept in step with the recordings."""

    tier: Tier
    # Whether its search must run on the store thread (it writes, or holds the store thread's
    # handle); else any thread may run it with that thread's own read handle.
    needs_store: bool

    def serves(self, settings: ProjectSettings) -> bool:
        """Whether it may serve under these settings (else it can only queue for review: auto mode
        searches it after the call is forwarded)."""
        ...

    def candidates(self, reads: SearchReads, query: NearQuery, learnt: LearntFor) -> list[Candidate]:
        """Its proposals for the query, judged; rejected pairings left out."""
        ...

    def written(self, entry_id: int, new: NewEntry, settings: ProjectSettings) -> None: ...
    def deleted(self, entry_id: int) -> None: ...
    def reloaded(self) -> None: ...
    def close(self) -> None: ...


def judge(reads: SearchReads, query: NearQuery, tier: Tier, proposals: Iterable[tuple[int, float | None]],
          settings: ProjectSettings, learnt: LearntFor) -> list[Candidate]:
    """Each proposal (entry id, the tier's score; None: the lexical score) judged against its stored request.

    Only the proposals that can matter are judged: those whose score reaches one of the tier's thresholds
    (`near_reach`: any other can be neither served nor queued) and, of the rest, the best-scored, which
    may be the search's best candidate (a miss names it, its call-log row keeps it). The others are left
    out: a whole verdict (shape, context, guard) for each of 10 proposals was most of a miss's search."""
    proposals = list(proposals)
    stored = reads.stored_requests([entry_id for entry_id, _ in proposals])
    thresholds = learnt(tier)
    pairs = [(entry_id, stored[entry_id], score) for entry_id, score in proposals if entry_id in stored]
    reach = [near_reach(query.request, request, settings, tier, score, thresholds) for _, request, score in pairs]
    # the best of the rest as `NearSearcher.settle` orders candidates: by score, then entry id
    below = [(scored, entry_id) for (entry_id, _, _), (scored, reaches) in zip(pairs, reach) if not reaches]
    best_below = max(below)[1] if below else None
    return [
        Candidate(entry_id, near_match(query.request, request, settings, tier=tier, score=score,
                                       near_bypass_reason=query.bypass_reason, learnt_thresholds=thresholds))
        for (entry_id, request, score), (_, reaches) in zip(pairs, reach) if reaches or entry_id == best_below
    ]
