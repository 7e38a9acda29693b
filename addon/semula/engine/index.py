"""What a hit reads: the fingerprint index and the answer cache, both in memory.

The running proxy is the only writer of its store, so an index loaded at start and updated
on every write stays exact. Lookups only read dictionaries under a lock and are safe from
any thread: the event loop serves hits without touching the store.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable

from semula.core.decision import Match
from semula.core.settings import ProjectSettings
from semula.store.types import Entry

RESPONSE_CACHE_BYTES = 256 * 1024 * 1024
PRELOAD_BYTES = 64 * 1024 * 1024  # answers loaded at start so that first hits skip the store too


def json_held_bytes(text: str) -> int:
    """What the JSON `text` holds once parsed (CPython objects), from its length and its counts of
    strings and containers: within ~10 % above a recursive walk of the parsed value, which cost
    ~0.7 ms an entry (7 s for a 64 MB preload)."""
    return len(text) + 50 * (text.count('"') // 2) + 150 * (text.count("{") + text.count("["))


def entry_bytes(entry: Entry) -> int:
    """Everything a cached entry holds: answer body, headers, parsed request, text, the object itself."""
    request = json.dumps(entry.canonical, ensure_ascii=False, separators=(",", ":"))
    headers = sum(len(k) + len(v) + 170 for k, v in entry.headers)
    return len(entry.body) + json_held_bytes(request) + len(entry.last_text) + headers + ENTRY_OVERHEAD


ENTRY_OVERHEAD = 1200  # the Entry object, its small fields and the cache's own slot


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
    """Recorded entries by id, least recently used first out, within a byte budget (`entry_bytes`:
    the whole entry, not just its answer body)."""

    def __init__(self, max_bytes: int = RESPONSE_CACHE_BYTES) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._sizes: dict[int, int] = {}
        self._touched: set[int] | None = None  # ids written while a preload reads (`begin_preload`)
        self._bytes = 0
        self.max_bytes = max_bytes

    def get(self, entry_id: int) -> Entry | None:
        with self._lock:
            entry = self._entries.get(entry_id)
            if entry is not None:
                self._entries.move_to_end(entry_id)
            return entry

    def begin_preload(self) -> None:
        """From now until `finish_preload`, remember which ids a write or a hit touched."""
        with self._lock:
            self._touched = set()

    def finish_preload(self, items: Iterable[tuple[Entry, int]]) -> None:
        """Cache `(entry, entry_bytes)` read since `begin_preload`, oldest first, except the ids touched
        meanwhile (what they hold now is newer than what the preload read)."""
        with self._lock:
            touched, self._touched = self._touched or set(), None
            for entry, size in items:
                if entry.id not in touched:
                    self._put(entry, size)

    def put(self, entry: Entry, size: int | None = None) -> None:
        """Cache `entry`; `size` is its `entry_bytes` if the caller counted them already."""
        size = entry_bytes(entry) if size is None else size
        with self._lock:
            if self._touched is not None:
                self._touched.add(entry.id)
            self._put(entry, size)

    def _put(self, entry: Entry, size: int) -> None:
        old = self._entries.pop(entry.id, None)
        if old is not None:
            self._bytes -= self._sizes.pop(entry.id)
        if size > self.max_bytes:
            return  # never cache what the whole budget cannot hold
        self._entries[entry.id], self._sizes[entry.id] = entry, size
        self._bytes += size
        while self._bytes > self.max_bytes and len(self._entries) > 1:
            dropped, _ = self._entries.popitem(last=False)
            self._bytes -= self._sizes.pop(dropped)

    def forget(self, entry_id: int) -> None:
        with self._lock:
            if self._touched is not None:
                self._touched.add(entry_id)
            if self._entries.pop(entry_id, None) is not None:
                self._bytes -= self._sizes.pop(entry_id)

    @property
    def nbytes(self) -> int:
        """The counted bytes of everything cached (`entry_bytes`), never above `max_bytes`."""
        return self._bytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sizes.clear()
            self._bytes = 0
