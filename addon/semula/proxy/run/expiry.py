"""The edge of `max_age`: the clock the cascade is given, when a recording was made, and the warning
said once per recording that is served although older than its project's `max_age`.

The verdict and the decision it makes are pure (`core.expiry`, applied in `core.cascade.settle`). A hit
never touches the recording's time: only `re-record` (auto) forwards the call, and the new answer
replaces it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from semula.store.types import Entry

log = logging.getLogger("semula")
MAX_WARNED = 10_000  # recordings warned about, remembered so each is said once


def now() -> datetime:
    """The clock's reading the cascade compares `max_age` with (naive UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


def recorded_at(entry: Entry) -> str | datetime | None:
    """When the recording was made: a loaded file's recorded_at, else when the store got it."""
    return (entry.provenance or {}).get("recorded_at") or entry.updated_at or entry.created_at


class StaleWarnings:
    """A served recording older than `max_age` (policy `warn`) is said once, not on every hit."""

    def __init__(self) -> None:
        self.warned: set[int] = set()

    def note(self, entry_id: int, reason: str) -> None:
        if entry_id not in self.warned and len(self.warned) < MAX_WARNED:
            self.warned.add(entry_id)
            log.warning("semula: recording #%s: %s (served; semula recordings stale lists them)", entry_id, reason)
