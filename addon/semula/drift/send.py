"""The edge of `semula drift`: one recorded request sent again to the live provider, with httpx.

The request is the recording's: method, host, endpoint, query, the headers that select behaviour
(`anthropic-version`, beta flags) and the JSON body. The key is the caller's, read from the
environment as the provider's SDK reads it; it goes in the request and nowhere else.

Where a request goes is never the file's to say: a recordings folder comes from pull requests. The
host is one the adapter registry lists for the recording's provider (the validator refused any other),
the endpoint a plain path (ditto), and the URL is checked again here, at the edge, before a key is
added. A generic recording (a host the user added to the proxy) is sent only to a host the user names
again (`--allow-host`), with no key. `base_url` (tests, a gateway) is the user's own choice and
replaces the scheme and host.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx

from semula.providers import GENERIC, NotResendable, auth_for, is_provider_host
from semula.providers.mcp import NAME as MCP_NAME
from semula.providers.base import bare_host
from semula.providers.rawbody import DESCRIPTOR_KEY
from semula.recordings.format import Recording
from semula.recordings.validate import endpoint_problem

PLACEHOLDER_WORDS = ("test", "fake", "dummy", "placeholder", "changeme", "xxxx", "your")


class NoKey(Exception):
    """No usable key in the environment for this provider: the message names the variables."""


def auth_header(provider: str, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The (header, value) carrying the key, as the provider's adapter declares it (`Adapter.auth`);
    NoKey when none is set or it is a placeholder."""
    auth = auth_for(provider)
    if isinstance(auth, NotResendable):
        raise NoKey(f"{provider} requests are {auth.why}: drift does not re-send them")
    placeholders = []
    for name in auth.env:
        value = environ.get(name, "").strip()
        if value and not any(word in value.lower() for word in PLACEHOLDER_WORDS):
            return auth.header, auth.template.format(value)
        if value:
            placeholders.append(f"${name}")
    if placeholders:  # named, never shown: even a placeholder may be half a real key
        raise NoKey(f"{' and '.join(placeholders)} {'is' if len(placeholders) == 1 else 'are'} set but "
                    f"look{'s' if len(placeholders) == 1 else ''} like a placeholder (a word such as "
                    f"{', '.join(PLACEHOLDER_WORDS[:3])} in it), not a real {provider} key")
    raise NoKey(f"no real key in ${' or $'.join(auth.env)} (drift calls the live {provider} API)")


def key_problem(provider: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Why this provider's key cannot be used (unset, a placeholder), or None when it can."""
    try:
        auth_header(provider, environ)
    except NoKey as e:
        return str(e)
    return None


def has_key(provider: str, environ: Mapping[str, str] = os.environ) -> bool:
    return key_problem(provider, environ) is None


class NotSent(ValueError):
    """Drift may not send this recording where it says it went: the message says why."""


@dataclass(frozen=True)
class Target:
    origin: str  # https://host, from the registry's hosts or the user's --allow-host
    keyed: bool  # whether the provider's key goes with it


def target_of(recording: Recording, allow_hosts: frozenset[str] = frozenset()) -> Target:
    """Where a recording is re-sent, or NotSent. The loader's validator already refused other hosts
    and endpoints; this is checked again at the edge where the key is added."""
    if (bad := endpoint_problem(recording.endpoint)) is not None:
        raise NotSent(f"endpoint {recording.endpoint!r:.60} {bad}: not sent")
    if recording.provider == MCP_NAME:  # sent in a session of its own, to a registered server (drift/mcpsend.py)
        raise NotSent("an MCP call is sent only to a server named with --mcp-server, in a session: not sent here")
    host = bare_host(recording.host)  # a port or a trailing dot makes it differ: refused below
    if recording.provider != GENERIC.name:
        if recording.host.lower() != host or not is_provider_host(recording.provider, host):
            raise NotSent(f"host {recording.host!r:.60} is not one of {recording.provider}'s hosts: not sent")
        return Target(f"https://{host}", keyed=True)
    named = recording.host.lower()
    if named not in allow_hosts:
        raise NotSent(f"{named} is not a provider's host: not sent (name it with --allow-host {named} to send "
                      "this recording, with no API key)")
    return Target(f"https://{named}", keyed=False)


def allowed(values: Iterable[str]) -> frozenset[str]:
    """`--allow-host` values as `target_of` compares them: lower case, no trailing dot."""
    return frozenset(v.strip().lower().rstrip(".") for v in values if v.strip())


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


def send(client: httpx.Client, recording: Recording, target: Target, auth: tuple[str, str] | None,
         base_url: str | None, extra_headers: list[tuple[str, str]]) -> Live:
    method, endpoint, query, headers, data = request_of(recording)
    origin = base_url.rstrip("/") if base_url else target.origin
    url = httpx.URL(origin + endpoint)
    if url.host != httpx.URL(origin).host or url.port != httpx.URL(origin).port or url.userinfo:
        raise NotSent(f"{origin + endpoint!r:.80} does not stay on {origin}: not sent")
    started = time.perf_counter()
    response = client.request(method, url, params=tuple(query), content=data,
                              headers=[*headers, *([auth] if auth else []), *extra_headers])
    body = response.content
    return Live(response.status_code, list(response.headers.multi_items()), body,
                (time.perf_counter() - started) * 1000)
