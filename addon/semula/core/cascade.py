"""The tier cascade: the one place that decides which tier answers a request.

exact → normalised → alias (dictionary lookups) → lexical / embedding (a near-match search),
then `decide` turns what was found into serve, forward or refuse, and a hit is made final: the
recording is fetched (`Lookups.answer`), and one that is gone, or older than the project's `max_age`
(`core.expiry`), is not served. What leaves `cascade` is final and carries what to serve; no caller
decides again. The proxy and `semula eval` both call `cascade()`, so eval measures the proxy's own
logic, not a copy of it.

Pure: the store lookups (and the clock's reading, for `max_age`) are passed in (`Lookups`), and
nothing here touches mitmproxy, DuckDB, threads or the clock. It is a coroutine only so that the proxy can await its
near-match search on the store thread; callers whose lookups never wait (eval, the pair
outcome) drive it with `run_now`, without an event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol, TypeVar

from semula.core.bypass import near_bypass
from semula.core.request.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint
from semula.core.decision import Action, Bypass, Decision, Match, decide
from semula.core.expiry import age_seconds, expiry_decision, verdict
from semula.core.modes import Mode
from semula.core.nearmatch import Verdict
from semula.core.repeats import Repeats, exhausted_reason, sequenced
from semula.core.settings import ProjectSettings

T = TypeVar("T")


@dataclass(frozen=True)
class Candidate:
    """A recording the near-match search found, with the verdict on it."""

    entry_id: int
    verdict: Verdict
    candidate_id: int | None = None  # set when queued for review


@dataclass(frozen=True)
class NearSearch:
    served: Match | None = None
    best: Candidate | None = None  # the best candidate (served or not): the call log's candidate_*
    queued: tuple[Candidate, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class NearQuery:
    """What one near-match search is about, built once by the cascade and passed whole.

    `request_fp` and `normalised_fp` are the bare fingerprints (no sequence `#n`): the review queue
    keys its candidates by them. `bypass_reason` says why the guard may not serve (it may still queue).
    """

    project: str
    request: CanonicalRequest
    request_fp: str
    normalised_fp: str
    settings: ProjectSettings
    bypass_reason: str | None = None


@dataclass(frozen=True)
class Answered:
    """A recording a hit is about to serve, as the lookups read it."""

    entry: Any  # the recording itself, served by the caller (the cascade never reads it)
    normalised_fp: str | None = None  # the recording's (an exact hit computed none of its own)
    recorded_at: str | datetime | None = None  # when it was recorded (None: unknown, it never expires)


class Answers(Protocol):
    """What making a hit final asks: the recording, and the clock's reading for `max_age`."""

    async def answer(self, entry_id: int) -> Answered | None:
        """The recording to serve; None when it is gone (deleted since the index was read)."""

    def now(self) -> datetime:
        """The current time, naive UTC (asked only when the project sets a `max_age`)."""


class Lookups(Answers, Protocol):
    """What the cascade asks of the recordings; the engine answers, or a test's fake does."""

    def certain(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        """The certain tiers (exact, then normalised and alias when `normalised_fp` is given)."""

    async def folder_changed(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        """Whether this request's recording file appeared or changed on disk since loading (a branch
        switch, a pull); if so it is loaded now and the cascade looks again."""

    async def recording_in_flight(self, project: str, fingerprint: str) -> bool:
        """Wait for an identical request's recording in flight; True if one ended (look again).

        False when there was none (the lookups may then claim the key: this request goes upstream
        and the identical ones that follow wait for it) or the wait timed out.
        """

    async def near(self, query: NearQuery) -> NearSearch:
        """The near-match tiers: serve, queue for review, or neither."""


Offload = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Outcome:
    """The decision and everything the cascade learnt on the way (for the log and the recording)."""

    decision: Decision
    request_fp: str | None = None
    normalised_fp: str | None = None
    near: NearSearch | None = None
    near_bypass_reason: str | None = None
    occurrence: int = 1  # sequence mode: which occurrence of this request in its run
    exhausted: str | None = None  # sequence replay refused past the last answer: why
    answer: Answered | None = None  # what to serve (set exactly when the decision serves a recording)
    stale: str | None = None  # served although older than max_age (policy warn): why, for the warning
    gone: bool = False  # the hit's recording was deleted since the index was read (decided as a miss)


async def _inline(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


async def cascade(mode: Mode, project: str, request: CanonicalRequest | None, settings: ProjectSettings,
                  lookups: Lookups | None, *, bypass: Bypass | None = None, store_problem: str | None = None,
                  offload: Offload | None = None, repeats: Repeats | None = None) -> Outcome:
    """Decide one provider call.

    `request` is None when the body could not be understood (then `bypass` says why);
    `lookups` is None when the store is unavailable (then `store_problem` says why).
    `offload` runs the normalised fingerprint of a large body off the caller's loop.
    `repeats` (sequence mode) keys the n-th occurrence of a request in its run to the n-th answer:
    the fingerprints in the outcome carry `#n`, and no identical recording in flight is awaited.
    """
    if mode is Mode.PASSTHROUGH:
        return Outcome(decide(mode, None))
    problem = store_problem if lookups is None else None
    if request is None:
        return Outcome(decide(mode, None, bypass, problem))
    base_fp = request_fingerprint(request, settings.ignore)
    n = repeats.count(base_fp) if repeats is not None and bypass is None else 1
    request_fp = sequenced(base_fp, n)
    match = lookups.certain(project, request_fp, None) if lookups and bypass is None else None  # exact first
    base_normalised = None
    if match is None and request.parsed:
        base_normalised = await (offload or _inline)(normalised_fingerprint, request, *settings.fingerprint_inputs)
    normalised_fp = sequenced(base_normalised, n) if base_normalised else None
    near = None
    near_reason = None
    exhausted = None
    if lookups is not None and bypass is None and match is None:
        match = lookups.certain(project, request_fp, normalised_fp)
        if match is None and await lookups.folder_changed(project, request, request_fp):
            match = lookups.certain(project, request_fp, normalised_fp)
        # An identical request already on its way upstream: wait for its recording, else claim the key
        # (before any await) so the identical requests that follow wait for this one.
        while match is None and repeats is None and mode is Mode.AUTO and await lookups.recording_in_flight(
                project, normalised_fp or request_fp):
            match = lookups.certain(project, request_fp, normalised_fp)
        if match is None and repeats is not None and n > 1 and mode is Mode.REPLAY:
            match, exhausted = _last_answer(lookups, project, base_fp, base_normalised, n, repeats)
        near_allowed = exhausted is None and (n == 1 or mode is Mode.REPLAY)  # auto: a repeat is recorded anew
        if match is None and near_allowed and mode in (Mode.AUTO, Mode.REPLAY) and base_normalised:
            skip = near_bypass(request, settings)
            near_reason = skip.reason if skip else None
            near = await lookups.near(NearQuery(project, request, base_fp, base_normalised, settings, near_reason))
            match = near.served
    decision = decide(mode, match, bypass, problem)
    if exhausted is not None and decision.action == "refuse":
        decision = replace(decision, reason=exhausted)
    outcome = Outcome(decision, request_fp, normalised_fp, near, near_reason, n, exhausted)
    if lookups is None:
        return outcome
    settled = await settle(mode, outcome, settings, lookups)
    if settled.gone and match is not None and near is None:
        # The index was read just before a reload replaced the recording (a checkout, a pull: the
        # file's entry is read anew under another id, or removed and its file back): look once more.
        again = lookups.certain(project, request_fp, normalised_fp)
        if again is None and await lookups.folder_changed(project, request, request_fp):
            again = lookups.certain(project, request_fp, normalised_fp)
        if again is not None and again.entry_id != match.entry_id:
            settled = await settle(mode, replace(outcome, decision=decide(mode, again, bypass, problem)), settings,
                                   lookups)
    return settled


async def settle(mode: Mode, outcome: Outcome, settings: ProjectSettings, answers: Answers) -> Outcome:
    """Make a hit final: the recording to serve, or the decision that replaces it.

    A recording gone since the index was read is a miss (forwarded and recorded, refused in replay);
    one older than the project's `max_age` is served with a warning, refused (`fail`, replay) or
    forwarded to be recorded anew (`re-record`, auto and record), as `core.expiry.verdict` says.
    The raw-request fast path settles its remembered hit here too.
    """
    hit = outcome.decision
    if hit.action is not Action.SERVE or hit.entry_id is None:
        return outcome
    answered = await answers.answer(hit.entry_id)
    if answered is None:
        return replace(outcome, decision=decide(mode, None), gone=True)
    stale = None
    if settings.max_age and answered.recorded_at is not None:
        found = verdict(age_seconds(answered.recorded_at, answers.now()), settings.max_age,
                        settings.max_age_policy, mode)
        if (decision := expiry_decision(hit, found)) is not None:
            return replace(outcome, decision=decision)
        stale = found.reason or None
    return replace(outcome, answer=answered, stale=stale,
                   normalised_fp=outcome.normalised_fp if outcome.normalised_fp is not None
                   else answered.normalised_fp)


def _last_answer(lookups: Lookups, project: str, request_fp: str, normalised_fp: str | None, n: int,
                 repeats: Repeats) -> tuple[Match | None, str | None]:
    """Replay past the last recorded answer: that answer, or (refuse_exhausted) why there is none."""
    for k in range(n - 1, 0, -1):
        earlier = lookups.certain(project, sequenced(request_fp, k),
                                  sequenced(normalised_fp, k) if normalised_fp else None)
        if earlier is not None:
            return (None, exhausted_reason(n, k)) if repeats.refuse_exhausted else (earlier, None)
    return None, None


def run_now(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (its lookups answer at once), without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the cascade waited on its lookups; run it in an event loop instead")
