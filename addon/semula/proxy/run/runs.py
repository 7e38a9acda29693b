"""Sequence mode's counters: how often each request has come in its run (the proxy edge keeps them).

A run is this proxy process, or, when a call carries the `x-semula-run` header, the run it names
(a test id, say): parallel tests that each name their own run never interleave their sequences.
A call tagged by the pytest plugin (proxy/run/scopes.py) counts in its session's current test: each test
of each session counts from 1, also when a new session reuses a running proxy.
"""

from __future__ import annotations

import threading

from semula.core.repeats import Repeats
from semula.core.settings import AddonSettings

RUN_HEADER = "x-semula-run"


class RunCounters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], int] = {}  # (run, project, request_fp) -> occurrences so far

    def count(self, run: str, project: str, request_fp: str) -> int:
        with self._lock:
            n = self._seen[(run, project, request_fp)] = self._seen.get((run, project, request_fp), 0) + 1
            return n

    def repeats(self, settings: AddonSettings, run: str, project: str) -> Repeats | None:
        """What the cascade needs in sequence mode for one call; None in the default one-answer mode."""
        if settings.repeats != "sequence":
            return None
        return Repeats(lambda fp: self.count(run, project, fp), settings.repeats_exhausted == "refuse")
