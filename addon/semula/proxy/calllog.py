"""What each call leaves in the call log: one row (decision, tier, score, entry, why) for the notebooks.

The same call's console line is `proxy/console.py`, its headers and mitmweb comment `proxy/headers.py`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from semula.calllog.schema import CallRow
from semula.core.redact import redact_text
from semula.providers.base import Usage
from semula.proxy.flowstate import FlowState


def call_row(state: FlowState, method: str, mode: str, status: int | None, *, upstream_ms: float | None,
             usage: Usage | None, entry_id: int | None, recorded: bool) -> CallRow:
    decision = state.decision
    assert decision is not None
    canonical = state.canonical
    fast = state.fast
    if canonical is not None:
        provider, model = canonical.provider, canonical.model
    elif fast is not None:
        provider, model = fast.provider, fast.model
    else:
        provider, model = (state.adapter.name if state.adapter else None), None
    served = decision.action == "serve"
    near = state.outcome.near if state.outcome else None
    best = near.best if near is not None else None
    return CallRow(
        # when the request arrived: a stream recorded at its terminal event logs when its flow ends,
        # after the repeats it already served, and the log must still read in the order calls came
        ts=state.started_at.replace(tzinfo=UTC) if state.started_at is not None else datetime.now(UTC),
        project=state.project,
        provider=provider, host=state.host, method=method, path=_logged_path(state.path),
        model=model, mode=mode,
        decision=decision.decision, tier=decision.tier_label, score=decision.score, entry_id=entry_id,
        bypass_reason=decision.bypass_reason or (state.outcome.near_bypass_reason if state.outcome else None),
        streamed=state.streamed, status=status,
        decision_ms=state.decision_ms, upstream_ms=upstream_ms,
        recorded_upstream_ms=state.served.upstream_ms if served else None,
        recorded_prompt_tokens=state.served.usage.prompt_tokens if served else None,
        recorded_completion_tokens=state.served.usage.completion_tokens if served else None,
        request_fp=state.request_fp, normalised_fp=state.normalised_fp,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        recorded=recorded, error=state.error, fast=fast is not None,
        candidate_tier=str(best.verdict.tier) if best else None, candidate_score=best.verdict.score if best else None,
        candidate_entry_id=best.entry_id if best else None, guard_reason=best.verdict.guard_reason if best else None,
    )


@lru_cache(maxsize=1024)
def _logged_path(path: str) -> str:
    """The path with key-like strings redacted (the same few paths come again and again)."""
    return redact_text(path)
