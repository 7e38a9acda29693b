"""What a hit reads: the fingerprint index and the answer cache, both in memory.

The running proxy is the only writer of its store, so an index loaded at start and updated
on every write stays exact. Lookups only read dictionaries under a lock and are safe from
any thread: the event loop serves hits without touching the store.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

from semula.core.decision import Match
from semula.core.settings import ProjectSettings
from semula.store.types import Entry

RESPONSE_CACHE_BYTES = 256 * 1024 * 1024
PRELOAD_BYTES = 64 * 1024 * 1024  # answers loaded at start so that first hits skip the store too


class FingerprintIndex:
    """(project, fingerprint) → entry id for the certain tiers, plus per-project settings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exact: dict[tuple[str, str], int] = {}
        self._normalised: dict[tuple[str, str], int] = {}
        self._aliases: dict[tuple[str, str], int] = {}
        self._projects_by_fp: dict[str, set[str]] = {}
        self._settings: dict[str, ProjectSettings] = {}

    def load(self, rows: Iterable[tuple[int, str, str, str]], aliases: Iterable[tuple[str, str, int]],
             settings: dict[str, ProjectSettings]) -> None:
        with self._lock:
            self._exact.clear()
            self._normalised.clear()
            self._projects_by_fp.clear()
            for entry_id, project, request_fp, normalised_fp in sorted(rows):
                self._add(entry_id, project, request_fp, normalised_fp)
            self._aliases = {(p, fp): e for p, fp, e in aliases}
            self._settings = dict(settings)

    def _add(self, entry_id: int, project: str, request_fp: str, normalised_fp: str) -> None:
        self._exact[(project, request_fp)] = entry_id
        self._normalised[(project, normalised_fp)] = entry_id
        self._projects_by_fp.setdefault(request_fp, set()).add(project)

    def add(self, entry_id: int, project: str, request_fp: str, normalised_fp: str) -> None:
        with self._lock:
            self._add(entry_id, project, request_fp, normalised_fp)

    def put_alias(self, project: str, normalised_fp: str, entry_id: int) -> None:
        with self._lock:
            self._aliases[(project, normalised_fp)] = entry_id

    def replace_aliases(self, aliases: Iterable[tuple[str, str, int]]) -> None:
        with self._lock:
            self._aliases = {(p, fp): e for p, fp, e in aliases}

    def set_settings(self, project: str, settings: ProjectSettings) -> None:
        with self._lock:
            self._settings[project] = settings

    def match(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        """The certain tiers, in order: exact, normalised, alias."""
        with self._lock:
            if (entry_id := self._exact.get((project, request_fp))) is not None:
                return Match("exact", entry_id, 1.0)
            if normalised_fp is None:
                return None
            if (entry_id := self._normalised.get((project, normalised_fp))) is not None:
                return Match("normalised", entry_id, 1.0)
            if (entry_id := self._aliases.get((project, normalised_fp))) is not None:
                return Match("alias", entry_id, 1.0)
        return None

    def projects_with(self, request_fp: str) -> set[str]:
        with self._lock:
            return set(self._projects_by_fp.get(request_fp, ()))

    def settings_for(self, project: str) -> ProjectSettings:
        return self._settings.get(project) or ProjectSettings()


class AnswerCache:
    """Recorded entries by id, least recently used first out, within a byte budget."""

    def __init__(self, max_bytes: int = RESPONSE_CACHE_BYTES) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._bytes = 0
        self.max_bytes = max_bytes

    def get(self, entry_id: int) -> Entry | None:
        with self._lock:
            entry = self._entries.get(entry_id)
            if entry is not None:
                self._entries.move_to_end(entry_id)
            return entry

    def put(self, entry: Entry) -> None:
        with self._lock:
            old = self._entries.pop(entry.id, None)
            if old is not None:
                self._bytes -= len(old.body)
            self._entries[entry.id] = entry
            self._bytes += len(entry.body)
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped.body)

    def forget(self, entry_id: int) -> None:
        with self._lock:
            old = self._entries.pop(entry_id, None)
            if old is not None:
                self._bytes -= len(old.body)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
