"""The one validator of a recording file's content, shared by the loader and `semula recordings check`.

A recordings folder arrives from pull requests, so every field of a file is untrusted: it may
name a path, a header or a number the proxy later acts on. This module says, for a parsed
document, whether each field has the type and range a recording can have, and names the first
field that does not ("response.status 99999 is not 100-599"). Nothing that fails here reaches the
store, a path or a client. Pure: a JSON value in, a problem (or None) out.

`host` and `endpoint` are where `semula drift` sends the user's key, so they are held to what the
proxy itself can write: a provider's recording names one of that provider's registered hosts (no port),
and an endpoint is a plain path that cannot move the request's authority (`//x`, `@x`, `\\`).
Recordings of the generic provider are of hosts a user added to the proxy; any host name passes
here, and drift sends them nowhere unless the user names the host again (`--allow-host`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from semula.core.httpfields import header_problem
from semula.core.settings import PROJECT_NAME
from semula.providers import GENERIC, is_provider_host, provider_hosts
from semula.providers.mcp import MCP
from semula.recordings.sidecars import reference_problem

MAX_DEPTH = 128  # nesting of the whole document; a real request's JSON schemas stay far below this
MAX_COUNT = 10**12  # token counts
MAX_MS = 10**9  # upstream_ms: eleven days
MAX_OCCURRENCE = 10**6
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$")
_METHOD = re.compile(r"^[A-Z]{1,16}$")
BODY_FIELDS = ("body_json", "body_sse", "body_eventstream", "body_text", "body_base64", "body_sidecar")
MAX_PROVENANCE_CHARS = 512
MAX_PROVENANCE_KEYS = 16
_PROVENANCE_KEY = re.compile(r"^[a-z][a-z0-9_]{0,31}$")  # user_agent, answered_model, semula, and later ones


class Invalid(ValueError):
    """One field's problem, named by its path in the document."""


def depth_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Whether `value` nests deeper than `limit` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return f"nested deeper than {limit} levels"
        stack.extend((child, depth + 1) for child in children)
    return None


def endpoint_problem(endpoint: Any) -> str | None:
    """Why `endpoint` is not a plain path that `https://<host>` + it keeps on that host, or None."""
    if not isinstance(endpoint, str):
        return "is not text"
    if not endpoint.startswith("/") or endpoint.startswith("//"):
        return "is not a path (one '/' first)"
    if "\\" in endpoint or any(ord(c) < 0x20 or ord(c) == 0x7F for c in endpoint):
        return "holds a backslash or a control character"
    parts = urlsplit(endpoint)
    if parts.scheme or parts.netloc or urlsplit(f"https://h.test{endpoint}").netloc != "h.test":
        return "would change the host it is sent to"
    return None


def host_problem(provider: str, host: Any) -> str | None:
    """Why a recording of `provider` cannot say it went to `host`, or None."""
    if not isinstance(host, str) or not _HOST.match(host):
        return "is not a host name"
    if provider == MCP.name:  # the proxy writes the bare host it intercepted (providers/mcp.py)
        return None if ":" not in host and not host.startswith("[") else "is not a bare host name (no port)"
    if provider == GENERIC.name or is_provider_host(provider, host):
        return None
    return f"is not one of {provider}'s hosts ({', '.join(provider_hosts(provider))})"


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any, where: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise Invalid(f"{where} {value!r:.60} is not text")


def _count(value: Any, where: str, high: int) -> None:
    if value is None:
        return
    if not _is_int(value) or not 0 <= value <= high:
        raise Invalid(f"{where} {value!r:.60} is not a whole number from 0 to {high}")


def _pairs(value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) for s in p) for p in value):
        raise Invalid(f"{where} is not a list of [name, value] text pairs")


def _request(request: Any, provider: str) -> None:
    if not isinstance(request, dict):
        raise Invalid("request is not an object")
    for key in ("method", "endpoint", "query", "headers", "messages", "tools", "params", "stream"):
        if key not in request:
            raise Invalid(f"request.{key} is missing")
    if request.get("provider") != provider:
        raise Invalid(f"request.provider {request.get('provider')!r:.60} is not the file's provider {provider!r}")
    _text(request["method"], "request.method")
    if (bad := endpoint_problem(request["endpoint"])) is not None:
        raise Invalid(f"request.endpoint {request['endpoint']!r:.60} {bad}")
    _text(request.get("model"), "request.model", optional=True)
    _text(request.get("system"), "request.system", optional=True)
    _text(request.get("instructions"), "request.instructions", optional=True)
    _pairs(request["query"], "request.query")
    _pairs(request["headers"], "request.headers")
    messages = request["messages"]
    if not isinstance(messages, list):
        raise Invalid("request.messages is not a list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise Invalid(f"request.messages[{i}] is not an object")
        _text(message.get("role"), f"request.messages[{i}].role")
        _text(message.get("text"), f"request.messages[{i}].text")
        if not isinstance(message.get("parts", []), list):
            raise Invalid(f"request.messages[{i}].parts is not a list")
    if not isinstance(request["tools"], list):
        raise Invalid("request.tools is not a list")
    if not isinstance(request["params"], dict):
        raise Invalid("request.params is not an object")
    for key in ("stream", "parsed"):
        if not isinstance(request.get(key, True), bool):
            raise Invalid(f"request.{key} {request[key]!r:.60} is not true or false")


def _response(response: Any) -> None:
    if not isinstance(response, dict):
        raise Invalid("response is not an object")
    status = response.get("status")
    if not _is_int(status) or not 100 <= status <= 599:
        raise Invalid(f"response.status {status!r:.60} is not a whole number from 100 to 599")
    headers = response.get("headers") or []
    if not isinstance(headers, list):
        raise Invalid("response.headers is not a list")
    for i, line in enumerate(headers):
        if not isinstance(line, str):
            raise Invalid(f"response.headers[{i}] is not text")
        name, sep, value = line.partition(": ")
        if not sep:
            raise Invalid(f"response.headers[{i}] {line!r:.60} is not 'name: value'")
        if (problem := header_problem(name, value)) is not None:
            raise Invalid(f"response.headers[{i}]: {problem}")
    bodies = [key for key in BODY_FIELDS if key in response]
    if len(bodies) != 1:
        raise Invalid(f"response has {len(bodies)} of {', '.join(BODY_FIELDS)} (one is needed)")
    body = response[bodies[0]]
    if bodies[0] == "body_sse":
        if not isinstance(body, list) or not all(isinstance(frame, str) for frame in body):
            raise Invalid("response.body_sse is not a list of text frames")
    elif bodies[0] == "body_eventstream":  # each message is checked as it is encoded (eventframes.py)
        if not isinstance(body, list) or not all(isinstance(message, dict) for message in body):
            raise Invalid("response.body_eventstream is not a list of message objects")
    elif bodies[0] == "body_sidecar":
        if (bad := reference_problem(body, "response.body_sidecar")) is not None:
            raise Invalid(bad)
    elif bodies[0] != "body_json":
        _text(body, f"response.{bodies[0]}")
    _text(response.get("body_layout"), "response.body_layout", optional=True)
    _text(response.get("answer_text"), "response.answer_text", optional=True)


def problem(data: Any, providers: frozenset[str]) -> str | None:
    """The first reason this parsed recording file cannot be loaded, or None.

    `providers`: the adapter registry's names; a file's provider is one of them, so the path
    built from it stays a plain folder name.
    """
    try:
        check(data, providers)
    except Invalid as e:
        return str(e)
    return None


def envelope(data: Any, providers: frozenset[str]) -> None:
    """Raise `Invalid` naming the first field of the envelope every kind of recording file has (where it
    went: project, provider, host, method, endpoint, model; when and how it was recorded) that it cannot have."""
    if not isinstance(data, dict):
        raise Invalid("a recording is a JSON object")
    if (deep := depth_problem(data)) is not None:
        raise Invalid(f"the document is {deep}")
    project, provider = data.get("project"), data.get("provider")
    if not isinstance(project, str) or not PROJECT_NAME.match(project):
        raise Invalid(f"project {project!r:.60} is not a project name (letters, digits, '.', '_', '-')")
    if not isinstance(provider, str) or provider not in providers:
        raise Invalid(f"provider {provider!r:.60} is not one of {', '.join(sorted(providers))}")
    host = data.get("host")
    if (bad := host_problem(provider, host)) is not None:
        raise Invalid(f"host {host!r:.60} {bad}")
    method = data.get("method")
    if not isinstance(method, str) or not _METHOD.match(method):
        raise Invalid(f"method {method!r:.60} is not an HTTP method")
    if (bad := endpoint_problem(data.get("endpoint"))) is not None:
        raise Invalid(f"endpoint {data.get('endpoint')!r:.60} {bad}")
    _text(data.get("model"), "model", optional=True)
    _text(data.get("recorded_at"), "recorded_at", optional=True)
    _provenance(data.get("provenance"))


def check(data: Any, providers: frozenset[str]) -> None:
    """Raise `Invalid` naming the first field of `data` that a recording cannot have."""
    envelope(data, providers)
    if not isinstance(data.get("streamed", False), bool):
        raise Invalid(f"streamed {data['streamed']!r:.60} is not true or false")
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise Invalid("usage is not an object")
    for key in ("prompt_tokens", "completion_tokens"):
        _count((usage or {}).get(key), f"usage.{key}", MAX_COUNT)
    upstream_ms = data.get("upstream_ms")
    if upstream_ms is not None and (
            isinstance(upstream_ms, bool) or not isinstance(upstream_ms, (int, float))
            or not math.isfinite(upstream_ms) or not 0 <= upstream_ms <= MAX_MS):
        raise Invalid(f"upstream_ms {upstream_ms!r:.60} is not a number of milliseconds from 0 to {MAX_MS}")
    occurrence = data.get("occurrence", 1)
    if not _is_int(occurrence) or not 1 <= occurrence <= MAX_OCCURRENCE:
        raise Invalid(f"occurrence {occurrence!r:.60} is not a whole number from 1 to {MAX_OCCURRENCE}")
    provider, host = data["provider"], data.get("host")
    _request(data.get("request"), provider)
    if provider == MCP.name and isinstance(host, str):  # host_problem passed: it is text
        _mcp_call(data["request"], host)
    _response(data.get("response"))


def _mcp_call(request: dict[str, Any], host: str) -> None:
    """An MCP recording's key names the server it went to: the file's own host, a JSON-RPC method."""
    body = request.get("body")
    if not isinstance(body, dict) or set(body) != {"server", "method", "params"}:
        raise Invalid("request.body of an MCP call is not {server, method, params}")
    if body["server"] != host.lower():
        raise Invalid(f"request.body.server {body['server']!r:.60} is not the file's host {host!r:.60}")
    if not isinstance(body["method"], str) or not body["method"] or len(body["method"]) > 200:
        raise Invalid(f"request.body.method {body['method']!r:.60} is not a JSON-RPC method name")
    if body["params"] is not None and not isinstance(body["params"], (dict, list)):
        raise Invalid("request.body.params is not an object, a list or null")


def _provenance(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or len(value) > MAX_PROVENANCE_KEYS or not all(
            isinstance(k, str) and _PROVENANCE_KEY.match(k) for k in value):
        raise Invalid(f"provenance is not an object of at most {MAX_PROVENANCE_KEYS} lower-case names and texts")
    for key, text in value.items():
        _text(text, f"provenance.{key}", optional=True)
        if text is not None and (len(text) > MAX_PROVENANCE_CHARS or any(c in text for c in "\r\n\x00")):
            raise Invalid(f"provenance.{key} is over {MAX_PROVENANCE_CHARS} characters or holds CR, LF or NUL")
