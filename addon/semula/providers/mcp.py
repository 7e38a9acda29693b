"""MCP servers over Streamable HTTP: which requests are MCP calls, and their key.

An MCP server lives on whatever host its user runs it, so its hosts are not in this registry: the
user names them (`semula_mcp_servers`, `--mcp-server`) and a request there is MCP when its body has
the JSON-RPC shape. A call is keyed by the server (its host and path), the JSON-RPC method and the
params in canonical form, never by what belongs to one connection: the JSON-RPC `id`, the
`Mcp-Session-Id` header, the params' `_meta` (progress tokens, the client's identity) or, for
`initialize`, the client's name and version. Notifications and the client's answers to server
requests are not calls: they are answered as a server would (202), never recorded or missed.

Pure: bytes and strings in, values out. The proxy's side (local answers, ids rewritten in replay)
is `proxy/call/mcp.py`; the answer bodies' framing is `providers/mcpwire.py`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from semula.core.request.canonical import CanonicalRequest, Message
from semula.core.request.params import ParamRules
from semula.providers.auth import Auth, KeyAuth
from semula.providers.base import Adapter, BodyShapeError, RawRequest, bare_host, host_matches

__all__ = ["MCP", "McpAdapter", "McpServer", "call_label", "mcp_server_for", "message_kind", "parse_servers",
           "server_hosts", "tool_of"]

NAME = "mcp"
# Methods whose params name what they act on: the call log and the miss message show it.
_TARGET_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                 "resources/subscribe": "uri", "resources/unsubscribe": "uri"}
# Methods whose `arguments` can be near-matched (reviewed, never served: `param_rules.near_review_only`).
_WITH_ARGUMENTS = ("tools/call", "prompts/get")
# initialize's params that identify the client, not what it asks for (an SDK upgrade is not a new server answer).
_CLIENT_IDENTITY = ("clientInfo",)
_SERVER = re.compile(r"^(?P<host>\*\.[A-Za-z0-9.-]+|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
                     r"(?::(?P<port>\d{1,5}))?(?P<path>/[^\s?#]*)?$")


@dataclass(frozen=True)
class McpServer:
    """One MCP server the user named: a host (exact or `*.suffix`), maybe a port, maybe the endpoint's path."""

    host: str
    port: int | None = None
    path: str | None = None

    def matches(self, host: str, port: int | None, path: str) -> bool:
        if not host_matches(host, (self.host,)):
            return False
        if self.port is not None and port != self.port:
            return False
        return self.path is None or path.rstrip("/") == self.path.rstrip("/")

    def __str__(self) -> str:
        return f"{self.host}{f':{self.port}' if self.port else ''}{self.path or ''}"


def parse_server(text: str) -> McpServer:
    """`host`, `host:port`, `host/path` or `https://host:port/path`; ValueError naming what is wrong."""
    spec = text.strip()
    for scheme in ("https://", "http://"):
        if spec.lower().startswith(scheme):
            spec = spec[len(scheme):]
    found = _SERVER.match(spec)
    if found is None:
        raise ValueError(f"semula_mcp_servers: {text!r:.80} is not host, host:port or host:port/path")
    port = int(found["port"]) if found["port"] else None
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"semula_mcp_servers: {text!r:.80} has no valid port")
    return McpServer(bare_host(found["host"]) if not found["host"].startswith("*.") else found["host"].lower(),
                     port, found["path"] or None)


@lru_cache(maxsize=64)
def parse_servers(entries: tuple[str, ...]) -> tuple[McpServer, ...]:
    return tuple(parse_server(e) for e in entries)


def server_hosts(entries: tuple[str, ...]) -> tuple[str, ...]:
    """The host patterns of the named servers: the proxy intercepts them."""
    return tuple(dict.fromkeys(s.host for s in parse_servers(entries)))


def mcp_server_for(entries: tuple[str, ...], host: str, port: int | None, path: str) -> McpServer | None:
    """The named server this request goes to, else None."""
    if not entries:
        return None
    return next((s for s in parse_servers(entries) if s.matches(host, port, path)), None)


def message_kind(value: Any) -> str | None:
    """"request", "notification" or "response" for a JSON-RPC 2.0 message, else None (not MCP)."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        return None
    has_id = isinstance(value.get("id"), (str, int)) and not isinstance(value.get("id"), bool)
    if isinstance(value.get("method"), str):
        return "request" if has_id else "notification" if "id" not in value else None
    if has_id and ("result" in value or "error" in value):
        return "response"
    return None


def call_key(host: str, message: dict[str, Any]) -> dict[str, Any]:
    """What a request is matched by: the server, the method and the params without per-connection values."""
    method = message["method"]
    params = message.get("params")
    if isinstance(params, dict):
        params = {k: v for k, v in params.items() if k != "_meta"}
        if method == "initialize":
            params = {k: v for k, v in params.items() if k not in _CLIENT_IDENTITY}
    return {"server": bare_host(host), "method": method, "params": params}


def target_of(method: str, params: Any) -> str | None:
    """The tool, prompt or resource a call names (for logs and messages), else None."""
    key = _TARGET_PARAM.get(method)
    value = params.get(key) if key and isinstance(params, dict) else None
    return value if isinstance(value, str) else None


def _method_and_target(key: Any) -> tuple[str | None, str | None]:
    """The method and target of a call's key (`call_key`, a canonical request's body), else (None, None)."""
    method = key.get("method") if isinstance(key, dict) else None
    if not isinstance(method, str):
        return None, None
    return method, target_of(method, key.get("params"))


def call_label(key: Any) -> str | None:
    """How a call is named to a person (the console, a miss): `tools/call 'add'`, `tools/list`; None if no call."""
    method, target = _method_and_target(key)
    return f"{method} {target!r}" if method and target else method


def tool_of(key: Any) -> str | None:
    """The tool a `tools/call` key names, else None (the call log's `mcp_tool`)."""
    method, target = _method_and_target(key)
    return target if method == "tools/call" else None


class McpAdapter(Adapter):
    """Reads the MCP requests of the servers a user named (`semula_mcp_servers`); no host of its own."""

    name = NAME
    intercepted_by_default = False
    param_rules = ParamRules(near_review_only="a tool call with other arguments is another call: "
                                              "near matches are queued for review, never served")

    def handles(self, host: str, path: str) -> bool:
        return False  # chosen by the proxy for a named server's JSON-RPC, never by host

    def auth(self) -> Auth:
        # A server's own token, when it takes one: `semula drift` sends it only to the servers the user
        # registered for that run (`drift/mcpsend.py`); a local server often takes none, then none is sent.
        return KeyAuth(("SEMULA_MCP_TOKEN",))

    def key_variables(self) -> tuple[str, ...]:
        return ()  # drift's own variable, which no MCP client reads: a replay needs no placeholder for it

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        if message_kind(body) != "request":
            raise BodyShapeError("not a JSON-RPC request")
        key = call_key(raw.host, body)
        method, params = key["method"], key["params"]
        target = target_of(method, params)
        model = f"{method} {target}" if target else method
        arguments = params.get("arguments", {}) if isinstance(params, dict) else None
        if method in _WITH_ARGUMENTS and target and isinstance(arguments, dict):
            # Understood: its arguments are the text the normalised key and the near tiers compare (canonical
            # JSON: strings exact, ids and timestamps scrubbed). The server is in the model, so no near match
            # crosses servers; the exact key is the body, as for every MCP call.
            rest = {k: v for k, v in params.items() if k not in ("name", "arguments")}
            text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
            return CanonicalRequest(
                **self.common(raw), model=f"{model} on {key['server']}", system=None,
                messages=(Message("user", text),), tools=(), params=rest, stream=False, body=key,
            )
        return CanonicalRequest(
            **self.common(raw), model=model,
            system=None, messages=(), tools=(), params={}, stream=False, body=key, parsed=False,
        )

    def stream_complete(self, frames: list[bytes]) -> bool:
        from semula.providers.mcpwire import has_response

        return has_response(frames)


MCP: McpAdapter = McpAdapter()
