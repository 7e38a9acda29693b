"""Which test each run tag is in: the pytest plugin says so at each test's start and end.

Clients are often created before a test runs (at module level), so a per-test environment variable
would not reach them; the proxy password the plugin already sends (`semula-<tag>`, proxy/run/refusals.py)
does. At each test's setup the plugin calls the admin method `tests.enter` ("tag T is now in test X",
with the session's scope mode); at its end, with no test. A call then carries the test that was current
for its tag: its refusal is that test's (or no test's, between tests), its repeats are counted within
the test, and under `--semula-scope=test` its recordings are the test's own (`core.scope`).

Runners other than the plugin send the header `x-semula-scope: <name>` instead, per call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from semula.core.scope import ScopeMode, scope_problem

SCOPE_HEADER = "x-semula-scope"
MAX_TAGS = 4096  # tags of sessions long gone are dropped first


@dataclass(frozen=True)
class FlowTest:
    """What a call's tag and headers say about its test."""

    test: str  # the test current when the call came ("": none known)
    scope: str  # the name its recordings are scoped to ("": the project's)
    run: str  # the run its repeats are counted in (`x-semula-run`, else the tag's test)


class CurrentTests:
    METHOD = "tests.enter"  # admin: {"tag": str, "test": str or None, "scope": "project" | "test"}

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[str, tuple[str, bool]] = {}  # tag -> (test, scoped)

    def enter(self, tag: str, test: str | None, scoped: bool) -> None:
        with self._lock:
            self._current.pop(tag, None)
            if test:
                self._current[tag] = (test, scoped)
                while len(self._current) > MAX_TAGS:
                    self._current.pop(next(iter(self._current)))

    def answer(self, params: dict[str, Any]) -> dict[str, Any]:
        tag, test = str(params.get("tag") or ""), params.get("test")
        if not tag:
            raise ValueError("tests.enter needs the calls' tag (the proxy password semula-<tag>)")
        if test is not None and (not isinstance(test, str) or (problem := scope_problem(test))):
            raise ValueError(f"tests.enter: bad test name: {problem if isinstance(test, str) else 'not text'}")
        mode = ScopeMode(params.get("scope") or ScopeMode.PROJECT.value)  # a typo: ValueError naming it
        self.enter(tag, test, mode is ScopeMode.TEST)
        return {"tag": tag, "test": test, "scope": mode.value}

    def for_flow(self, tag: str, header_scope: str, header_run: str) -> FlowTest:
        """The test of one call (its tag's current one) and its scope: the header's, else that test's if the
        session scopes per test. An unusable header (control characters, too long) scopes nothing."""
        with self._lock:
            test, scoped = self._current.get(tag, ("", False)) if tag else ("", False)
        if header_scope and scope_problem(header_scope) is None:
            return FlowTest(test or header_scope, header_scope, header_run or f"~scope:{header_scope}")
        run = header_run or (f"~{tag}::{test}" if tag else "")  # a new session's tag counts from 1
        return FlowTest(test, test if scoped else "", run)
