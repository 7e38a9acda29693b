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
from semula.core.settings import ProjectSettings, settings_in
from semula.core.tiers import Tier
from semula.store.types import AliasRow, Entry, IndexRow

# One budget for the answer cache, counted whole (`entry_bytes`), and the preload fills it at start so
# that first hits skip the store too. 64 MB keeps a 100k-entry proxy within ~400 MB resident; a hit
# outside the cache reads its entry from the store (~1 ms).
RESPONSE_CACHE_BYTES = 64 * 1024 * 1024
PRELOAD_BYTES = RESPONSE_CACHE_BYTES


def json_held_bytes(text: str) -> int:
    """What the JSON `text` holds once parsed (CPython objects), from its length and its counts of
    strings and containers: within ~10 % above a recursive walk of the parsed value, which cost
    ~0.7 ms an entry (7 s for a 64 MB preload)."""
    return len(text) + 50 * (text.count('"') // 2) + 150 * (text.count("{") + text.count("["))


def entry_bytes(entry: Entry) -> int:
    """Everything a cached entry holds: answer body, headers, parsed request, text, the object itself."""
    request = json.dumps(entry.canonical, ensure_ascii=False, separators=(",", ":"))
    headers = sum(2 * (len(k) + len(v)) + 250 for k, v in entry.headers)  # and their wire form (`wire_headers`)
    return len(entry.body) + json_held_bytes(request) + len(entry.last_text) + headers + ENTRY_OVERHEAD


ENTRY_OVERHEAD = 1200  # the Entry object, its small fields and the cache's own slot


FpKey = bytes | str


def _key(fp: str) -> FpKey:
    """A fingerprint as the index holds it: a SHA-256 hex digest, bare or after its version prefix
    (`fp2:`, `nfp2:`), as the prefix's bytes then the digest's 32 raw bytes (72 bytes of object against
    112 for the string, at 100k entries × 2 fingerprints); anything else as given. Bytes never equal a
    string, and the digest is always the last 32 bytes, so no two fingerprints share a key."""
    prefix, digest = fp[:-64], fp[-64:]
    if len(digest) == 64 and digest == digest.lower() and prefix[-1:] in ("", ":"):
        try:
            return prefix.encode() + bytes.fromhex(digest)
        except (ValueError, UnicodeEncodeError):
            pass
    return fp


# What one recording adds to the index (two keys, their slots, the entry id), measured with tracemalloc.
FINGERPRINT_BYTES = 230


class FingerprintIndex:
    """project → fingerprint → entry id for the certain tiers, plus per-project settings. One dict per
    project and tier, keyed by `_key`: no tuple per entry, and the projects holding a fingerprint are
    found by asking each project's dict (a handful of projects, not one set per entry)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exact: dict[str, dict[FpKey, int]] = {}
        self._normalised: dict[str, dict[FpKey, int]] = {}
        self._aliases: dict[str, dict[FpKey, int]] = {}
        self._settings: dict[str, ProjectSettings] = {}

    def load(self, rows: Iterable[IndexRow], aliases: Iterable[AliasRow],
             settings: dict[str, ProjectSettings]) -> None:
        with self._lock:
            self._exact, self._normalised = {}, {}
            for entry_id, project, request_fp, normalised_fp in sorted(rows):
                self._add(entry_id, project, request_fp, normalised_fp)
            self._aliases = _by_project(aliases)
            self._settings = dict(settings)

    def _add(self, entry_id: int, project: str, request_fp: str, normalised_fp: str) -> None:
        self._exact.setdefault(project, {})[_key(request_fp)] = entry_id
        self._normalised.setdefault(project, {})[_key(normalised_fp)] = entry_id

    def add(self, entry_id: int, project: str, request_fp: str, normalised_fp: str) -> None:
        with self._lock:
            self._add(entry_id, project, request_fp, normalised_fp)

    def put_alias(self, project: str, normalised_fp: str, entry_id: int) -> None:
        with self._lock:
            self._aliases.setdefault(project, {})[_key(normalised_fp)] = entry_id

    def replace_aliases(self, aliases: Iterable[AliasRow]) -> None:
        with self._lock:
            self._aliases = _by_project(aliases)

    def set_settings(self, project: str, settings: ProjectSettings) -> None:
        with self._lock:
            self._settings[project] = settings

    def match(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        """The certain tiers, in order (`core.tiers.CERTAIN`): exact, normalised, alias."""
        with self._lock:
            if (entry_id := self._exact.get(project, {}).get(_key(request_fp))) is not None:
                return Match(Tier.EXACT, entry_id, 1.0)
            if normalised_fp is None:
                return None
            normalised = _key(normalised_fp)
            if (entry_id := self._normalised.get(project, {}).get(normalised)) is not None:
                return Match(Tier.NORMALISED, entry_id, 1.0)
            if (entry_id := self._aliases.get(project, {}).get(normalised)) is not None:
                return Match(Tier.ALIAS, entry_id, 1.0)
        return None

    def projects_with(self, request_fp: str) -> set[str]:
        key = _key(request_fp)
        with self._lock:
            return {project for project, by_fp in self._exact.items() if key in by_fp}

    def settings_for(self, project: str) -> ProjectSettings:
        """A project's settings; a test-scoped project without its own has its base project's (`core.scope`)."""
        return settings_in(self._settings, project)

    def __len__(self) -> int:
        """The exact fingerprints held, over all projects."""
        with self._lock:
            return sum(len(by_fp) for by_fp in self._exact.values())

    def nbytes(self) -> int:
        """About what the index holds: it grows with the store, about 0.23 KB a recording."""
        return len(self) * FINGERPRINT_BYTES


def _by_project(aliases: Iterable[AliasRow]) -> dict[str, dict[FpKey, int]]:
    held: dict[str, dict[FpKey, int]] = {}
    for project, normalised_fp, entry_id in aliases:
        held.setdefault(project, {})[_key(normalised_fp)] = entry_id
    return held


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

    def peek(self, entry_id: int) -> Entry | None:
        """The cached entry without marking it used (a near search reading a proposal's request is not a hit)."""
        with self._lock:
            return self._entries.get(entry_id)

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

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """The counted bytes of everything cached (`entry_bytes`), never above `max_bytes`."""
        return self._bytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sizes.clear()
            self._bytes = 0
