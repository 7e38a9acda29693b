"""The cache: the store plus the in-memory fingerprint index that keeps hits off DuckDB.

The running proxy is the only writer of the store, so an index loaded at start and
updated on every write stays exact. Lookups (`match`) only read dictionaries and are
safe from any thread; everything that touches DuckDB runs on the caller's store thread.
Admin commands (entries, config) live here too, so the CLI runs the same code whether it
goes through a running proxy's admin endpoint or opens the store itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from semula.core.canonical import CanonicalRequest, normalised_fingerprint
from semula.core.decision import Match
from semula.core.explain import Nearest, nearest_recordings
from semula.engine.review import NearSearch, ReviewQueue
from semula.core.settings import (
    FINGERPRINT_KEYS,
    ProjectSettings,
    parse_setting,
    settings_from_mapping,
    settings_to_json,
    validate_project,
)
from semula.store.duckdb_store import Entry, NewEntry, Store

RESPONSE_CACHE_BYTES = 256 * 1024 * 1024
PRELOAD_BYTES = 64 * 1024 * 1024  # answers loaded at start so that first hits skip DuckDB too


class Cache:
    def __init__(self, store: Store, review_log: Callable[[dict[str, Any]], None] | None = None,
                 embedder: Any = None):
        self.store = store
        self.lexical = store.lexical_index()
        self.embeddings = None
        if embedder is not None:
            from semula.embeddings.tier import EmbeddingTier

            self.embeddings = EmbeddingTier(store.vectors, embedder)
        self.review = ReviewQueue(self, review_log)
        self._lock = threading.Lock()
        self._exact: dict[tuple[str, str], int] = {}
        self._normalised: dict[tuple[str, str], int] = {}
        self._aliases: dict[tuple[str, str], int] = {}
        self._projects_by_fp: dict[str, set[str]] = {}
        self._settings: dict[str, ProjectSettings] = {}
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._entry_bytes = 0
        self.reload()

    def close(self) -> None:
        if self.embeddings is not None:
            self.embeddings.close()
        self.lexical.close()
        self.store.close()

    # --- index ---------------------------------------------------------------------------

    def reload(self) -> None:
        rows = self.store.index_rows()
        aliases = self.store.alias_rows()
        settings = {p: settings_from_mapping(v) for p, v in self.store.all_project_settings().items()}
        with self._lock:
            self._exact.clear()
            self._normalised.clear()
            self._projects_by_fp.clear()
            for entry_id, project, request_fp, normalised_fp in sorted(rows):
                self._index(entry_id, project, request_fp, normalised_fp)
            self._aliases = {(p, fp): e for p, fp, e in aliases}
            self._settings = settings
            self.open_requests = self.store.open_request_keys()
            self._entries.clear()
            self._entry_bytes = 0
        for entry in self.store.recent_entries(PRELOAD_BYTES):
            self._remember(entry)
        self.lexical.maybe_rebuild()

    def _index(self, entry_id: int, project: str, request_fp: str, normalised_fp: str) -> None:
        self._exact[(project, request_fp)] = entry_id
        self._normalised[(project, normalised_fp)] = entry_id
        self._projects_by_fp.setdefault(request_fp, set()).add(project)

    def match(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        """The certain tiers, in order: exact, normalised, alias (dictionary lookups only)."""
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

    def cached_entry(self, entry_id: int) -> Entry | None:
        """An entry from memory, or None (then fetch it with `entry` on the store thread)."""
        with self._lock:
            entry = self._entries.get(entry_id)
            if entry is not None:
                self._entries.move_to_end(entry_id)
            return entry

    def entry(self, entry_id: int) -> Entry | None:
        entry = self.cached_entry(entry_id)
        if entry is None:
            entry = self.store.get_entry(entry_id)
            if entry is not None:
                self._remember(entry)
        return entry

    def _remember(self, entry: Entry) -> None:
        with self._lock:
            old = self._entries.pop(entry.id, None)
            if old is not None:
                self._entry_bytes -= len(old.body)
            self._entries[entry.id] = entry
            self._entry_bytes += len(entry.body)
            while self._entry_bytes > RESPONSE_CACHE_BYTES and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._entry_bytes -= len(dropped.body)

    def _forget(self, entry_id: int) -> None:
        with self._lock:
            old = self._entries.pop(entry_id, None)
            if old is not None:
                self._entry_bytes -= len(old.body)

    # --- writes --------------------------------------------------------------------------

    def record(self, new: NewEntry, started: Any = None) -> int:
        """Store an answer; close the review candidates of this request queued by earlier calls."""
        entry_id = self.store.upsert_entry(new)
        self.lexical.written(entry_id, new.project, new.last_text)
        if self.embeddings is not None:
            self.embeddings.entry_written(entry_id, new.project, new.canonical, self.settings_for(new.project))
        self.review.answered(new.project, new.normalised_fp, created_before=started)
        with self._lock:
            self._index(entry_id, new.project, new.request_fp, new.normalised_fp)
        self._forget(entry_id)
        if (entry := self.store.get_entry(entry_id)) is not None:
            self._remember(entry)
        return entry_id

    def delete_entry(self, entry_id: int) -> bool:
        found = self.store.delete_entry(entry_id)
        if found:
            self.lexical.deleted(entry_id)
            if self.embeddings is not None:
                self.embeddings.index.invalidate()
            self.reload()
        return found

    # --- admin commands (also reachable through the admin endpoint) ----------------------

    def list_entries(self, project: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        rows = self.store.list_entries(project, limit)
        for row in rows:
            row["last_text"] = _shorten(row.get("last_text") or "", 80)
        return rows

    def show_entry(self, entry_id: int) -> dict[str, Any] | None:
        entry = self.store.get_entry(entry_id)
        if entry is None:
            return None
        return {
            "id": entry.id, "project": entry.project, "provider": entry.provider, "host": entry.host,
            "method": entry.method, "endpoint": entry.endpoint, "model": entry.model,
            "request_fp": entry.request_fp, "normalised_fp": entry.normalised_fp,
            "status": entry.status, "streamed": entry.streamed, "prompt_tokens": entry.prompt_tokens,
            "completion_tokens": entry.completion_tokens, "upstream_ms": entry.upstream_ms,
            "created_at": entry.created_at, "updated_at": entry.updated_at,
            "headers": entry.headers, "request": entry.canonical,
            "response": entry.body.decode("utf-8", errors="replace"),
        }

    def config_show(self, project: str) -> dict[str, Any]:
        validate_project(project)
        return settings_to_json(self.settings_for(project))

    def config_set(self, project: str, key: str, value: Any) -> dict[str, Any]:
        """Validate and store one setting; fingerprint inputs re-fingerprint the project."""
        validate_project(project)
        parsed = parse_setting(key, value)
        self.store.set_project_setting(project, key, list(parsed) if isinstance(parsed, tuple) else parsed)
        new = replace(self.settings_for(project), **{key: parsed})
        with self._lock:
            self._settings[project] = new
        changed = 0
        if key in FINGERPRINT_KEYS:
            changed = self.refingerprint(project, new)
        return {"project": project, "key": key, "value": settings_to_json(new)[key], "refingerprinted": changed}

    def refingerprint(self, project: str, settings: ProjectSettings) -> int:
        """Recompute normalised fingerprints (and the aliases pointing at them) from stored requests."""
        old_fps = {entry_id: fp for entry_id, p, _, fp in self.store.index_rows() if p == project}
        updates = []
        for entry_id, canonical in self.store.project_canonicals(project, limit=10**9):
            fp = normalised_fingerprint(CanonicalRequest.from_json(canonical), *settings.fingerprint_inputs)
            if fp != old_fps.get(entry_id):
                updates.append((entry_id, fp))
        self.store.set_normalised_fps(updates)
        # An alias is keyed by its request's normalised fp: recompute it from the stored request.
        aliases = [
            (normalised_fingerprint(CanonicalRequest.from_json(request), *settings.fingerprint_inputs)
             if request else fp, entry_id, request)
            for fp, entry_id, request in self.store.alias_requests(project)
        ]
        self.store.replace_aliases(project, aliases)
        self.reload()
        return len(updates)

    def near(self, project: str, request: CanonicalRequest, request_fp: str, normalised_fp: str,
             settings: ProjectSettings | None = None, fuzzy_bypass_reason: str | None = None) -> NearSearch:
        """The near-match tiers after the certain ones missed: serve, queue for review, or neither."""
        return self.review.search(project, request, request_fp, normalised_fp,
                                  settings or self.settings_for(project), fuzzy_bypass_reason)

    def put_alias(self, project: str, normalised_fp: str, entry_id: int, request: dict[str, Any]) -> None:
        aliases = [(fp, e, r) for fp, e, r in self.store.alias_requests(project) if fp != normalised_fp]
        self.store.replace_aliases(project, [*aliases, (normalised_fp, entry_id, request)])
        with self._lock:
            self._aliases[(project, normalised_fp)] = entry_id

    def nearest(self, project: str, request: CanonicalRequest, limit: int = 3) -> list[Nearest]:
        candidates = [
            (entry_id, CanonicalRequest.from_json(c))
            for entry_id, c in self.store.project_canonicals(project, limit=2000)
        ]
        return nearest_recordings(request, candidates, limit)

    def projects(self) -> list[str]:
        return self.store.projects()


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
