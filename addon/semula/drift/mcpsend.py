"""The edge of `semula drift` for MCP recordings: a call sent again, as a client sends it, to a server the user named.

An MCP server runs wherever its user runs it, so no registry lists its hosts. Drift sends an MCP
recording only to a server named for that run (`--mcp-server HOST[:PORT][/PATH]`, the entries the proxy
takes): the recording's host and path (its key) pick the entry, and the entry gives the host, the port
(443 without one) and the scheme (HTTPS, or plain HTTP when the entry starts with `http://`). Nothing of
where a request goes comes from the file. An entry with a wildcard (`*.example.com`) sends nothing: the
host would be the file's.

A call belongs to a session. On the handshake wire drift opens one per server: `initialize` (with the
recorded one's params when there is one), `notifications/initialized`, the calls with fresh JSON-RPC ids
and the session's `Mcp-Session-Id`, then DELETE. A recording made on the 2026-07-28 single-exchange wire
(no session; each request carries the protocol version, client info and capabilities in its `_meta`
and in headers) is sent that way. An answer is JSON or SSE; an SSE answer is read up to its JSON-RPC
response, and no answer is read past the recording file's size cap.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from semula.drift.send import Live, NotSent
from semula.providers.base import host_matches
from semula.providers.mcp import McpServer, parse_server
from semula.providers.mcpwire import has_response, response_of
from semula.providers.sse import FrameBuffer
from semula.recordings.format import Recording
from semula.recordings.entry import semula_version
from semula.recordings.validate import endpoint_problem

LEGACY, MODERN = "handshake", "single-exchange"
LEGACY_VERSION = "2025-11-25"  # the newest protocol version of the initialize handshake
MODERN_VERSION = "2026-07-28"  # the single-exchange wire's
_META = "io.modelcontextprotocol/"  # the reserved prefix of the single-exchange envelope's `_meta` keys
_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # its `Mcp-Name` header
_ACCEPT = "application/json, text/event-stream"
_SESSION = "mcp-session-id"


class TooBig(ValueError):
    """An answer over the recording file's size cap: not read further, not compared."""


@dataclass(frozen=True)
class Registered:
    """One `--mcp-server` entry: the server, and whether it is reached over TLS (not `http://`)."""

    server: McpServer
    tls: bool = True

    def __str__(self) -> str:
        return f"{'' if self.tls else 'http://'}{self.server}"


def registered(values: Iterable[str]) -> tuple[Registered, ...]:
    """`--mcp-server` values (each may hold several, comma-separated); ValueError naming a bad one."""
    out = []
    for value in values:
        for spec in (s.strip() for s in value.split(",")):
            if spec:
                out.append(Registered(parse_server(spec), tls=not spec.lower().startswith("http://")))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class McpTarget:
    url: str  # scheme, host and port the entry's; the path the entry's, else the recording's (a plain path)
    server: str  # the entry, as messages name it


def target_of(recording: Recording, servers: tuple[Registered, ...]) -> McpTarget:
    """Where an MCP recording is re-sent, or NotSent saying why (then nothing is sent)."""
    host, path = recording.host.lower(), recording.endpoint
    if (bad := endpoint_problem(path)) is not None:
        raise NotSent(f"endpoint {path!r:.60} {bad}: not sent")
    named = f"{host}{path}"[:120]
    by_pattern = None
    for entry in servers:
        server = entry.server
        if server.path is not None and server.path.rstrip("/") != path.rstrip("/"):
            continue
        if server.host.startswith("*."):
            by_pattern = by_pattern or (entry if host_matches(host, (server.host,)) else None)
            continue
        if server.host != host:
            continue
        scheme, default_port = ("https", 443) if entry.tls else ("http", 80)
        port = server.port or default_port
        url = httpx.URL(f"{scheme}://{server.host}:{port}{server.path or path}")
        if url.host != server.host or (url.port or default_port) != port or url.userinfo:
            raise NotSent(f"{named} does not stay on {entry}: not sent")
        return McpTarget(str(url), str(entry))
    if by_pattern is not None:
        raise NotSent(f"MCP server {named} is named only by the pattern {by_pattern}: drift sends to a server "
                      f"named exactly (--mcp-server {host}[:PORT]{path}); not sent")
    raise NotSent(f"MCP server {named} is not registered: not sent (name it with --mcp-server {host}[:PORT]{path})")


def call_of(recording: Recording) -> tuple[str, Any]:
    """The JSON-RPC method and params a recording's key holds (the validator checked their shape)."""
    body = recording.request.get("body")
    return (body["method"], body["params"]) if isinstance(body, dict) else ("", None)


def content_type(headers: Iterable[tuple[str, str]]) -> str:
    return next((v for k, v in headers if k.lower() == "content-type"), "")


def wire_of(recording: Recording) -> str:
    """The wire a recording was made on: its method, else its answer (a single-exchange result has a
    `resultType` and the server's `_meta` stamp)."""
    method, _ = call_of(recording)
    if method in ("initialize", "server/discover"):
        return LEGACY if method == "initialize" else MODERN
    message = response_of(recording.body, content_type(recording.headers))
    result = message.get("result") if message else None
    meta = result.get("_meta") if isinstance(result, dict) else None
    if isinstance(result, dict) and ("resultType" in result or (
            isinstance(meta, dict) and any(str(k).startswith(_META) for k in meta))):
        return MODERN
    return LEGACY


def header_value(value: str) -> str:
    """A value as the single-exchange wire's `Mcp-Name` carries it: printable ASCII as is, else base64-wrapped."""
    if value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?base64?"):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


@dataclass(frozen=True)
class Reply:
    live: Live
    request_id: int


class Exchange:
    """The requests drift makes to one server: in one session on the handshake wire, each on its own on
    the single-exchange wire. `headers` (the user's credentials) go with every request to this server."""

    def __init__(self, client: httpx.Client, target: McpTarget, wire: str, headers: tuple[tuple[str, str], ...],
                 cap: int) -> None:
        self.client, self.target, self.wire, self.headers, self.cap = client, target, wire, headers, cap
        self.session: str | None = None
        self.version: str | None = None
        self._last_id = 0

    def open(self, params: Any) -> Reply | None:
        """The handshake wire's `initialize` (None on the other wire); `opened` says whether it worked."""
        if self.wire != LEGACY:
            return None
        asked = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, **(params if isinstance(params, dict) else {}),
                 "clientInfo": {"name": "semula-drift", "version": semula_version()}}
        reply = self.call("initialize", asked)
        message = response_of(reply.live.body, content_type(reply.live.headers), reply.request_id)
        result = message.get("result") if message else None
        if reply.live.status < 300 and isinstance(result, dict):
            self.session = next((v for k, v in reply.live.headers if k.lower() == _SESSION), None)
            version = result.get("protocolVersion")
            usable = isinstance(version, str) and version.isascii() and version.isprintable() and len(version) <= 40
            self.version = version if usable else str(asked["protocolVersion"])
            self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, [])
        return reply

    @property
    def opened(self) -> bool:
        return self.wire != LEGACY or self.version is not None

    def call(self, method: str, params: Any) -> Reply:
        self._last_id += 1
        extra: list[tuple[str, str]] = []
        if self.wire == MODERN:
            envelope = {f"{_META}protocolVersion": MODERN_VERSION, f"{_META}clientCapabilities": {},
                        f"{_META}clientInfo": {"name": "semula-drift", "version": semula_version()}}
            if params is None or isinstance(params, dict):
                params = {**(params or {}), "_meta": envelope}
            extra = [("mcp-protocol-version", MODERN_VERSION), ("mcp-method", method)]
            name = params.get(_NAME_PARAM.get(method, "")) if isinstance(params, dict) else None
            if isinstance(name, str):
                extra.append(("mcp-name", header_value(name)))
        message = {"jsonrpc": "2.0", "id": self._last_id, "method": method,
                   **({"params": params} if params is not None else {})}
        return Reply(self._post(message, extra), self._last_id)

    def close(self) -> None:
        """End the session (DELETE), if the server gave one; its answer does not matter."""
        if self.session is None:
            return
        try:
            with self.client.stream("DELETE", self.target.url, headers=[*self._session_headers(), *self.headers]):
                pass  # its body is never read
        except httpx.HTTPError:
            pass
        self.session = None

    def _session_headers(self) -> list[tuple[str, str]]:
        return [*([(_SESSION, self.session)] if self.session else []),
                *([("mcp-protocol-version", self.version)] if self.version and self.wire == LEGACY else [])]

    def _post(self, message: dict[str, Any], extra: list[tuple[str, str]]) -> Live:
        headers = [("content-type", "application/json"), ("accept", _ACCEPT), *self._session_headers(), *extra,
                   *self.headers]
        data = json.dumps(message, ensure_ascii=False).encode("utf-8")
        started = time.perf_counter()
        with self.client.stream("POST", self.target.url, content=data, headers=headers) as response:
            body = read_answer(response, self.cap)
            return Live(response.status_code, list(response.headers.multi_items()), body,
                        (time.perf_counter() - started) * 1000)


def read_answer(response: httpx.Response, cap: int) -> bytes:
    """The answer's (decoded) bytes: an SSE answer up to the frame holding its JSON-RPC response (the server
    may keep the stream open), never more than `cap` bytes (TooBig)."""
    sse = content_type(response.headers.multi_items()).split(";", 1)[0].strip().lower() == "text/event-stream"
    frames = FrameBuffer()
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > cap:
            raise TooBig(f"the answer is over {cap} bytes (the recording file cap, SEMULA_RECORDING_MAX_MB): "
                         "not read further")
        if sse and has_response(frames.feed(chunk)):
            break
    return bytes(body)
