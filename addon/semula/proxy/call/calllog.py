"""What each call leaves in the call log: one row (decision, tier, score, entry, why) for the notebooks.

The same call's console line is `proxy/call/console.py`, its headers and mitmweb comment `proxy/call/headers.py`.
`finish` ends a call, whoever ends it (the call answered or refused; the recorder; the error hook).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from mitmproxy import http

from semula.calllog.schema import CallRow
from semula.core.decision import NOT_A_CALL
from semula.core.redact import redact_text
from semula.providers.base import Usage
from semula.providers.mcp import tool_of
from semula.proxy.call.console import console_line
from semula.proxy.call.flowstate import FlowState
from semula.proxy.call.headers import flow_comment
from semula.proxy.call.parts import ProxyParts

if TYPE_CHECKING:  # loaded with the spans, when semula_otel is on (the proxy's start-up imports are measured)
    from semula.proxy.run.spanfacts import CallEnd


def release(parts: ProxyParts, state: FlowState) -> None:
    """Wake the identical requests waiting for this one (its recording is stored, or never will be)."""
    if state.pending_key is not None and (event := parts.pending.pop(state.pending_key, None)):
        event.set()
    state.pending_key = None


def finish(parts: ProxyParts, flow: http.HTTPFlow, state: FlowState, upstream_ms: float | None = None,
           usage: Usage | None = None, entry_id: int | None = None, recorded: bool = False) -> None:
    """The call's end: the waiting repeats woken, its row, mitmweb comment, refusal and console line."""
    release(parts, state)
    decision = state.decision
    assert decision is not None
    entry = decision.entry_id if decision.entry_id is not None else entry_id
    status = flow.response.status_code if flow.response is not None and not state.cut else None
    row = call_row(state, flow.request.method, parts.mode.value, status, upstream_ms=upstream_ms, usage=usage,
                   entry_id=entry, recorded=recorded)
    parts.life.tally.add(row.decision, row.mode, row.bypass_reason)
    if (calls := parts.calls) is not None:
        calls.append(row.as_dict(run_id=parts.run_id))
    # MCP traffic that is no call (the GET stream a client reopens, a notification) has its row only
    a_call = not (decision.bypass_reason or "").startswith(NOT_A_CALL)
    if (spans := parts.spans) is not None and a_call:
        spans.submit(call_end(flow, state, row, recorded, run_id=parts.run_id))
    flow.comment = flow_comment(decision, entry, state)
    if decision.action == "refuse":
        parts.refusals.add(state.tag, state.project, state.error or decision.reason or "refused", state.test)
    if parts.settings.console_calls and a_call:
        parts.lines.write(console_line(state, row, recorded))


def call_end(flow: http.HTTPFlow, state: FlowState, row: CallRow, recorded: bool, run_id: str) -> CallEnd:
    """What the call's span is made from, on the span thread: references only (a live answer is read there)."""
    from semula.proxy.run.spanfacts import CallEnd

    decision = state.decision
    assert decision is not None
    served = state.outcome.answer.entry if state.outcome is not None and state.outcome.answer is not None else None
    live = served is None and flow.response is not None
    mcp = state.mcp
    return CallEnd(row=row, run_id=run_id, end_ns=time.time_ns(), refused=decision.action == "refuse",
                   served=served, canonical=state.canonical, recorded=recorded,
                   mcp_server=f"{mcp.host}{f':{mcp.port}' if mcp.port else ''}{mcp.path or ''}" if mcp else None,
                   response=flow.response if live and not state.streamed else None,
                   chunks=tuple(state.chunks) if live and state.streamed else (), streamed=bool(row.streamed))


def call_row(state: FlowState, method: str, mode: str, status: int | None, *, upstream_ms: float | None,
             usage: Usage | None, entry_id: int | None, recorded: bool) -> CallRow:
    decision = state.decision
    assert decision is not None
    canonical = state.canonical
    fast = state.fast
    provider: str | None
    if canonical is not None:
        provider, model = canonical.provider, canonical.model
    elif fast is not None:
        provider, model = fast.provider, fast.model
    else:
        provider, model = state.provider or (state.adapter.name if state.adapter else None), state.model
    answer = state.outcome.answer if state.outcome else None
    served = answer.entry if answer is not None else None  # the recording served (`Entry`)
    near = state.outcome.near if state.outcome else None
    best = near.best if near is not None else None
    mcp_key = canonical.body if state.mcp is not None and canonical is not None else None
    return CallRow(
        # when the request arrived: a stream recorded at its terminal event logs when its flow ends,
        # after the repeats it already served, and the log must still read in the order calls came
        ts=state.started_at.replace(tzinfo=UTC) if state.started_at is not None else datetime.now(UTC),
        project=state.project,
        provider=provider, host=state.host, method=method, path=_logged_path(state.path),
        model=model, mode=mode,
        decision=decision.decision, tier=decision.tier_label, score=decision.score, entry_id=entry_id,
        bypass_reason=decision.bypass_reason or (state.outcome.near_bypass_reason if state.outcome else None),
        streamed=served.streamed if served is not None else state.streamed, status=status,
        decision_ms=state.decision_ms, upstream_ms=upstream_ms,
        recorded_upstream_ms=served.upstream_ms if served is not None else None,
        recorded_prompt_tokens=served.prompt_tokens if served is not None else None,
        recorded_completion_tokens=served.completion_tokens if served is not None else None,
        request_fp=state.request_fp, normalised_fp=state.normalised_fp,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        recorded=recorded, error=state.error, fast=fast is not None,
        candidate_tier=str(best.verdict.tier) if best else None, candidate_score=best.verdict.score if best else None,
        candidate_entry_id=best.entry_id if best else None, guard_reason=best.verdict.guard_reason if best else None,
        mcp_server=f"{state.host}{_logged_path(state.path)}" if state.mcp is not None else None,
        mcp_tool=tool_of(mcp_key),
    )


@lru_cache(maxsize=1024)
def _logged_path(path: str) -> str:
    """The path with key-like strings redacted (the same few paths come again and again)."""
    return redact_text(path)
