"""core.cascade: the one function that picks the answering tier, with fake lookups (a table of cases)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from entries import chat
from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
from semula.core.cascade import Answered, Candidate, NearQuery, NearSearch, cascade, run_now
from semula.core.decision import Bypass, Match
from semula.core.modes import Mode
from semula.core.nearmatch import Verdict
from semula.core.settings import ProjectSettings

NOW = datetime(2025, 6, 1)
REQUEST = chat("What is the capital of France?")
SETTINGS = ProjectSettings()
EXACT = request_fingerprint(REQUEST)
NORMALISED = normalised_fingerprint(REQUEST, *SETTINGS.fingerprint_inputs)
SERVE = Verdict("lexical", 1.0, serve=True, review=False, reason=None)
REVIEW = Verdict("lexical", 0.8, serve=False, review=True, reason="score 0.80 < serve threshold 1.00")


@dataclass
class FakeLookups:
    exact: dict[str, int] = field(default_factory=dict)
    normalised: dict[str, int] = field(default_factory=dict)
    near_result: NearSearch = field(default_factory=NearSearch)
    in_flight: bool = False
    gone: set[int] = field(default_factory=set)
    recorded_at: datetime | None = None
    calls: list[str] = field(default_factory=list)

    def certain(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        self.calls.append("certain" if normalised_fp is None else "certain+normalised")
        if request_fp in self.exact:
            return Match("exact", self.exact[request_fp])
        if normalised_fp in self.normalised:
            return Match("normalised", self.normalised[normalised_fp])
        return None

    async def folder_changed(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        return False

    async def recording_in_flight(self, project: str, fingerprint: str) -> bool:
        self.calls.append("in_flight")
        if self.in_flight:
            self.exact[EXACT] = 9  # the recording landed while we waited
        return self.in_flight

    async def near(self, query: NearQuery) -> NearSearch:
        self.calls.append(f"near:{query.bypass_reason}")
        return self.near_result

    async def answer(self, entry_id: int) -> Answered | None:
        self.calls.append(f"answer:{entry_id}")
        return None if entry_id in self.gone else Answered(f"entry {entry_id}", f"nfp of {entry_id}", self.recorded_at)

    def now(self) -> datetime:
        return NOW


def run(mode: Mode, lookups: FakeLookups | None, **kwargs):
    request = kwargs.pop("request", REQUEST)
    settings = kwargs.pop("settings", SETTINGS)
    return run_now(cascade(mode, "p", request, settings, lookups, **kwargs))


@pytest.mark.parametrize(
    ("mode", "lookups", "decision", "tier", "action"),
    [
        (Mode.AUTO, FakeLookups(exact={EXACT: 1}), "hit", "exact", "serve"),
        (Mode.REPLAY, FakeLookups(normalised={NORMALISED: 2}), "hit", "normalised", "serve"),
        (Mode.AUTO, FakeLookups(near_result=NearSearch(served=Match("lexical", 3, 1.0))), "hit", "lexical", "serve"),
        (Mode.AUTO, FakeLookups(), "miss", "none", "forward"),
        (Mode.REPLAY, FakeLookups(), "miss", "none", "refuse"),
        (Mode.RECORD, FakeLookups(exact={EXACT: 1}), "miss", "none", "forward"),
        (Mode.PASSTHROUGH, FakeLookups(exact={EXACT: 1}), "passthrough", "none", "forward"),
        (Mode.AUTO, FakeLookups(in_flight=True), "hit", "exact", "serve"),
    ],
)
def test_tiers_in_order(mode, lookups, decision, tier, action) -> None:
    outcome = run(mode, lookups)
    assert (outcome.decision.decision, outcome.decision.tier_label, outcome.decision.action) == (decision, tier, action)


def test_an_exact_hit_never_computes_the_normalised_fingerprint() -> None:
    lookups = FakeLookups(exact={EXACT: 1})
    outcome = run(Mode.AUTO, lookups)
    assert lookups.calls == ["certain", "answer:1"]
    assert outcome.normalised_fp == "nfp of 1", "the served recording's own normalised fingerprint"


def test_a_miss_carries_fingerprints_and_review_candidates() -> None:
    queued = (Candidate(4, REVIEW, candidate_id=7),)
    outcome = run(Mode.AUTO, FakeLookups(near_result=NearSearch(best=queued[0], queued=queued)))
    assert outcome.decision.record and outcome.request_fp == EXACT and outcome.normalised_fp == NORMALISED
    assert outcome.near is not None and outcome.near.queued == queued


def test_waiting_for_a_recording_in_flight_is_auto_mode_only() -> None:
    lookups = FakeLookups(in_flight=True)
    run(Mode.REPLAY, lookups)
    assert "in_flight" not in lookups.calls


def test_a_bypass_skips_every_lookup_and_is_refused_in_replay() -> None:
    bypass = Bypass("no_cache_header", "header x-semula-no-cache")
    lookups = FakeLookups(exact={EXACT: 1})
    assert run(Mode.AUTO, lookups, bypass=bypass).decision.decision == "bypass"
    assert lookups.calls == []
    assert run(Mode.REPLAY, lookups, bypass=bypass).decision.action == "refuse"


def test_a_near_bypass_reaches_the_near_search_as_its_reason() -> None:
    hot = chat("What is the capital of France?", temperature=0.9)
    lookups = FakeLookups()
    outcome = run(Mode.AUTO, lookups, request=hot)
    assert outcome.near_bypass_reason and lookups.calls[-1] == f"near:{outcome.near_bypass_reason}"


def test_no_store_forwards_in_auto_and_refuses_in_replay_with_the_reason() -> None:
    auto = run(Mode.AUTO, None, store_problem="disk full")
    replay = run(Mode.REPLAY, None, store_problem="disk full")
    assert (auto.decision.decision, auto.decision.action) == ("error", "forward")
    assert replay.decision.action == "refuse" and "disk full" in replay.decision.reason


def test_an_unparsable_request_is_decided_by_its_bypass() -> None:
    bypass = Bypass("unparsable_body", "cannot match this request: not JSON")
    outcome = run(Mode.REPLAY, FakeLookups(), request=None, bypass=bypass)
    assert outcome.decision.action == "refuse" and outcome.request_fp is None


def test_run_now_refuses_a_cascade_that_waits() -> None:
    import asyncio

    async def waits() -> int:
        await asyncio.sleep(0)
        return 1

    with pytest.raises(RuntimeError, match="event loop"):
        run_now(waits())


OLD = NOW - timedelta(days=40)


@pytest.mark.parametrize(
    ("mode", "lookups", "settings", "decision", "action", "record", "reason"),
    [
        # the recording is gone since the index was read: a miss, as if the index had not had it
        (Mode.AUTO, FakeLookups(exact={EXACT: 1}, gone={1}), SETTINGS, "miss", "forward", True,
         "no recording matches: recording"),
        (Mode.REPLAY, FakeLookups(exact={EXACT: 1}, gone={1}), SETTINGS, "miss", "refuse", False,
         "no recording matches"),
        # older than max_age: warn serves, fail refuses in replay, re-record forwards in auto
        (Mode.AUTO, FakeLookups(exact={EXACT: 1}, recorded_at=OLD), ProjectSettings(max_age="30d"),
         "hit", "serve", False, "exact match"),
        (Mode.REPLAY, FakeLookups(exact={EXACT: 1}, recorded_at=OLD),
         ProjectSettings(max_age="30d", max_age_policy="fail"), "error", "refuse", False,
         "recording older than max_age 30d (recorded 40d ago): re-record it (the project's max_age_policy is fail)"),
        (Mode.AUTO, FakeLookups(exact={EXACT: 1}, recorded_at=OLD),
         ProjectSettings(max_age="30d", max_age_policy="re-record"), "miss", "forward", True,
         "recording older than max_age 30d (recorded 40d ago): forwarded and re-recorded"),
        (Mode.REPLAY, FakeLookups(exact={EXACT: 1}, recorded_at=NOW - timedelta(days=2)),
         ProjectSettings(max_age="30d", max_age_policy="fail"), "hit", "serve", False, "exact match"),
    ],
)
def test_a_hit_is_made_final_inside_the_cascade(mode, lookups, settings, decision, action, record, reason) -> None:
    """What leaves the cascade is final: a gone or too old recording is decided here, not by the caller."""
    outcome = run(mode, lookups, settings=settings)
    found = outcome.decision
    assert (found.decision, found.action, found.record, found.reason) == (decision, action, record, reason)
    assert (outcome.answer is not None) == (action == "serve"), "the outcome carries what to serve, and only then"
    if action == "serve":
        assert outcome.answer.entry == "entry 1"
    assert (outcome.stale is not None) == (lookups.recorded_at == OLD and action == "serve")


@dataclass
class ReloadingLookups(FakeLookups):
    """A reload replaces entry 1 while its answer is fetched: the index then has `after` (or the file only)."""

    after: int | None = 2
    file_brings: int | None = None

    async def answer(self, entry_id: int) -> Answered | None:
        if entry_id == 1:
            self.exact = {EXACT: self.after} if self.after is not None else {}
        return await super().answer(entry_id)

    async def folder_changed(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        self.calls.append("folder_changed")
        if self.file_brings is None or EXACT in self.exact:
            return False
        self.exact[EXACT] = self.file_brings
        return True


@pytest.mark.parametrize(
    ("lookups", "served"),
    [
        (ReloadingLookups(exact={EXACT: 1}, gone={1}, after=2), "entry 2"),  # read anew under another id
        (ReloadingLookups(exact={EXACT: 1}, gone={1}, after=None, file_brings=3), "entry 3"),  # removed, then its file came back
    ],
)
@pytest.mark.parametrize("mode", [Mode.AUTO, Mode.REPLAY])
def test_a_hit_replaced_by_a_reload_is_looked_up_again(lookups, served, mode) -> None:
    """A checkout under a running proxy reloads a recording between the index read and the answer fetch:
    the request is served the reloaded recording, not forwarded (a race seen in CI)."""
    outcome = run(mode, lookups)
    assert (outcome.decision.decision, outcome.decision.action) == ("hit", "serve"), lookups.calls
    assert outcome.answer.entry == served and not outcome.gone


def test_a_hit_gone_for_good_stays_a_miss() -> None:
    lookups = ReloadingLookups(exact={EXACT: 1}, gone={1}, after=None)
    outcome = run(Mode.REPLAY, lookups)
    assert (outcome.decision.decision, outcome.decision.action, outcome.gone) == ("miss", "refuse", True)
