"""The pure decision: given the mode, what the cache found and the bypass rules, what happens.

Plain values in, a value with its reasons out: no mitmproxy, DuckDB or clock. Table-tested
in tests/test_decision.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from semula.core.modes import Mode
from semula.core.tiers import Tier, tier_label


class Kind(StrEnum):
    """What the cache made of a call (the call log's `decision` column)."""

    HIT = "hit"
    MISS = "miss"
    BYPASS = "bypass"
    ERROR = "error"
    PASSTHROUGH = "passthrough"


# How the bypass reason of traffic semula answers itself in replay starts: never looked up, never a refusal,
# never a miss (the run summary and the report leave them out of failures: `calllog.tally`, `calllog.reader`).
SIDE_CALL = "side call: "  # a provider's telemetry or trace upload (`providers/sidepaths.py`)
NOT_A_CALL = "not a call: "  # MCP traffic that is no call: a notification, the GET stream, DELETE (`proxy/call/mcp.py`)


class Action(StrEnum):
    """What the proxy does with the call."""

    SERVE = "serve"  # answer with a recording
    FORWARD = "forward"  # send it upstream
    REFUSE = "refuse"  # replay mode: answer with an error that says why
    ANSWER = "answer"  # a side call in replay: answered locally, never recorded


@dataclass(frozen=True, slots=True)
class Match:
    tier: Tier
    entry_id: int
    score: float = 1.0
    calibrated: bool = False  # a near tier served by a threshold learnt from review verdicts

    @property
    def label(self) -> str:
        """As the call log names it: the tier, or `<tier>-calibrated`."""
        return tier_label(self.tier, self.calibrated)


@dataclass(frozen=True)
class Bypass:
    rule: str  # a rule's name, e.g. no_cache_header
    reason: str  # shown in the log: "header x-semula-no-cache"
    scope: str = "all"  # all: skip the cache; near: skip only the near-match tiers (`tiers.NEAR`)


@dataclass(frozen=True)
class Decision:
    decision: Kind
    action: Action
    tier: Tier | None = None  # the tier that matched (None: none did)
    entry_id: int | None = None
    score: float | None = None
    record: bool = False
    bypass_reason: str | None = None
    reason: str = ""
    calibrated: bool = False  # served by a learnt threshold (calibrated mode)

    @property
    def tier_label(self) -> str:
        """The call log's, console's and headers' tier: `none`, the tier, or `<tier>-calibrated`."""
        return tier_label(self.tier, self.calibrated)


def decide(mode: Mode, match: Match | None, bypass: Bypass | None = None, store_problem: str | None = None) -> Decision:
    """Decide what to do with one provider call.

    `bypass` is a full bypass (scope "all"); near-only bypasses never reach here because
    they only remove near-match candidates before `match` is chosen.
    """
    if mode is Mode.PASSTHROUGH:
        return Decision(Kind.PASSTHROUGH, Action.FORWARD, reason="passthrough mode: nothing is served or stored")
    if bypass is not None:
        if mode is Mode.REPLAY:
            return Decision(Kind.BYPASS, Action.REFUSE, bypass_reason=bypass.reason,
                            reason=f"cache bypassed ({bypass.reason}) and replay mode forbids the network")
        return Decision(Kind.BYPASS, Action.FORWARD, bypass_reason=bypass.reason, reason=f"cache bypassed: {bypass.reason}")
    if store_problem is not None:
        if mode is Mode.REPLAY:
            return Decision(Kind.ERROR, Action.REFUSE, reason=f"store unavailable: {store_problem}")
        return Decision(Kind.ERROR, Action.FORWARD, reason=f"store unavailable, forwarding unrecorded: {store_problem}")
    if mode is Mode.RECORD:
        return Decision(Kind.MISS, Action.FORWARD, record=True, reason="record mode: re-recording")
    if match is not None:
        return Decision(Kind.HIT, Action.SERVE, tier=match.tier, entry_id=match.entry_id, score=match.score,
                        reason=f"{match.label} match", calibrated=match.calibrated)
    if mode is Mode.REPLAY:
        return Decision(Kind.MISS, Action.REFUSE, reason="no recording matches")
    return Decision(Kind.MISS, Action.FORWARD, record=True, reason="no recording matches: recording")


def internal_error(mode: Mode, reason: str) -> Decision:
    """A bug of ours while deciding: refused in replay (nothing may reach the network), else forwarded
    unrecorded, so the call never goes down with it."""
    return Decision(Kind.ERROR, Action.REFUSE if mode is Mode.REPLAY else Action.FORWARD, reason=reason)
