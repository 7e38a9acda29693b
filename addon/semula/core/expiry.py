"""Expiry: is a recording older than its project's `max_age`, and what the policy says to do then.

Pure: the recording's time, the clock's reading and the settings in, a verdict out. Expiry never
refreshes a recording on read: a hit changes nothing; only `re-record` in auto (or record mode)
forwards the call, and the new answer replaces the old recording.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from semula.core.decision import Action, Decision, Kind
from semula.core.modes import Mode

POLICIES = ("warn", "fail", "re-record")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "": 86400}  # a bare number: days


def parse_duration(text: str) -> float:
    """Seconds in `30d`, `12h`, `90m`, `2w`, `45s` (a bare number is days); ValueError otherwise."""
    match = _DURATION.match(str(text).lower())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration: use e.g. 30d, 12h, 90m, 2w")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def parse_time(value: str | datetime | None) -> datetime | None:
    """A recorded_at value as a naive UTC datetime, or None (absent or unreadable: never expires)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def age_seconds(recorded_at: str | datetime | None, now: datetime) -> float | None:
    moment = parse_time(recorded_at)
    return None if moment is None else (now - moment).total_seconds()


def describe_age(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f}d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.0f}h"
    return f"{max(seconds, 0) / 60:.0f}m"


@dataclass(frozen=True)
class Verdict:
    action: str  # serve | warn | refuse | re-record
    reason: str = ""


def verdict(age: float | None, max_age: str | None, policy: str, mode: Mode) -> Verdict:
    """What to do with a hit on a recording `age` seconds old under `max_age` and `policy`.

    `fail` refuses in replay (elsewhere it warns: auto may not silently refresh); `re-record` forwards
    and re-records in auto and record mode (in replay nothing may reach the network: it warns).
    """
    if age is None or not max_age or age <= parse_duration(max_age):
        return Verdict("serve")
    reason = f"recording older than max_age {max_age} (recorded {describe_age(age)} ago)"
    if policy == "fail" and mode is Mode.REPLAY:
        return Verdict("refuse", f"{reason}: re-record it (the project's max_age_policy is fail)")
    if policy == "re-record" and mode in (Mode.AUTO, Mode.RECORD):
        return Verdict("re-record", f"{reason}: forwarded and re-recorded")
    return Verdict("warn", reason)


def expiry_decision(hit: Decision, found: Verdict) -> Decision | None:
    """What replaces a hit under the verdict: a refusal saying why (`fail`, replay), a forward that
    records anew (`re-record`), or None (served: fresh, or old under `warn`)."""
    if found.action == "refuse":
        return Decision(Kind.ERROR, Action.REFUSE, tier=hit.tier, entry_id=hit.entry_id, reason=found.reason,
                        calibrated=hit.calibrated)
    if found.action == "re-record":
        return Decision(Kind.MISS, Action.FORWARD, record=True, reason=found.reason)
    return None
