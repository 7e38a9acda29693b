"""The cascade's lookups in the proxy: memory on the event loop, the near search off it.

The certain tiers read the engine's in-memory index on the event loop. The near tiers that only
read (`NearSearcher.find`) run on a reader thread with that thread's own store handle, so misses
search in parallel; `settle` runs where `NearSearcher.plan` places it (the store thread only when it
reads or writes the store: the embedding tier, the review queue). Any failure there is a miss.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from datetime import datetime

from semula.core.request.canonical import CanonicalRequest
from semula.core.cascade import Answered, Candidate, NearQuery, NearSearch
from semula.core.decision import Match
from semula.engine.engine import Engine
from semula.engine.near import Where
from semula.proxy.run import expiry
from semula.proxy.run.storethread import StoreThread

log = logging.getLogger("semula")


class ProxyAnswers:
    """A hit's recording: from the engine's cache on the loop, else read on the store thread (any
    failure there: gone). The fast path settles its hits through this alone."""

    def __init__(self, engine: Engine, thread: StoreThread):
        self.engine = engine
        self.thread = thread

    async def answer(self, entry_id: int) -> Answered | None:
        engine = self.engine
        entry = engine.cached_entry(entry_id) or await self.thread.run("reading a recording", engine.entry, entry_id)
        return None if entry is None else Answered(entry, entry.normalised_fp, expiry.recorded_at(entry))

    def now(self) -> datetime:
        return expiry.now()

# An identical request waits this long for a recording in flight instead of going upstream again.
PENDING_WAIT_SECONDS = 120.0


class ProxyLookups(ProxyAnswers):
    """The cascade's lookups in the proxy: memory on the event loop, the near search on the store thread.

    With `coalesce`, a miss with no identical request in flight claims its key in `pending` at once
    (no await between the lookup and the claim): `claimed` names it, and the addon releases it when
    the call is not recorded, or when its recording is stored.

    With `after_forward` (auto mode: a miss is forwarded whatever it queues), work that only queues
    for review is not waited for: the search of a tier that cannot serve, and the queue write,
    whose result (`queueing`: the search with the queued candidates) the addon awaits before it logs
    the call. Sixty-four misses at once no longer wait in line behind each other's writes.
    """

    def __init__(self, engine: Engine, thread: StoreThread, pending: dict[tuple[str, str], asyncio.Event],
                 coalesce: bool = True, after_forward: bool = False):
        super().__init__(engine, thread)
        self.searcher = engine.searcher
        self.after_forward = after_forward
        self.pending = pending
        self.coalesce = coalesce
        self.claimed: tuple[str, str] | None = None
        self.queueing: asyncio.Future[NearSearch | None] | None = None

    def certain(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        return self.engine.match(project, request_fp, normalised_fp)

    async def folder_changed(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        """A stat on the loop; only a changed file costs a trip to the store thread (which loads it)."""
        if not self.engine.folder_changed_for(project, request, request_fp):
            return False
        return await self.thread.run("the recordings folder's refresh", self.engine.refresh_folder) is not None

    async def recording_in_flight(self, project: str, fingerprint: str) -> bool:
        key = (project, fingerprint)
        event = self.pending.get(key)
        if event is None:
            if self.coalesce and self.claimed is None:
                self.pending[key] = asyncio.Event()
                self.claimed = key
            return False
        try:
            await asyncio.wait_for(event.wait(), PENDING_WAIT_SECONDS)
        except TimeoutError:
            log.warning("semula: an identical request still in flight after %.0f s; forwarding this one too",
                        PENDING_WAIT_SECONDS)
            return False
        return True

    async def near(self, query: NearQuery) -> NearSearch:
        """The reading tiers on a reader thread (in parallel); the rest where the searcher's plan says."""
        loop = asyncio.get_running_loop()
        searcher = self.searcher
        try:
            found = await loop.run_in_executor(self.thread.readers, self._find, query)
            plan = searcher.plan(query, found, after_forward=self.after_forward)
            settle = functools.partial(searcher.settle, query, found, tiers=plan.tiers)
            if plan.where is Where.HERE:
                result = settle()
            elif plan.where is Where.QUEUE_LATER:
                # Only the review queue's write is left, and it cannot change the decision.
                result = searcher.settle(query, found, queue=False, tiers=plan.tiers)
                self.queueing = loop.run_in_executor(self.thread.executor, self._queue_quietly, settle)
            else:
                result = await loop.run_in_executor(self.thread.executor, settle)
            if plan.deferred and result.served is None:
                names = " and ".join(t.tier for t in plan.deferred)
                self.thread.background(f"the {names} tier's review search", searcher.queue_deferred, query,
                                       plan.deferred)
            return result
        except Exception as e:
            log.warning("semula: near-match search failed (%s); treating the call as a miss", e)
            return NearSearch()

    @staticmethod
    def _queue_quietly(settle: functools.partial[NearSearch]) -> NearSearch | None:
        try:
            return settle()
        except Exception as e:  # the verdicts stand and are logged; only the queueing is lost
            log.warning("semula: could not queue review candidates (%s); the call stays a miss", e)
            return None

    def _find(self, query: NearQuery) -> list[Candidate]:
        """The reading tiers' verdicts, on a reader thread through that thread's own store handle."""
        return self.searcher.find(self.engine.reader(), query)[0]
