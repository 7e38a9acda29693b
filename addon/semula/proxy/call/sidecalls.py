"""Side calls in the proxy: trace and telemetry uploads to a provider host, which are not model calls.

They are never recorded and never looked up (no store, no fingerprint). Auto and record forward
them unrecorded; passthrough forwards them; replay answers them itself with the provider's success
answer (openai-agents' trace upload: 204), so a background upload can never become a refusal that
fails whichever test is running. Every mode logs them as `bypass`, the reason naming the side call.
Which paths are side calls is declared in the provider adapters (`providers/sidepaths.py`).
"""

from __future__ import annotations

from functools import lru_cache

from mitmproxy import http

from semula.core.cascade import Outcome
from semula.core.decision import Action, Decision, Kind
from semula.core.modes import Mode
from semula.providers import ADAPTERS, GENERIC, SideCall, SidePath, side_call_for
from semula.providers.sidepaths import compile_side_paths
from semula.proxy.call.headers import semula_headers
from semula.proxy.call.flowstate import FlowState

__all__ = ["ANSWER", "side_outcome"]

ANSWER = Action.ANSWER  # the decision's action when semula itself answers (replay of a side call)


@lru_cache(maxsize=16)
def _project_paths(patterns: tuple[str, ...]) -> tuple[SidePath, ...]:
    return compile_side_paths(patterns)  # validated when the option was read


def side_outcome(flow: http.HTTPFlow, mode: Mode, state: FlowState, patterns: tuple[str, ...]) -> Outcome | None:
    """The outcome of a side call (in replay with its local answer set on the flow), else None."""
    found = side_call_for(state.host, state.path, _project_paths(patterns))
    if found is None:
        return None
    state.adapter = next((a for a in ADAPTERS if a.name == found.provider), GENERIC)
    decision = _decision(mode, found)
    if decision.action == ANSWER:
        flow.response = _answer(found, decision)
    return Outcome(decision)


def _decision(mode: Mode, found: SideCall) -> Decision:
    reason = found.reason
    if mode is Mode.REPLAY:
        return Decision(Kind.BYPASS, ANSWER, bypass_reason=reason,
                        reason=f"{reason}: answered by semula ({found.path.status}), replay never reaches the network")
    if mode is Mode.PASSTHROUGH:
        return Decision(Kind.BYPASS, Action.FORWARD, bypass_reason=reason, reason=f"{reason}: passthrough mode")
    return Decision(Kind.BYPASS, Action.FORWARD, bypass_reason=reason, reason=f"{reason}: forwarded unrecorded")


def _answer(found: SideCall, decision: Decision) -> http.Response:
    headers = {**semula_headers(decision)}
    if found.path.content_type:
        headers["content-type"] = found.path.content_type
    return http.Response.make(found.path.status, found.path.body, headers)
