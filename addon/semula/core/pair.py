"""One labelled pair through the cascade, in memory: what happens to `incoming` once `stored` is recorded.

The threshold sweeps and the corpus tests score thousands of pairs; a store per pair would
cost seconds each. `PairLookups` answers the cascade's lookups from the one stored request
(the lexical index would propose it; the verdict is `near_match`, as in the engine), so the
decision is still made by `cascade()` itself. `semula eval` runs the same pairs through the
real engine and store.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from semula.core.request.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint
from semula.core.cascade import Answered, Candidate, NearQuery, NearSearch, cascade, run_now
from semula.core.decision import Match
from semula.core.modes import Mode
from semula.core.nearmatch import Verdict, near_match
from semula.core.settings import ProjectSettings
from semula.core.tiers import NO_TIER, Tier

STORED_ID = 1


class PairLookups:
    """The cascade's lookups over one stored request (entry #1)."""

    def __init__(self, stored: CanonicalRequest, settings: ProjectSettings):
        self.stored = stored
        self.request_fp = request_fingerprint(stored, settings.ignore)
        self.normalised_fp = (normalised_fingerprint(stored, *settings.fingerprint_inputs)
                              if stored.parsed else self.request_fp)

    def certain(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        if request_fp == self.request_fp:
            return Match(Tier.EXACT, STORED_ID)
        if normalised_fp is not None and normalised_fp == self.normalised_fp:
            return Match(Tier.NORMALISED, STORED_ID)
        return None

    async def folder_changed(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        return False

    async def recording_in_flight(self, project: str, fingerprint: str) -> bool:
        return False

    async def answer(self, entry_id: int) -> Answered | None:
        return Answered(None)  # the pair serves nothing: the hit is the verdict, and it never expires

    def now(self) -> datetime:
        return datetime.min  # never asked: the recording has no time

    async def near(self, query: NearQuery) -> NearSearch:
        verdict = near_match(query.request, self.stored, query.settings, near_bypass_reason=query.bypass_reason)
        candidate = Candidate(STORED_ID, verdict)
        if verdict.serve:
            return NearSearch(served=Match(verdict.tier, STORED_ID, verdict.score), best=candidate)
        return NearSearch(best=candidate, queued=(candidate,) if verdict.review else ())


@dataclass(frozen=True)
class PairOutcome:
    """What the cascade does with ``incoming`` once ``stored`` is recorded."""

    action: str  # served | review | miss
    tier: str  # a `Tier` or "none" (`Decision.tier_label`)
    verdict: Verdict | None = None
    served_without_guard: bool = False


def pipeline_outcome(stored: CanonicalRequest, incoming: CanonicalRequest, settings: ProjectSettings) -> PairOutcome:
    """`cascade()` in auto mode over one stored entry."""
    outcome = run_now(cascade(Mode.AUTO, "pair", incoming, settings, PairLookups(stored, settings)))
    verdict = outcome.near.best.verdict if outcome.near and outcome.near.best else None
    if outcome.decision.action == "serve":
        return PairOutcome("served", outcome.decision.tier_label, verdict, served_without_guard=True)
    unguarded = verdict is not None and (verdict.reason or "").startswith("guard:")
    action = "review" if outcome.near and outcome.near.queued else "miss"
    return PairOutcome(action, NO_TIER, verdict, unguarded)
