"""The adapter port: what semula needs to know about one provider's format.

An adapter turns a provider's request into a :class:`CanonicalRequest`,
recognises the end of its streams, reads token usage, and writes an error in
the provider's own shape (so SDKs raise their usual exception on a replay
miss). It also declares what the rest of semula may know of the provider: its
parameter rules (`param_rules`, which core receives as data through the registry's
table), how its key is sent (`auth`) and how its answers are redacted when their
format hides text from the byte redaction (`redact_answer`). Adding a provider
means adding one adapter module and registering it (`providers/__init__.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from semula.core.request.canonical import NEVER_MATTERS, CanonicalRequest
from semula.core.request.params import NO_PARAM_RULES, ParamRules
from semula.core.redact import FingerprintKey, clean_query, redact_json, redact_query
from semula.providers.auth import Auth, KeyAuth, bearer_key
from semula.providers.jsonbody import AdapterError, BodyShapeError, NotJsonError, load_json_object
from semula.providers.sidepaths import SidePath
from semula.providers.rawbody import declares_json, describe, is_raw_body

__all__ = ["Adapter", "AdapterError", "BodyShapeError", "RawRequest", "Usage", "bare_host", "host_matches"]


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
    # Documented parameter defaults and spellings (core.request.params); none: every parameter counts.
    param_rules: ParamRules = NO_PARAM_RULES

    def auth(self) -> Auth:
        """How `semula drift` sends the caller's key: by default `Bearer $<NAME>_API_KEY`."""
        return bearer_key(self.name)

    def key_variables(self) -> tuple[str, ...]:
        """Every variable this provider's clients read a credential from, the one a replay placeholder key
        sets first (`session/clientenv`): by default the key drift sends; none for signed or exchanged calls."""
        auth = self.auth()
        return auth.env if isinstance(auth, KeyAuth) else ()

    def handles(self, host: str, path: str) -> bool:
        return self.serves_host(host) and self._handles_path(path)

    def serves_host(self, host: str) -> bool:
        """Whether `host` is one of this provider's own: where a recording of it may say it went, and
        the only place `semula drift` sends its key."""
        return host_matches(host, self.hosts)

    def _handles_path(self, path: str) -> bool:
        return True

    # ---------------------------------------------------------------- requests

    def canonicalise(self, raw: RawRequest, key: FingerprintKey) -> CanonicalRequest:
        """The canonical request; each secret in the body becomes a placeholder keyed by ``key``.

        A body that is not JSON (an upload, or text labelled `application/json`) is kept for the exact
        tier as a descriptor of its bytes."""
        raw = replace(raw, query=tuple(redact_query(raw.query, key)))  # a secret in ?q=, as in the body
        if is_raw_body(raw.body, raw.headers):
            return self._described(raw, key)
        try:
            data = load_json_object(raw.body)
        except NotJsonError:
            if declares_json(raw.headers):  # the label was wrong: matched by its bytes like any upload
                return self._described(raw, key)
            raise
        try:
            body = redact_json({k: v for k, v in data.items() if k not in NEVER_MATTERS}, key)
            try:
                return self._read(raw, body)
            except BodyShapeError:
                return self.unparsed(raw, body)
        except RecursionError:
            raise AdapterError("body is nested too deeply to match") from None

    def _described(self, raw: RawRequest, key: FingerprintKey) -> CanonicalRequest:
        described = describe(raw.body, raw.headers, key)
        return replace(self.unparsed(raw, described.descriptor), model=described.model, stream=described.stream)

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

    def redact_answer(self, body: bytes, redact: Callable[[bytes], bytes]) -> bytes | None:
        """The answer with `redact` applied inside a format that hides text from it (its own sniff on
        `body`), else None: the answer is redacted as bytes."""
        return None

    def error_headers(self, status: int) -> dict[str, str]:
        """The headers of the provider's error answers (Bedrock names the error in one)."""
        return {"content-type": "application/json"}

    def error_body(self, status: int, message: str, code: str = "semula_no_recording") -> bytes:
        """OpenAI's error shape, which most OpenAI-compatible clients parse."""
        return json.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
        ).encode()
