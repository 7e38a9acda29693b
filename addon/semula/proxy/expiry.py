"""The expiry gate on a hit: the project's `max_age` and policy applied to the recording about to be served.

The verdict is `core.expiry.verdict` (pure); this edge reads the clock, logs a warning once per
recording, and turns a refusal into the decision the addon refuses with. A hit never touches the
recording's time: only `re-record` (auto) forwards the call, and the new answer replaces it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

from semula.core.decision import Action, Decision, Kind
from semula.core.expiry import age_seconds, verdict
from semula.core.modes import Mode
from semula.proxy.flowstate import FlowState
from semula.store.types import Entry

log = logging.getLogger("semula")
MAX_WARNED = 10_000  # recordings warned about, remembered so each is said once


def recorded_at(entry: Entry) -> object:
    """When the recording was made: a loaded file's recorded_at, else when the store got it."""
    return (entry.provenance or {}).get("recorded_at") or entry.updated_at or entry.created_at


class ExpiryGate:
    def __init__(self) -> None:
        self.warned: set[int] = set()

    def not_served(self, entry: Entry | None, state: FlowState, mode: Mode) -> bool | None:
        """None: serve `entry`. False: it is gone (the addon decides again), or too old under `re-record`
        (auto): the hit in `state.outcome` becomes a forward that records anew. True: too old under `fail`
        (replay): the hit becomes a refusal saying why."""
        if entry is None:
            return False
        settings = state.settings
        if not settings.max_age or state.outcome is None:
            return None
        now = datetime.now(UTC).replace(tzinfo=None)
        found = verdict(age_seconds(recorded_at(entry), now), settings.max_age, settings.max_age_policy, mode)
        if found.action == "serve":
            return None
        if found.action == "warn":
            if entry.id not in self.warned and len(self.warned) < MAX_WARNED:
                self.warned.add(entry.id)
                log.warning("semula: recording #%s: %s (served; semula recordings stale lists them)", entry.id,
                            found.reason)
            return None
        hit = state.outcome.decision
        if found.action == "refuse":
            decision = Decision(Kind.ERROR, Action.REFUSE, tier=hit.tier, entry_id=hit.entry_id, reason=found.reason,
                                calibrated=hit.calibrated)
        else:
            decision = Decision(Kind.MISS, Action.FORWARD, record=True, reason=found.reason)
        state.outcome = replace(state.outcome, decision=decision)
        return found.action == "refuse"
