"""The edge of `semula drift`: one recorded request sent again to the live provider, with httpx.

The request is the recording's: method, host, endpoint, query, the headers that select behaviour
(`anthropic-version`, beta flags) and the JSON body. The key is the caller's, read from the
environment as the provider's SDK reads it; it goes in the request and nowhere else.
`base_url` (tests, a gateway) replaces the scheme and host.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from semula.providers.rawbody import DESCRIPTOR_KEY
from semula.recordings.format import Recording

# provider -> (environment variables, in the order the SDK tries them; header; value template)
KEYS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "openai": (("OPENAI_API_KEY",), "authorization", "Bearer {}"),
    "anthropic": (("ANTHROPIC_API_KEY",), "x-api-key", "{}"),
    "anthropic-openai": (("ANTHROPIC_API_KEY",), "authorization", "Bearer {}"),
    "gemini": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), "x-goog-api-key", "{}"),
    "gemini-openai": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), "authorization", "Bearer {}"),
    "azure": (("AZURE_OPENAI_API_KEY",), "api-key", "{}"),
}
UNSUPPORTED = {"bedrock": "AWS-signed", "vertex-gemini": "Google-OAuth", "vertex-anthropic": "Google-OAuth",
               "google-oauth": "an OAuth exchange", "generic": "not a provider call"}
PLACEHOLDER_WORDS = ("test", "fake", "dummy", "placeholder", "changeme", "xxxx", "your")


class NoKey(Exception):
    """No usable key in the environment for this provider: the message names the variables."""


def key_env(provider: str) -> tuple[tuple[str, ...], str, str]:
    if provider in KEYS:
        return KEYS[provider]
    return ((f"{provider.upper().replace('-', '_')}_API_KEY",), "authorization", "Bearer {}")


def auth_header(provider: str, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The (header, value) carrying the key; NoKey when none is set or it is a placeholder."""
    if provider in UNSUPPORTED:
        raise NoKey(f"{provider} requests are {UNSUPPORTED[provider]}: drift does not re-send them")
    names, header, template = key_env(provider)
    for name in names:
        value = environ.get(name, "").strip()
        if value and not any(word in value.lower() for word in PLACEHOLDER_WORDS):
            return header, template.format(value)
    raise NoKey(f"no real key in ${' or $'.join(names)} (drift calls the live {provider} API)")


def has_key(provider: str, environ: Mapping[str, str] = os.environ) -> bool:
    try:
        auth_header(provider, environ)
    except NoKey:
        return False
    return True


@dataclass(frozen=True)
class Live:
    status: int
    headers: list[tuple[str, str]]
    body: bytes  # content-decoded
    upstream_ms: float


def request_of(recording: Recording) -> tuple[str, str, list[tuple[str, str]], list[tuple[str, str]], bytes | None]:
    """(method, endpoint, query, headers, body) of a recording, or ValueError when it cannot be re-sent."""
    request = recording.request
    body = request.get("body")
    if isinstance(body, dict) and DESCRIPTOR_KEY in body:
        raise ValueError("an upload (its bytes are not in the recording): not re-sent")
    query = [(str(k), str(v)) for k, v in request.get("query") or []]
    headers = [(str(k), str(v)) for k, v in request.get("headers") or []]
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    if data is not None:
        headers.append(("content-type", "application/json"))
    return recording.method, recording.endpoint, query, headers, data


def send(client: httpx.Client, recording: Recording, auth: tuple[str, str], base_url: str | None,
         extra_headers: list[tuple[str, str]]) -> Live:
    method, endpoint, query, headers, data = request_of(recording)
    url = (base_url.rstrip("/") if base_url else f"https://{recording.host}") + endpoint
    started = time.perf_counter()
    response = client.request(method, url, params=query, content=data,
                              headers=[*headers, auth, *extra_headers])
    body = response.content
    return Live(response.status_code, list(response.headers.multi_items()), body,
                (time.perf_counter() - started) * 1000)
