"""A run's calls by outcome: counted by the proxy as each call's row is logged, said in its last
console line, read back by the run that started it (`semula exec`, the pytest plugin) instead of
opening the Parquet log with DuckDB after the proxy stopped (0.2-0.4 s of every stop).

The same outcomes as the call-log query it replaces (`session/run.py run_summary`): a hit; a miss
recorded outside replay; a call refused in replay (an answered side call is not refused). MCP traffic that is
not a call (the GET stream a client reopens after replay's 405, notifications, DELETE) is not counted at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from semula.calllog.schema import NOT_A_CALL_PREFIX, SIDE_CALL_PREFIX

STOPPED = "semula: stopped · "  # the proxy's last console line: STOPPED + Tally.text()
_NUMBERS = re.compile(r"(\d+) calls? · (\d+) hits? · (\d+) miss(?:es)? · (\d+) refused")


@dataclass
class Tally:
    calls: int = 0
    hits: int = 0
    misses: int = 0
    refused: int = 0

    def add(self, decision: str | None, mode: str | None, bypass_reason: str | None) -> None:
        reason = bypass_reason or ""
        if reason.startswith(NOT_A_CALL_PREFIX):
            return
        self.calls += 1
        if decision == "hit":
            self.hits += 1
        elif mode == "replay":
            if not reason.startswith(SIDE_CALL_PREFIX):
                self.refused += 1
        elif decision == "miss":
            self.misses += 1

    def text(self) -> str:
        other = self.calls - self.hits - self.misses - self.refused
        other_text = f" · {other} other (bypass/passthrough/error)" if other else ""
        return (f"{_count(self.calls, 'call', 'calls')} · {_count(self.hits, 'hit', 'hits')} · "
                f"{_count(self.misses, 'miss', 'misses')} · {self.refused} refused{other_text}")

    @classmethod
    def parse(cls, line: str) -> Tally | None:
        """The tally in the proxy's STOPPED line, or None when `line` is not one."""
        if not line.startswith(STOPPED) or (found := _NUMBERS.match(line, len(STOPPED))) is None:
            return None
        return cls(*(int(n) for n in found.groups()))


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
