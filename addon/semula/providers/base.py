"""The adapter port: what semula needs to know about one provider's format.

An adapter turns a provider's request into a :class:`CanonicalRequest`,
recognises the end of its streams, reads token usage, and writes an error in
the provider's own shape (so SDKs raise their usual exception on a replay
miss). Adding a provider means adding one adapter module and registering it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from semula.core.request.canonical import NEVER_MATTERS, CanonicalRequest
from semula.core.redact import FingerprintKey, clean_query, redact_json
from semula.providers.sidepaths import SidePath
from semula.providers.rawbody import describe, is_raw_body
from semula.providers.sse import SSEEvent, parse_frame

__all__ = [
    "Adapter",
    "AdapterError",
    "BodyShapeError",
    "RawRequest",
    "Usage",
    "as_int",
    "bare_host",
    "event_json",
    "frame_events",
    "host_matches",
    "load_json_object",
    "require_list",
]


@dataclass(frozen=True)
class RawRequest:
    """A request as the proxy saw it, body already content-decoded."""

    method: str
    host: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class AdapterError(ValueError):
    """The request body cannot be canonicalised; the message says why."""


class BodyShapeError(Exception):
    """A JSON object that does not have the shape the endpoint expects.

    Adapters raise it while reading; :meth:`Adapter.canonicalise` then keeps
    the body for the exact tier only (``parsed=False``)."""


def bare_host(host: str) -> str:
    """Lowercase, without port, brackets or a trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8080
        return host[1 : host.find("]")] if "]" in host else host[1:]
    name, sep, port = host.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        host = name
    return host.rstrip(".")


def host_matches(host: str, patterns: Iterable[str]) -> bool:
    """Exact, ``*.suffix`` or ``*-suffix`` match.

    ``*.x.com`` needs at least one label before ``.x.com``; ``*-aiplatform.googleapis.com`` needs
    exactly one label's head before ``-aiplatform`` (``us-central1-aiplatform.googleapis.com``), so
    ``a.b-aiplatform.googleapis.com`` and ``x-aiplatform.googleapis.com.evil.net`` never match."""
    host = bare_host(host)
    for pattern in patterns:
        pattern = pattern.strip().lower().rstrip(".")
        if pattern.startswith(("*.", "*-")):
            suffix = pattern[1:]  # ".openai.azure.com", "-aiplatform.googleapis.com"
            head = host[: -len(suffix)]
            if host.endswith(suffix) and head and (pattern[1] == "." or "." not in head):
                return True
        elif host == pattern:
            return True
    return False


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# json.loads decodes bytes with "surrogatepass": a surrogate encoded in UTF-8 (ED A0..BF xx) is let through.
_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")


def _may_hold_surrogates(body: bytes) -> bool:
    """Cheap hints that the parsed value may hold a surrogate (which is not text and cannot be hashed)."""
    head = body[:4]
    utf16_or_32 = b"\x00" in head or head[:2] in (b"\xff\xfe", b"\xfe\xff")
    return utf16_or_32 or bool(_SURROGATE_ESCAPE.search(body)) or bool(_ENCODED_SURROGATE.search(body))


# Deeper than this is not matched: normalising walks the value recursively, and a body nested just under
# the interpreter's limit parsed fine but broke the fingerprint later (a RecursionError, an internal error).
MAX_DEPTH = 200


def nesting_depth(value: Any) -> int:
    """How deep lists and objects nest in a parsed JSON value (iterative: any depth is safe)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def load_json_object(body: bytes) -> dict[str, Any]:
    """Parse a request body that must be a JSON object, or say why not."""
    if not body or not body.strip():
        raise AdapterError("body is empty")
    try:
        value = json.loads(body)
    except RecursionError:
        raise AdapterError("body is nested too deeply to match") from None
    except UnicodeDecodeError as e:
        raise AdapterError(f"body is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except json.JSONDecodeError as e:
        raise AdapterError(f"body is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:
        raise AdapterError(f"body is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise AdapterError(f"body is a JSON {type(value).__name__ if value is not None else 'null'}, not an object")
    if nesting_depth(value) > MAX_DEPTH:
        raise AdapterError(f"body is nested too deeply to match (over {MAX_DEPTH} levels)")
    if _may_hold_surrogates(body):  # usually an escaped emoji (a pair); a lone half is not text
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise AdapterError("body holds a lone surrogate escape (like \\ud800), which is not text") from None
        except RecursionError:
            raise AdapterError("body is nested too deeply to match") from None
    return value


def as_int(value: Any) -> int | None:
    """An integer token count, or None for anything else (bools included)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def frame_events(frames: Iterable[bytes]) -> list[SSEEvent]:
    return [parse_frame(f) for f in frames]


def event_json(event: SSEEvent) -> Any:
    """The event's data parsed as JSON, or None."""
    if not event.data or event.data == "[DONE]":
        return None
    try:
        return json.loads(event.data)
    except ValueError:
        return None


def require_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyShapeError(f"{what} is not a list")
    return value


class Adapter:
    """Base adapter. Subclasses set ``name`` and implement ``_read``."""

    name: str = "generic"
    behaviour_headers: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    # Calls to these hosts that are not model calls (trace uploads): never recorded, answered locally
    # in replay (providers/sidepaths.py).
    side_paths: tuple[SidePath, ...] = ()
    # False: the hosts serve other APIs too, so they are read only when a project intercepts them.
    intercepted_by_default: bool = True

    def handles(self, host: str, path: str) -> bool:
        return host_matches(host, self.hosts) and self._handles_path(path)

    def _handles_path(self, path: str) -> bool:
        return True

    # ---------------------------------------------------------------- requests

    def canonicalise(self, raw: RawRequest, key: FingerprintKey) -> CanonicalRequest:
        """The canonical request; each secret in the body becomes a placeholder keyed by ``key``.

        A body that is not JSON (an upload) is kept for the exact tier as a descriptor of its bytes."""
        if is_raw_body(raw.body, raw.headers):
            described = describe(raw.body, raw.headers, key)
            return replace(self.unparsed(raw, described.descriptor), model=described.model, stream=described.stream)
        data = load_json_object(raw.body)
        try:
            body = redact_json({k: v for k, v in data.items() if k not in NEVER_MATTERS}, key)
            try:
                return self._read(raw, body)
            except BodyShapeError:
                return self.unparsed(raw, body)
        except RecursionError:
            raise AdapterError("body is nested too deeply to match") from None

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        raise BodyShapeError("no reader")

    def common(self, raw: RawRequest) -> dict[str, Any]:
        """Fields every adapter fills the same way."""
        return {
            "provider": self.name,
            "method": raw.method.upper(),
            "endpoint": raw.path,
            "query": tuple(sorted(clean_query(raw.query))),
            "headers": self._headers(raw.headers),
        }

    def _headers(self, headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        lowered = {k.lower(): v for k, v in headers.items()}
        out = []
        for name in self.behaviour_headers:
            if name in lowered:
                # Beta flags are a set: "a,b" and "b, a" ask for the same thing.
                tokens = sorted(t.strip() for t in lowered[name].split(",") if t.strip())
                out.append((name, ",".join(tokens)))
        return tuple(sorted(out))

    def unparsed(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        """Keep a body no reader understood for the exact tier only."""
        model = body.get("model")
        return CanonicalRequest(
            **self.common(raw),
            model=model if isinstance(model, str) else None,
            system=None,
            messages=(),
            tools=(),
            params={},
            stream=self.streams(raw, body),
            body=body,
            parsed=False,
        )

    def streams(self, raw: RawRequest, body: Mapping[str, Any]) -> bool:
        """Whether the client asked for a streamed answer."""
        return body.get("stream") is True

    @staticmethod
    def params_of(body: Mapping[str, Any], consumed: Iterable[str]) -> dict[str, Any]:
        skip = set(consumed) | {"stream"}
        return {k: v for k, v in body.items() if k not in skip}

    # ---------------------------------------------------------------- responses

    def stream_complete(self, frames: list[bytes]) -> bool:
        return False

    def usage_from_body(self, body: bytes) -> Usage:
        return Usage()

    def usage_from_frames(self, frames: list[bytes]) -> Usage:
        return Usage()

    def error_headers(self, status: int) -> dict[str, str]:
        """The headers of the provider's error answers (Bedrock names the error in one)."""
        return {"content-type": "application/json"}

    def error_body(self, status: int, message: str, code: str = "semula_no_recording") -> bytes:
        """OpenAI's error shape, which most OpenAI-compatible clients parse."""
        return json.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
        ).encode()
