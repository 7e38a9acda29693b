"""The provider registry: which adapter reads a request to which host and path.

Hosts are matched exactly or by a ``*.`` (or ``*-``) wildcard, never by
substring, so a look-alike host such as ``api.openai.com.evil.net`` is neither
intercepted nor read as OpenAI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from semula.providers.anthropic import AnthropicAdapter
from semula.providers.base import (
    Adapter,
    AdapterError,
    RawRequest,
    Usage,
    bare_host,
    host_matches,
)
from semula.providers.bedrock import BedrockAdapter
from semula.providers.framing import stream_frames, stream_framer
from semula.providers.gemini import GeminiAdapter
from semula.providers.generic import GenericAdapter
from semula.providers.googleauth import GoogleOAuthAdapter, GoogleTokenPathsAdapter
from semula.providers.openai import (
    COMPATIBLE_HOSTS,
    COMPATIBLE_PATHS,
    AzureOpenAIAdapter,
    OpenAIAdapter,
    OpenAIPathAdapter,
)
from semula.providers.sidepaths import SideCall, SidePath, side_call
from semula.providers.vertex import VertexAnthropicAdapter, vertex_gemini

__all__ = [
    "ADAPTERS",
    "DEFAULT_PROVIDER_HOSTS",
    "GENERIC",
    "PROVIDER_NAMES",
    "Adapter",
    "AdapterError",
    "RawRequest",
    "SideCall",
    "SidePath",
    "Usage",
    "adapter_for",
    "allow_hosts_regexes",
    "host_matches",
    "is_provider_host",
    "provider_hosts",
    "side_call_for",
    "stream_frames",
    "stream_framer",
]

ADAPTERS: tuple[Adapter, ...] = (
    OpenAIAdapter(),
    # Before the native adapters of their hosts: these paths are OpenAI's format, the rest is native.
    *(OpenAIPathAdapter(name, host, path) for name, (host, path) in COMPATIBLE_PATHS.items()),
    AnthropicAdapter(),
    GeminiAdapter(),
    AzureOpenAIAdapter(),
    BedrockAdapter(),
    vertex_gemini(),  # Vertex AI: Gemini and Claude share the hosts, the path tells them apart
    VertexAnthropicAdapter(),
    GoogleOAuthAdapter(),  # token exchanges: side calls only (providers/googleauth.py)
    GoogleTokenPathsAdapter(),
    *(OpenAIAdapter(name, hosts, side_paths=()) for name, hosts in COMPATIBLE_HOSTS.items()),
)
# What is intercepted by default: every host an adapter understands, in adapter order.
DEFAULT_PROVIDER_HOSTS: tuple[str, ...] = tuple(dict.fromkeys(h for a in ADAPTERS if a.intercepted_by_default
                                                            for h in a.hosts))
GENERIC: Adapter = GenericAdapter()
# The names a recording's provider can take: a recording file naming another is refused.
PROVIDER_NAMES: frozenset[str] = frozenset(a.name for a in (*ADAPTERS, GENERIC))


def adapter_for(host: str, path: str) -> Adapter:
    """The adapter for this host and path, else the generic one."""
    host = bare_host(host)
    for adapter in ADAPTERS:
        if adapter.handles(host, path):
            return adapter
    return GENERIC


def is_provider_host(provider: str, host: str) -> bool:
    """Whether `host` (a bare name, no port) is one of `provider`'s own hosts in the registry. The generic
    provider owns none: its recordings are of the hosts a user added, which only the user can vouch for."""
    return ":" not in host and any(a.name == provider and a.serves_host(host) for a in ADAPTERS)


def provider_hosts(provider: str) -> tuple[str, ...]:
    """The host patterns registered for `provider`, for messages."""
    return tuple(dict.fromkeys(h for a in ADAPTERS if a.name == provider for h in a.hosts))


def side_call_for(host: str, path: str, project_paths: Sequence[SidePath] = ()) -> SideCall | None:
    """The side call (a trace upload, not a model call) this request is, else None: the side paths
    of the adapters for this host, then the project's own (`semula_side_paths`) on any host."""
    host = bare_host(host)
    for adapter in ADAPTERS:
        if adapter.side_paths and host_matches(host, adapter.hosts):
            if found := side_call(adapter.name, adapter.side_paths, (), path):
                return found
    if project_paths:
        return side_call(adapter_for(host, path).name, (), project_paths, path)
    return None


def allow_hosts_regexes(patterns: Sequence[str]) -> list[str]:
    """Regexes for mitmproxy's ``allow_hosts``, which ``re.search``es "host:port".

    Each is anchored at both ends so that ``api.openai.com.evil.net`` and
    ``evilapi.openai.com`` do not match; any port is allowed.
    """
    regexes = []
    for pattern in patterns:
        pattern = pattern.strip().lower().rstrip(".")
        if pattern.startswith("*."):
            head = r"(?:[^.:/\s]+\.)+"
            pattern = pattern[2:]
        elif pattern.startswith("*-"):  # one label's head: us-central1-aiplatform.googleapis.com
            head = r"[^.:/\s]+"
            pattern = pattern[1:]
        else:
            head = ""
        regexes.append(rf"^{head}{re.escape(pattern)}\.?(?::\d+)?$")
    return regexes
