"""What an answered call says about itself: the x-semula-* headers and the flow's comment in mitmweb.

Both say what the call-log row and the console line say (decision, tier, score, entry, why), in the
words a client's headers and mitmweb's comment column can hold.
"""

from __future__ import annotations

from functools import lru_cache

from semula.core.decision import Decision
from semula.proxy.call.flowstate import FlowState

COMMENT_ERROR_CHARS = 300


@lru_cache(maxsize=4096)
def wire_semula_headers(decision: Decision) -> tuple[tuple[bytes, bytes], ...]:
    """`semula_headers` encoded for the wire, once per distinct decision (a hit's is the same every time)."""
    return tuple((k.encode(), v.encode()) for k, v in semula_headers(decision).items())


def semula_headers(decision: Decision, entry_id: int | None = None) -> dict[str, str]:
    """The x-semula-* headers every answered call carries; score and entry only when there is one (an
    empty header reads as a value to clients that parse it)."""
    entry = decision.entry_id if decision.entry_id is not None else entry_id
    headers = {"x-semula-decision": decision.decision, "x-semula-tier": decision.tier_label}
    if decision.score is not None:
        headers["x-semula-score"] = f"{decision.score:.3f}"
    if entry is not None:
        headers["x-semula-entry"] = str(entry)
    return headers


def flow_comment(decision: Decision, entry: int | None, state: FlowState) -> str:
    """Short ASCII words first ("hit exact", "miss", "refused"): they read in mitmweb's comment column."""
    head = "refused" if decision.action == "refuse" else decision.decision
    if decision.tier is not None:
        head += f" {decision.tier_label}"
    parts = [head]
    if decision.score is not None:
        parts.append(f"score {decision.score:.3f}")
    if entry is not None:
        parts.append(f"entry #{entry}")
    parts.append(f"project {state.project}")
    if decision.bypass_reason:
        parts.append(f"bypass: {decision.bypass_reason}")
    if queued := queued_text(state):
        parts.append(queued)
    if state.error:
        parts.append(state.error[:COMMENT_ERROR_CHARS])
    return " · ".join(parts)


def queued_text(state: FlowState) -> str | None:
    """What says this call queued review candidates ("queued for review #7 (…)"), or None."""
    near = state.outcome.near if state.outcome else None
    if near is None or not near.queued:
        return None
    ids = ", ".join(f"#{c.candidate_id}" for c in near.queued)
    first = near.queued[0]
    return f"queued for review {ids} (`semula review show {first.candidate_id}`)"
