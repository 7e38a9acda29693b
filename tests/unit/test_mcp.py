"""MCP calls: the key (server, method, params; never id, session or progress token), the answer rewritten
for the request that asked, the servers a user names, and the validator's hold on an MCP recording file."""

from __future__ import annotations

import json
from typing import Any

import pytest

from semula.core.request.canonical import request_fingerprint
from semula.core.settings import ProjectSettings
from semula.providers import PROVIDER_NAMES, adapter_for
from semula.providers.base import RawRequest
from semula.providers.mcp import MCP, McpServer, call_label, mcp_server_for, message_kind, parse_server, tool_of
from semula.providers.mcpwire import error_body, has_response, with_request_ids
from semula.recordings.entry import Answer, recording_of
from semula.recordings.folder import recording_from_entry
from semula.recordings.format import RecordingFileError, dumps, loads
from semula.store.types import Entry


def raw(message: dict[str, Any], host: str = "mcp.example.com", path: str = "/mcp",
        headers: dict[str, str] | None = None) -> RawRequest:
    return RawRequest("POST", host, path, (), headers or {}, json.dumps(message).encode())


def call(id_: Any = 1, arguments: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "add", "arguments": arguments if arguments is not None else {"a": 1, "b": 2}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


def fp(request: RawRequest) -> str:
    return request_fingerprint(MCP.canonicalise(request, None))  # type: ignore[arg-type]


def test_the_key_ignores_the_id_the_session_and_the_progress_token() -> None:
    first = fp(raw(call(1), headers={"mcp-session-id": "aaa"}))
    assert fp(raw(call("req-77", meta={"progressToken": 5}), headers={"mcp-session-id": "bbb"})) == first
    assert fp(raw(call(9, meta={"progressToken": "t", "io.modelcontextprotocol/clientInfo": {"name": "x"}}))) == first
    assert fp(raw(call(1), headers={"authorization": "Bearer abc"})) == first


def test_other_arguments_another_tool_or_another_server_is_another_call() -> None:
    first = fp(raw(call()))
    assert fp(raw(call(arguments={"a": 1, "b": 3}))) != first
    assert fp(raw({**call(), "params": {"name": "sub", "arguments": {"a": 1, "b": 2}}})) != first
    assert fp(raw(call(), host="other.example.com")) != first
    assert fp(raw(call(), path="/v2/mcp")) != first
    assert fp(raw(call(arguments={"b": 2, "a": 1}))) == first  # key order is not a difference


def test_initialize_is_keyed_without_the_clients_name_and_version() -> None:
    def init(version: str, protocol: str = "2025-11-25") -> str:
        return fp(raw({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": protocol, "capabilities": {}, "clientInfo": {"name": "mcp", "version": version}}}))

    assert init("1.0") == init("2.0")
    assert init("1.0") != init("1.0", protocol="2025-06-18")


def test_the_canonical_names_the_method_and_tool() -> None:
    canonical = MCP.canonicalise(raw(call()), None)  # type: ignore[arg-type]
    assert canonical.provider == "mcp" and canonical.model == "tools/call add on mcp.example.com" and canonical.parsed
    assert canonical.last_user_text() == '{"a": 1, "b": 2}'  # what the normalised key and the near tiers compare
    assert canonical.body == {"server": "mcp.example.com", "method": "tools/call",
                              "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    assert "mcp" in PROVIDER_NAMES and adapter_for("mcp.example.com", "/mcp").name == "generic"  # never by host


@pytest.mark.parametrize(("key", "label", "tool"), [
    ({"server": "s", "method": "tools/call", "params": {"name": "add", "arguments": {}}}, "tools/call 'add'", "add"),
    ({"server": "s", "method": "tools/list", "params": None}, "tools/list", None),
    ({"server": "s", "method": "resources/read", "params": {"uri": "notes://x"}}, "resources/read 'notes://x'", None),
    ({"server": "s", "method": "tools/call", "params": {"name": 5}}, "tools/call", None),  # hostile: not a name
    ({"server": "s", "method": "tools/call", "params": ["add"]}, "tools/call", None),
    ({"server": "s", "method": 7}, None, None), ("tools/call", None, None), (None, None, None),
])
def test_the_call_log_and_console_name_the_call(key: Any, label: str | None, tool: str | None) -> None:
    assert (call_label(key), tool_of(key)) == (label, tool)


def test_a_key_in_a_tool_name_never_reaches_the_call_logs_tool_column() -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 5
    canonical = MCP.canonicalise(raw({**call(), "params": {"name": f"run {secret}", "arguments": {}}}), None)  # type: ignore[arg-type]
    assert secret not in (tool_of(canonical.body) or "") and "[REDACTED" in (tool_of(canonical.body) or "")


@pytest.mark.parametrize(("message", "kind"), [
    (call(), "request"),
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, "notification"),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}, "notification"),
    ({"jsonrpc": "2.0", "id": 4, "result": {}}, "response"),
    ({"jsonrpc": "1.0", "id": 1, "method": "x"}, None), ({"id": 1, "method": "x"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "x"}, None), ([call()], None), ({"model": "gpt-4o"}, None),
])
def test_the_json_rpc_shape(message: Any, kind: str | None) -> None:
    assert message_kind(message) == kind


def test_servers_named_by_host_port_and_path() -> None:
    assert parse_server("https://MCP.example.com:8443/mcp") == McpServer("mcp.example.com", 8443, "/mcp")
    assert parse_server("127.0.0.1") == McpServer("127.0.0.1")
    servers = ("mcp.example.com/mcp", "*.tools.example:9000")
    assert mcp_server_for(servers, "mcp.example.com", 443, "/mcp/") is not None
    assert mcp_server_for(servers, "mcp.example.com", 443, "/other") is None
    assert mcp_server_for(servers, "a.tools.example", 9000, "/x") is not None
    assert mcp_server_for(servers, "a.tools.example", 9001, "/x") is None
    assert mcp_server_for(servers, "mcp.example.com.evil.test", 443, "/mcp") is None
    for bad in ("mcp.example.com:99999", "user@host", "host name", "", "host?x=1"):
        with pytest.raises(ValueError, match="semula_mcp_servers"):
            parse_server(bad)


def test_a_json_answer_gets_the_requests_id() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3 \\u00e9"}]}}'
    out = json.loads(with_request_ids(body, "application/json", "abc"))
    assert out["id"] == "abc" and out["result"]["content"][0]["text"] == "3 é"


def test_an_sse_answer_keeps_its_frames_with_the_requests_id_and_progress_token() -> None:
    body = (b"event: message\nid: ev-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
            b"\"params\":{\"progressToken\":1,\"progress\":0.5}}\n\n"
            b": keep-alive\n\n"
            b"event: message\nid: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ok\":true}}\n\n")
    out = with_request_ids(body, "text/event-stream", 42, progress_token="p-9")
    frames = out.split(b"\n\n")[:-1]
    assert len(frames) == 3 and frames[1] == b": keep-alive"
    assert frames[0].startswith(b"event: message\nid: ev-1\ndata: ")
    assert json.loads(frames[0].split(b"data: ", 1)[1])["params"]["progressToken"] == "p-9"
    assert json.loads(frames[2].split(b"data: ", 1)[1]) == {"jsonrpc": "2.0", "id": 42, "result": {"ok": True}}
    assert has_response(frames) and not has_response(frames[:2])


def test_a_miss_is_a_json_rpc_error_for_the_request() -> None:
    assert json.loads(error_body(7, "no recording")) == {
        "jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "no recording"}}


def _document(host: str = "mcp.example.com") -> dict[str, Any]:
    canonical = MCP.canonicalise(raw(call(), host=host), None)  # type: ignore[arg-type]
    new = recording_of("default", canonical, ProjectSettings(),
                       Answer(host=host, body=b'{"jsonrpc":"2.0","id":1,"result":{}}',
                              headers=(("content-type", "application/json"), ("mcp-session-id", "s-1"))))
    text = dumps(recording_from_entry(Entry.of(new, id=1)))
    assert "s-1" not in text  # a session id is never stored
    return json.loads(text)


def test_an_mcp_recording_file_loads() -> None:
    assert loads(json.dumps(_document())).host == "mcp.example.com"


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d.update(host="mcp.example.com:8443"), "host"),
    (lambda d: d.update(host="evil.test/x@mcp.example.com"), "host"),
    (lambda d: d.update(host="evil.test"), "request.body.server"),  # the key names another server
    (lambda d: d.update(endpoint="//evil.test/mcp"), "endpoint"),
    (lambda d: d["request"].update(endpoint="@evil.test/mcp"), "request.endpoint"),
    (lambda d: d["request"].update(body={"server": "mcp.example.com", "method": "tools/call"}), "request.body"),
    (lambda d: d["request"]["body"].update(method=["x"]), "request.body.method"),
])
def test_a_hostile_mcp_recording_is_refused(change: Any, named: str) -> None:
    document = _document()
    change(document)
    with pytest.raises(RecordingFileError, match=named.replace(".", r"\.")):
        loads(json.dumps(document))


# ------------------------------------------------------------------ near matches of tool calls (review, never served)

def canonical(arguments: dict[str, Any], name: str = "add", host: str = "mcp.example.com") -> Any:
    return MCP.canonicalise(raw({**call(arguments=arguments), "params": {"name": name, "arguments": arguments}},
                                host=host), None)  # type: ignore[arg-type]


def nfp(request: Any) -> str:
    from semula.core.request.canonical import normalised_fingerprint

    return normalised_fingerprint(request, *ProjectSettings().fingerprint_inputs)


def test_arguments_that_differ_only_in_volatile_values_share_the_normalised_key() -> None:
    first = canonical({"city": "Paris", "request_id": "3f2b8c1e-9a4d-4e6b-8f0a-1c2d3e4f5a6b", "at": "2026-12-05T10:00:00Z"})
    later = canonical({"at": "2026-12-06T08:30:00Z", "city": "Paris", "request_id": "7d1e2f3a-4b5c-4d6e-8f7a-9b0c1d2e3f4a"})
    assert request_fingerprint(first) != request_fingerprint(later)
    assert nfp(first) == nfp(later)


@pytest.mark.parametrize("other", [
    {"city": "paris"},  # a string's case: a lookup may care
    {"city": "Paris "},  # its spacing
    {"city": "Lyon"},
    {"city": "Paris", "days": 3},  # one argument more
    {"city": ["Paris"]},  # another type
    {"ville": "Paris"},  # another name
])
def test_any_other_change_in_the_arguments_is_another_normalised_key(other: dict[str, Any]) -> None:
    assert nfp(canonical(other)) != nfp(canonical({"city": "Paris"}))


def test_another_tool_or_server_is_another_normalised_key_and_another_shape() -> None:
    from semula.core.checks import shape_differs

    first = canonical({"city": "Paris"})
    for other in (canonical({"city": "Paris"}, name="forecast"), canonical({"city": "Paris"}, host="b.example.com")):
        assert nfp(other) != nfp(first)
        assert shape_differs(other, first, ProjectSettings()) is not None  # never queued across them either


@pytest.mark.parametrize(("stored", "incoming", "guard_says"), [
    ({"query": "flights from Paris to Rome on 12 May", "seats": 2}, {"query": "flights from Paris to Rome on 12 May", "seats": 3},
     "number"),
    ({"sql": "SELECT name FROM users WHERE active = true LIMIT 10"}, {"sql": "SELECT name FROM users WHERE active = false LIMIT 10"},
     None),
    ({"texto": "¿Cuántos pedidos hay abiertos hoy en la tienda?"}, {"texto": "¿Cuántos pedidos no hay abiertos hoy en la tienda?"},
     None),
])
def test_a_close_tool_call_is_queued_for_review_with_the_guards_reason_and_never_served(
        stored: dict[str, Any], incoming: dict[str, Any], guard_says: str | None) -> None:
    from semula.core.bypass import near_bypass
    from semula.core.nearmatch import near_match
    from semula.core.tiers import Tier

    settings = ProjectSettings(lexical_serve_threshold=0.0)  # a project that serves every lexical near match
    skip = near_bypass(canonical(incoming), settings)
    assert skip is not None and skip.rule == "review_only"
    for tier, score in ((Tier.LEXICAL, None), (Tier.EMBEDDING, 0.999)):
        verdict = near_match(canonical(incoming), canonical(stored), settings, tier=tier, score=score,
                             near_bypass_reason=skip.reason)
        assert not verdict.serve and verdict.review, verdict
        assert verdict.reason is not None and verdict.reason.startswith("bypass: a tool call with other arguments")
        if guard_says:
            assert verdict.guard_reason is not None and guard_says in verdict.guard_reason, verdict
