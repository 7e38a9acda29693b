"""MCP servers' traffic in the proxy: what is answered locally, and a recording served as this session's answer.

A request to a server the user named (`semula_mcp_servers`) that has the JSON-RPC shape is an MCP call:
a JSON-RPC request goes through the one cascade with the MCP adapter (`providers/mcp.py`), like a model
call. What is not a call never reaches the store: a notification or the client's answer to a server
request (202 Accepted, no body), the GET that opens the server-to-client stream and the DELETE that
ends a session. Replay answers those itself (GET: 405, which the transport allows when a server offers
no stream; DELETE: 200), so replay needs no server; the other modes forward them unrecorded.

A served recording is rewritten for the client that asked: the request's JSON-RPC id (and progress
token), and the session id the client holds, or a new one made here when the recording is `initialize`.
A miss is a JSON-RPC error with the request's id (HTTP 200), which the SDKs raise with its message.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from mitmproxy import http

from semula.core.cascade import Outcome
from semula.core.decision import NOT_A_CALL, Action, Decision, Kind
from semula.core.modes import Mode
from semula.providers.mcp import MCP, McpServer, call_label, message_kind
from semula.providers.mcpwire import error_body, with_request_ids
from semula.proxy.call.flowstate import FlowState
from semula.proxy.call.headers import semula_headers

__all__ = ["SESSION_HEADER", "local_outcome", "mcp_message", "refused", "served"]

SESSION_HEADER = "mcp-session-id"
_LOCAL = {  # what replay answers for traffic that is not a call: (status, why)
    "notification": (202, "MCP notification"),
    "response": (202, "MCP client's answer to a server request"),
    "GET": (405, "MCP server-to-client stream (GET)"),
    "DELETE": (200, "MCP session end (DELETE)"),
}


def mcp_message(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC message a POST body holds, else None (then the request is not an MCP call)."""
    try:
        value = json.loads(body) if body.strip() else None
    except ValueError:
        return None
    return value if message_kind(value) is not None else None


def local_outcome(flow: http.HTTPFlow, mode: Mode, state: FlowState, server: McpServer,
                  body: bytes) -> Outcome | None:
    """The outcome of MCP traffic that is not a call (in replay, its answer set on the flow); None for a
    JSON-RPC request (a call: the cascade decides) or a body that is not JSON-RPC (then `state.mcp` is
    cleared: the host's other traffic is an extra host's)."""
    method, asked = flow.request.method.upper(), flow.request.headers
    if method in ("GET", "DELETE"):
        # The stream's GET asks for SSE; DELETE names its session: anything else on the host is not MCP.
        if "text/event-stream" not in asked.get("accept", "") if method == "GET" else SESSION_HEADER not in asked:
            state.mcp = None
            return None
        kind = method
    else:
        message = mcp_message(body) if method == "POST" else None
        found = message_kind(message) if message is not None else None
        if found is None:
            state.mcp = None
            return None
        if found == "request":
            return None
        kind = found
    state.adapter = MCP
    status, what = _LOCAL[kind]
    reason = f"{NOT_A_CALL}{what} to {server}; never recorded"
    if mode is Mode.REPLAY:
        decision = Decision(Kind.BYPASS, Action.ANSWER, bypass_reason=reason,
                            reason=f"{reason}; answered by semula ({status}), replay never reaches the network")
        headers = {**semula_headers(decision)}
        if session := flow.request.headers.get(SESSION_HEADER):
            headers[SESSION_HEADER] = session
        if status == 405:
            headers["allow"] = "POST, DELETE"
        flow.response = http.Response.make(status, b"", headers)
    else:
        how = "passthrough mode" if mode is Mode.PASSTHROUGH else "forwarded unrecorded"
        decision = Decision(Kind.BYPASS, Action.FORWARD, bypass_reason=reason, reason=f"{reason}: {how}")
    return Outcome(decision)


def _request_ids(body: bytes) -> tuple[Any, Any]:
    """The JSON-RPC id and the `_meta.progressToken` of a request body."""
    message = mcp_message(body) or {}
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return message.get("id"), (meta.get("progressToken") if isinstance(meta, dict) else None)


def served(flow: http.HTTPFlow, state: FlowState) -> None:
    """The served recording made the answer to this request in this session."""
    response = flow.response
    assert response is not None
    request_id, token = _request_ids(flow.request.content or b"")
    response.content = with_request_ids(response.content or b"", response.headers.get("content-type", ""),
                                        request_id, token)
    canonical = state.canonical
    if canonical is not None and isinstance(canonical.body, dict) and canonical.body.get("method") == "initialize":
        response.headers[SESSION_HEADER] = uuid.uuid4().hex  # this replayed session's own
    elif session := flow.request.headers.get(SESSION_HEADER):
        response.headers[SESSION_HEADER] = session
    else:
        response.headers.pop(SESSION_HEADER, None)


def refused(flow: http.HTTPFlow, state: FlowState, message: str) -> None:
    """A replay refusal as the JSON-RPC error answering this request, its message naming the call."""
    response = flow.response
    assert response is not None
    request_id, _ = _request_ids(flow.request.content or b"")
    what = call_label(state.canonical.body if state.canonical is not None else None) or "this request"
    head = f"semula: MCP {what} on {state.host}{state.path}: "  # the server as the recordings key it
    headers = {k: v for k, v in response.headers.items() if k.lower().startswith("x-semula-")}
    headers["content-type"] = "application/json"
    if session := flow.request.headers.get(SESSION_HEADER):
        headers[SESSION_HEADER] = session
    flow.response = http.Response.make(200, error_body(request_id, head + message.removeprefix("semula: ")), headers)
