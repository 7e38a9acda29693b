"""The provider registry: which adapter reads a request to which host and path.

Hosts are matched exactly or by a ``*.`` (or ``*-``) wildcard, never by
substring, so a look-alike host such as ``api.openai.com.evil.net`` is neither
intercepted nor read as OpenAI.

Everything else semula knows of a provider is read from this static registry too: the parameter
rules core receives as data (`PARAM_RULES`, bound by `semula/__init__.py`), the key `semula drift`
sends (`auth_for`) and the answer formats redacted inside (`redacted_answer`). Adding a provider is
one adapter module and its line in `ADAPTERS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from semula.core.request.params import ParamRules
from semula.providers.anthropic import AnthropicAdapter
from semula.providers.auth import Auth, KeyAuth, NotResendable, bearer_key
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
from semula.providers.mcp import MCP
from semula.providers.openai import (
    COMPATIBLE_HOSTS,
    COMPATIBLE_PATHS,
    AzureOpenAIAdapter,
    OpenAIAdapter,
    OpenAIPathAdapter,
    compatible,
)
from semula.providers.sidepaths import SideCall, SidePath, side_call
from semula.providers.vertex import VertexAnthropicAdapter, vertex_gemini

__all__ = [
    "ADAPTERS",
    "DEFAULT_PROVIDER_HOSTS",
    "GENERIC",
    "KEY_VARIABLE_GROUPS",
    "PARAM_RULES",
    "PROVIDER_NAMES",
    "Adapter",
    "AdapterError",
    "Auth",
    "KeyAuth",
    "NotResendable",
    "RawRequest",
    "SideCall",
    "SidePath",
    "Usage",
    "adapter_for",
    "allow_hosts_regexes",
    "auth_for",
    "first_host",
    "host_matches",
    "is_provider_host",
    "provider_hosts",
    "redacted_answer",
    "side_call_for",
    "stream_frames",
    "stream_framer",
]

# Order is the match rule: the first adapter that handles a host and path reads it.
ADAPTERS: tuple[Adapter, ...] = (
    OpenAIAdapter(),
    # Before the native adapters of their hosts: these paths are OpenAI's format, the rest is native.
    *(OpenAIPathAdapter(name, host, path, keys) for name, (host, path, keys) in COMPATIBLE_PATHS.items()),
    AnthropicAdapter(),
    GeminiAdapter(),
    AzureOpenAIAdapter(),
    BedrockAdapter(),
    vertex_gemini(),  # Vertex AI: Gemini and Claude share the hosts, the path tells them apart
    VertexAnthropicAdapter(),
    GoogleOAuthAdapter(),  # token exchanges: side calls only (providers/googleauth.py)
    GoogleTokenPathsAdapter(),
    *(compatible(name, hosts) for name, hosts in COMPATIBLE_HOSTS.items()),
    MCP,  # no host of its own: the proxy picks it for the MCP servers a user names (providers/mcp.py)
)
# What is intercepted by default: every host an adapter understands, in adapter order.
DEFAULT_PROVIDER_HOSTS: tuple[str, ...] = tuple(dict.fromkeys(h for a in ADAPTERS if a.intercepted_by_default
                                                            for h in a.hosts))
GENERIC: Adapter = GenericAdapter()
# The names a recording's provider can take: a recording file naming another is refused.
PROVIDER_NAMES: frozenset[str] = frozenset(a.name for a in (*ADAPTERS, GENERIC))


def _by_name(declared: Callable[[Adapter], Any]) -> Mapping[str, Any]:
    """provider name -> what its adapters declare; adapters that share a name must agree."""
    table: dict[str, Any] = {}
    for adapter in (*ADAPTERS, GENERIC):
        if table.setdefault(adapter.name, value := declared(adapter)) != value:
            raise AssertionError(f"the {adapter.name} adapters declare different rules")
    return MappingProxyType(table)


# The parameter rules per provider, the table core's canonical parameters read (core.request.params).
PARAM_RULES: Mapping[str, ParamRules] = _by_name(lambda a: a.param_rules)
_AUTH: Mapping[str, Auth] = _by_name(lambda a: a.auth())
# Per provider, every variable its clients read a credential from (`Adapter.key_variables`): a replay
# placeholder key goes to the first name of each group none of whose variables is set (`session/clientenv`).
KEY_VARIABLE_GROUPS: tuple[tuple[str, ...], ...] = tuple(dict.fromkeys(keys for a in ADAPTERS if (keys := a.key_variables())))
# Adapters whose answers hide text from the byte redaction (Bedrock's event streams), in registry order.
_ANSWER_REDACTORS: tuple[Adapter, ...] = tuple(
    a for a in ADAPTERS if type(a).redact_answer is not Adapter.redact_answer)


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


def first_host(provider: str) -> str | None:
    """The first registered host of `provider` that names one host (no wildcard), else None."""
    return next((h for h in provider_hosts(provider) if "*" not in h), None)


def auth_for(provider: str) -> Auth:
    """How the provider's key is sent; a name the registry does not hold gets `Bearer $<NAME>_API_KEY`."""
    return _AUTH.get(provider) or bearer_key(provider)


def redacted_answer(body: bytes, redact: Callable[[bytes], bytes]) -> bytes:
    """The answer with `redact` applied: inside the first format an adapter recognises (whatever the
    recording's provider: a gateway's host carries another's format), else as bytes."""
    for adapter in _ANSWER_REDACTORS:
        if (out := adapter.redact_answer(body, redact)) is not None:
            return out
    return redact(body)


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
