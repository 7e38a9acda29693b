"""Side traffic: calls to a provider host that are not model calls (trace and telemetry uploads).

openai-agents uploads its traces to ``POST https://api.openai.com/v1/traces/ingest`` from a
background thread; Claude Code (and the Claude Agent SDK that drives it) posts its event log to
``api.anthropic.com/api/event_logging/…``. Their bodies change on every run (trace ids, timings),
so recording them only grows the folder, and refusing them in replay fails whichever test happens
to be running. Each adapter declares its side paths with the answer its server gives on success;
a project adds its own patterns with the ``semula_side_paths`` option.

Pure: plain strings in, a :class:`SideCall` out. The proxy's handling is in ``proxy/call/sidecalls.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from semula.core.decision import SIDE_CALL

__all__ = ["PROJECT_SIDE_ANSWER", "SideCall", "SidePath", "compile_side_paths", "side_call"]


@dataclass(frozen=True)
class SidePath:
    """A path pattern (``re.search`` on the path without its query) and the local success answer."""

    pattern: str
    what: str  # for the call log's reason: "openai-agents trace upload"
    status: int = 200
    body: bytes = b"{}"
    content_type: str | None = "application/json"

    def matches(self, path: str) -> bool:
        return _compiled(self.pattern).search(path) is not None


@dataclass(frozen=True)
class SideCall:
    """A request that is side traffic: which provider's, why, and how replay answers it."""

    provider: str
    path: SidePath

    @property
    def reason(self) -> str:
        return f"{SIDE_CALL}{self.path.what} ({self.provider}); never recorded"


# A project's own patterns (semula_side_paths): an empty JSON object, which telemetry clients accept.
PROJECT_SIDE_ANSWER = SidePath(pattern="", what="", status=200)


def compile_side_paths(patterns: Iterable[str]) -> tuple[SidePath, ...]:
    """The project's patterns as side paths; a pattern that is not a regex raises ValueError naming it."""
    out = []
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"semula_side_paths: {pattern!r} is not a regular expression: {e}") from None
        out.append(SidePath(pattern, f"path matches semula_side_paths {pattern!r}", PROJECT_SIDE_ANSWER.status,
                            PROJECT_SIDE_ANSWER.body, PROJECT_SIDE_ANSWER.content_type))
    return tuple(out)


def side_call(provider: str | None, declared: Iterable[SidePath], project_paths: Iterable[SidePath],
              path: str) -> SideCall | None:
    """The side call this path is, the provider's own declarations first, else None."""
    for side in declared:
        if side.matches(path):
            return SideCall(provider or "generic", side)
    for side in project_paths:
        if side.matches(path):
            return SideCall(provider or "generic", side)
    return None


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    compiled = _CACHE.get(pattern)
    if compiled is None:
        compiled = _CACHE[pattern] = re.compile(pattern)
    return compiled
