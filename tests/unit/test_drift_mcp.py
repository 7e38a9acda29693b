"""`semula drift` on MCP recordings, the parts without a server: where a recording may go (only a
registered entry, its port and scheme the entry's), which wire it was made on, how its answer is read and
compared, and which credentials go with it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from semula.drift import compare
from semula.drift.mcpcheck import McpOptions, _answer, check_mcp, credentials_of
from semula.drift.mcpsend import LEGACY, MODERN, Exchange, McpTarget, TooBig, header_value, registered, target_of, wire_of
from semula.drift.select import Selected
from semula.drift.send import NotSent
from semula.providers.mcpwire import response_of, result_text
from semula.recordings.format import Recording, loads

ADD_RESULT = {"content": [{"type": "text", "text": "1 + 2 = 3 (call 1)"}], "isError": False}


def recording(host: str = "mcp.example.com", endpoint: str = "/mcp", method: str = "tools/call",
              params: Any = None, result: Any = None, sse: bool = False, at: str = "2026-01-01T00:00:00") -> Recording:
    params = {"name": "add", "arguments": {"a": 1, "b": 2}} if params is None else params
    message = {"jsonrpc": "2.0", "id": 7, "result": ADD_RESULT if result is None else result}
    response: dict[str, Any] = {"status": 200, "headers": [
        f"content-type: {'text/event-stream' if sse else 'application/json'}"]}
    if sse:
        response["body_sse"] = [f"event: message\ndata: {json.dumps(message)}\n\n"]
    else:
        response["body_json"] = message
    return loads(json.dumps({
        "format": "semula-recording/1", "project": "default", "provider": "mcp", "host": host, "method": "POST",
        "endpoint": endpoint, "model": method, "recorded_at": at, "streamed": sse,
        "request": {"provider": "mcp", "method": "POST", "endpoint": endpoint, "model": method, "query": [],
                    "headers": [], "body": {"server": host, "method": method, "params": params}, "messages": [],
                    "params": {}, "parsed": False, "stream": False, "system": None, "tools": []},
        "response": response, "usage": {"prompt_tokens": None, "completion_tokens": None}}))


TARGETS = [
    ("host only: https on 443, the recording's path", ["mcp.example.com"], "https://mcp.example.com/mcp"),
    ("the entry's port", ["mcp.example.com:8443"], "https://mcp.example.com:8443/mcp"),
    ("the entry's path", ["mcp.example.com/mcp/"], "https://mcp.example.com/mcp/"),
    ("plain HTTP only when the entry says so", ["http://mcp.example.com:8000/mcp"], "http://mcp.example.com:8000/mcp"),
    ("an https:// entry", ["https://mcp.example.com:9000"], "https://mcp.example.com:9000/mcp"),
    ("the first entry for this server", ["other.test", "MCP.example.com:1234,mcp.example.com:99"],
     "https://mcp.example.com:1234/mcp"),
]


@pytest.mark.parametrize(("case", "entries", "url"), TARGETS, ids=[t[0] for t in TARGETS])
def test_the_entry_gives_scheme_host_and_port(case: str, entries: list[str], url: str) -> None:
    assert target_of(recording(), registered(entries)).url == url


REFUSED = [
    ("nothing registered", [], "is not registered"),
    ("another host", ["mcp.example.org:443"], "is not registered"),
    ("another path of the host", ["mcp.example.com/other"], "is not registered"),
    ("a suffix of the host", ["example.com"], "is not registered"),
    ("a pattern", ["*.example.com"], "named only by the pattern *.example.com"),
]


@pytest.mark.parametrize(("case", "entries", "why"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_recording_of_another_server_is_not_sent(case: str, entries: list[str], why: str) -> None:
    with pytest.raises(NotSent) as caught:
        target_of(recording(), registered(entries))
    assert why in str(caught.value) and "--mcp-server mcp.example.com[:PORT]/mcp" in str(caught.value)


def test_a_bad_entry_is_named() -> None:
    with pytest.raises(ValueError, match="'bad host'"):
        registered(["bad host"])


WIRES = [
    ("initialize", recording(method="initialize", params={"protocolVersion": "2025-11-25"}), LEGACY),
    ("server/discover", recording(method="server/discover", params={}), MODERN),
    ("a handshake-era result", recording(), LEGACY),
    ("a resultType", recording(result={**ADD_RESULT, "resultType": "complete"}), MODERN),
    ("the server's _meta stamp, in SSE", recording(sse=True, result={
        **ADD_RESULT, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s"}}}), MODERN),
]


@pytest.mark.parametrize(("case", "rec", "wire"), WIRES, ids=[w[0] for w in WIRES])
def test_the_wire_a_recording_was_made_on(case: str, rec: Recording, wire: str) -> None:
    assert wire_of(rec) == wire


def test_the_response_is_found_in_json_or_sse_by_its_id() -> None:
    progress = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\r\n\r\n'
    first = b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"a":1}}\r\n\r\n'
    second = b'data: {"jsonrpc":"2.0","id":2,\ndata: "result":{"a":2}}\n\n'
    body = progress + first + second
    assert response_of(body, "text/event-stream; charset=utf-8") == {"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}
    assert response_of(body, "text/event-stream", 2)["result"] == {"a": 2}  # type: ignore[index]
    assert response_of(body, "text/event-stream", "2") is None  # an id is matched with its type
    assert response_of(b'{"jsonrpc":"2.0","id":3,"error":{"code":1}}', "application/json", 3) is not None
    assert response_of(b"<html>", "text/html") is None


@pytest.mark.parametrize(("result", "text"), [
    (ADD_RESULT, "1 + 2 = 3 (call 1)"),
    ({"contents": [{"uri": "notes://today", "text": "notes"}, {"uri": "b", "blob": "AA=="}]}, "notes"),
    ({"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi."}}]}, "Say hi."),
    ({"tools": [{"name": "add"}]}, ""),
    (None, ""),
])
def test_the_answer_text_is_the_results_text(result: Any, text: str) -> None:
    assert result_text(result) == text


def test_a_changed_value_drifts_an_unchanged_one_does_not() -> None:
    recorded = {"jsonrpc": "2.0", "id": 7, "result": ADD_RESULT}
    same = compare.compare(_answer(200, recorded), _answer(200, {**recorded, "id": 1}), exact=True)
    assert not same.drifted  # the JSON-RPC id is never compared
    other = {**recorded, "result": {**ADD_RESULT, "content": [{"type": "text", "text": "1 + 2 = 3 (call 2)"}]}}
    changed = compare.compare(_answer(200, recorded), _answer(200, other), exact=True)
    assert changed.drifted and changed.severity == compare.MINOR and changed.diff == ("-1)", "+2)")
    assert changed.similarity > compare.TEXT_DRIFT_BELOW  # a model answer this close would not drift
    error = compare.compare(_answer(200, recorded), _answer(200, {"jsonrpc": "2.0", "id": 1,
                                                                   "error": {"code": -1, "message": "x"}}), exact=True)
    assert error.severity == compare.BREAKING
    refused = compare.compare(_answer(200, recorded), _answer(401, None), exact=True)
    assert refused.severity == compare.BREAKING and refused.status == (200, 401)


@pytest.mark.parametrize(("environ", "headers", "sent"), [
    ({}, (), ()),
    ({"SEMULA_MCP_TOKEN": " tok "}, (), (("authorization", "Bearer tok"),)),
    ({"SEMULA_MCP_TOKEN": "tok"}, (("Authorization", "Basic x"),), (("Authorization", "Basic x"),)),
    ({"SEMULA_MCP_TOKEN": "tok"}, (("x-api-key", "k"),), (("x-api-key", "k"), ("authorization", "Bearer tok"))),
])
def test_credentials_are_the_users_or_none(environ: dict[str, str], headers: tuple[tuple[str, str], ...],
                                           sent: tuple[tuple[str, str], ...]) -> None:
    assert credentials_of(environ, headers) == sent


def test_a_name_header_survives_http() -> None:
    assert header_value("add") == "add"
    assert header_value("météo").startswith("=?base64?")


def _exchange(handler: Any, wire: str = LEGACY, cap: int = 1 << 20) -> tuple[Exchange, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    client = httpx.Client(transport=httpx.MockTransport(record))
    return Exchange(client, McpTarget("https://mcp.example.com/mcp", "mcp.example.com"), wire,
                    (("authorization", "Bearer t"),), cap), seen


def test_a_session_is_opened_used_and_closed() -> None:
    def server(request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(200)
        message = json.loads(request.content)
        if "id" not in message:
            return httpx.Response(202)
        result = {"protocolVersion": "2025-06-18"} if message["method"] == "initialize" else {"ok": True}
        return httpx.Response(200, headers={"mcp-session-id": "s1", "content-type": "text/event-stream"},
                              content=f"data: {json.dumps({'jsonrpc': '2.0', 'id': message['id'], 'result': result})}\n\n")

    exchange, seen = _exchange(server)
    exchange.open({"protocolVersion": "2025-03-26", "capabilities": {"x": {}}})
    reply = exchange.call("tools/list", {})
    exchange.close()
    assert [(r.method, json.loads(r.content).get("method") if r.content else None) for r in seen] == [
        ("POST", "initialize"), ("POST", "notifications/initialized"), ("POST", "tools/list"), ("DELETE", None)]
    asked = json.loads(seen[0].content)["params"]
    assert asked["protocolVersion"] == "2025-03-26" and asked["capabilities"] == {"x": {}}
    assert asked["clientInfo"]["name"] == "semula-drift"
    assert "mcp-session-id" not in seen[0].headers
    assert all(r.headers["mcp-session-id"] == "s1" and r.headers["mcp-protocol-version"] == "2025-06-18"
               and r.headers["authorization"] == "Bearer t" for r in seen[1:])
    assert reply.request_id == 2 and response_of(reply.live.body, "text/event-stream", 2) is not None


def test_a_refused_session_sends_nothing_more() -> None:
    exchange, seen = _exchange(lambda request: httpx.Response(401))
    reply = exchange.open(None)
    exchange.close()
    assert reply is not None and reply.live.status == 401 and not exchange.opened and len(seen) == 1


def test_the_single_exchange_wire_sends_its_envelope() -> None:
    exchange, seen = _exchange(lambda request: httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}}),
                               wire=MODERN)
    assert exchange.open(None) is None and exchange.opened
    exchange.call("tools/call", {"name": "add", "arguments": {}})
    exchange.close()
    [request] = seen
    meta = json.loads(request.content)["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == request.headers["mcp-protocol-version"] == "2026-07-28"
    assert request.headers["mcp-method"] == "tools/call" and request.headers["mcp-name"] == "add"
    assert "mcp-session-id" not in request.headers


def test_an_answer_over_the_cap_is_not_read() -> None:
    exchange, _ = _exchange(lambda request: httpx.Response(200, content=b"x" * 5000), cap=1000)
    with pytest.raises(TooBig, match="over 1000 bytes"):
        exchange.call("tools/list", {})


def test_check_sends_nothing_unregistered_and_calls_in_recorded_order() -> None:
    seen: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        message = json.loads(request.content or b"{}")
        if "id" not in message:
            return httpx.Response(202 if request.method == "POST" else 200)
        result = {"protocolVersion": "2025-11-25"} if message["method"] == "initialize" else ADD_RESULT
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})

    items = [Selected("a.json", recording(params={"name": "add", "arguments": {"a": 2}}, at="2026-01-01T00:00:02")),
             Selected("b.json", recording(at="2026-01-01T00:00:01")),
             Selected("c.json", recording(host="other.example.com"))]
    client = httpx.Client(transport=httpx.MockTransport(server))
    nothing = check_mcp(items, client, McpOptions(), None, 1 << 20, 0.6)
    assert {c.outcome for c in nothing.values()} == {"skipped"} and seen == []

    checked = check_mcp(items, client, McpOptions(registered(["mcp.example.com"])), None, 1 << 20, 0.6)
    assert {rel: c.outcome for rel, c in checked.items()} == {"a.json": "same", "b.json": "same", "c.json": "skipped"}
    assert {r.url.host for r in seen} == {"mcp.example.com"}
    sent = [json.loads(r.content).get("params", {}).get("arguments") for r in seen if r.method == "POST"]
    assert sent == [None, None, {"a": 1, "b": 2}, {"a": 2}]  # initialize, initialized, then as recorded
