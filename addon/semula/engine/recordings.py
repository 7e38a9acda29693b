"""Writing recordings: record, delete, re-fingerprint a project or an old store, per-project settings.

Every write keeps the in-memory index, the answer cache and the near-match indexes in step
with the store, and closes the review candidates a new recording answers. The listing and
showing commands live here too, so the CLI runs the same code through a running proxy's
admin endpoint or on the store directly. Runs on the store thread.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from collections.abc import Callable, Sequence
from typing import Any

from semula.core.request.canonical import FINGERPRINT_VERSION, CanonicalRequest, normalised_fingerprint
from semula.core.repeats import occurrence_of, sequenced
from semula.core.scope import base_project
from semula.core.settings import (
    FINGERPRINT_KEYS,
    ProjectSettings,
    parse_setting,
    setting_json,
    settings_from_mapping,
    settings_in,
    settings_to_json,
    validate_project,
)
from semula.engine.index import PRELOAD_BYTES, AnswerCache, FingerprintIndex, entry_bytes
from semula.engine.review import ReviewQueue, shorten
from semula.engine.tiers.base import NearTier
from semula.store.base import RecordingStore, each_canonical
from semula.recordings.entry import fingerprints_of
from semula.recordings.folder import RecordingsFolder
from semula.recordings.shared import settings_file
from semula.store.types import AliasRequest, Entry, NewEntry, RecordingKind

log = logging.getLogger("semula")

def stored_settings(store: RecordingStore, project: str) -> ProjectSettings:
    """A project's settings as the store holds them; a test-scoped project without its own has its base's."""
    own = store.project_settings(project)
    if not own and (base := base_project(project)) is not None:
        own = store.project_settings(base)
    return settings_from_mapping(own)


class Recordings:
    def __init__(self, store: RecordingStore, index: FingerprintIndex, answers: AnswerCache,
                 tiers: Sequence[NearTier], review: ReviewQueue, folder: RecordingsFolder | None = None):
        self.folder = folder
        self.store = store
        self.index = index
        self.answers = answers
        self.tiers = tiers  # the near tiers: their indexes follow every write and delete
        self.review = review
        self.deleted: set[int] = set()  # ids deleted through this engine: a change read before never adds one back
        # A shared store's changes may reload on the follower's thread (`Engine.dispatch` = `run_here`: the
        # CLI, tests) while the caller's thread reloads after a write: two reloads overlapping could leave
        # the one that read the store first in memory (a re-fingerprinted project's old fingerprints).
        self._reloading = threading.Lock()

    def reload(self, preload: bool = True) -> None:
        """Load the index, the open review requests and (unless the caller does it later, on another
        thread: `preload`) the most recent answers from the store."""
        with self._reloading:  # one at a time: the last to replace memory is the last to have read the store
            settings = {p: settings_from_mapping(v) for p, v in self.store.all_project_settings().items()}
            self.index.load(self.store.index_rows(), self.store.alias_rows(), settings)
            self.review.reload()
            self.answers.clear()
            if preload:
                self.preload(self.store)
            for tier in self.tiers:
                tier.reloaded()

    def preload(self, store: RecordingStore, stopping: Callable[[], bool] = lambda: False) -> None:
        """The newest answers, counted whole (`entry_bytes`) within PRELOAD_BYTES, into the answer cache;
        what a write or a hit cached meanwhile is newer and stays. Fewer once `stopping` (the engine closes)."""
        self.answers.begin_preload()
        items: list[tuple[Entry, int]] = []
        try:
            held = 0
            for entry in reversed(store.recent_entries(PRELOAD_BYTES, stopping)):  # newest first
                size = entry_bytes(entry)
                held += size
                if held > PRELOAD_BYTES:
                    break
                items.append((entry, size))
        finally:
            self.answers.finish_preload(reversed(items))

    def record(self, new: NewEntry, started: Any = None) -> int:
        """Store an answer; close this request's open review candidates, the ones its own call queued
        included (an answered request closes its own: approving one would only shadow, or delete, the
        request's own correct recording). `started` is accepted for the callers' sake and unused."""
        if self.folder is not None:
            self.folder.intend(new)  # a kill -9 before the file is written: the next start writes it
        entry_id = self.store.upsert_entry(new)
        self._recorded(entry_id, new, self.store.get_entry(entry_id))
        return entry_id

    def record_many(self, news: list[NewEntry]) -> list[int]:
        """`record` for several answers at once, their ids in order: one transaction and one read for all
        (a transaction is most of a recording's cost in DuckDB; a burst of misses queues many)."""
        if len(news) == 1:
            return [self.record(news[0])]
        if self.folder is not None:
            for new in news:
                self.folder.intend(new)
        ids = self.store.upsert_entries(news)
        stored = {entry.id: entry for entry in self.store.entries_by_ids(list(dict.fromkeys(ids)))}
        for new, entry_id in zip(news, ids):
            self._recorded(entry_id, new, stored.get(entry_id), close_review=False)
        self.review.answered_many([(n.project, n.normalised_fp) for n in news if n.kind == RecordingKind.HTTP])
        return ids

    def _recorded(self, entry_id: int, new: NewEntry, entry: Entry | None, close_review: bool = True) -> None:
        """What follows a stored answer (`entry`, as stored): the indexes, the review queue (unless the
        caller closes the request's candidates itself), the file."""
        if new.kind != RecordingKind.HTTP:  # a conversation: found by its URL, never matched or near-searched
            if self.folder is not None and entry is not None:
                self._write_file(entry)
            return
        settings = self.index.settings_for(new.project)
        for tier in self.tiers:
            tier.written(entry_id, new, settings)
        if close_review:
            self.review.answered(new.project, new.normalised_fp)
        self.index.add(entry_id, new.project, new.request_fp, new.normalised_fp)
        self.answers.forget(entry_id)
        if entry is not None:
            self.answers.put(entry)
            if self.folder is not None:
                self._write_file(entry)

    def _write_file(self, entry: Entry) -> None:
        assert self.folder is not None
        try:
            self.folder.write(entry)
        except OSError as e:  # the store has it: serving goes on, but a teammate or CI will not see it yet
            log.error("semula: recording #%s is stored but its file could not be written to %s: %s "
                      "(retried with the next recording and at the next start)", entry.id, self.folder.root, e)
            return
        if self.folder.unwritten:  # the folder takes writes again: the ones that failed before
            self.folder.write_unwritten(self.store)

    def delete_entry(self, entry_id: int) -> bool:
        self.deleted.add(entry_id)  # first: `Engine.apply_changes` may be adding it from an older change right now
        self.review.recording_deleted(entry_id)
        found = self.store.delete_entry(entry_id)
        if self.folder is not None:
            self.folder.delete(entry_id)
        if found:
            for tier in self.tiers:
                tier.deleted(entry_id)
            self.reload()
        return found

    def list_entries(self, project: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        rows = self.store.list_entries(project, limit)
        for row in rows:
            row["last_text"] = shorten(row.get("last_text") or "", 80)
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
        return settings_to_json(self.index.settings_for(project))

    def config_set(self, project: str, key: str, value: Any) -> dict[str, Any]:
        """Validate and store one setting; fingerprint inputs re-fingerprint the project."""
        validate_project(project)
        parsed = parse_setting(key, value)
        self.store.set_project_setting(project, key, setting_json(parsed))
        new = replace(self.index.settings_for(project), **{key: parsed})
        self.index.set_settings(project, new)
        if self.folder is not None:  # teammates and CI get the project's settings with its recordings
            self.folder.write_shared(settings_file(project, self.store.project_settings(project)))
        changed = 0
        if key in FINGERPRINT_KEYS:
            changed = sum(self.refingerprint(p, new, reload=False) for p in self.with_scopes(project))
            self.reload()
        return {"project": project, "key": key, "value": settings_to_json(new)[key], "refingerprinted": changed}

    def with_scopes(self, project: str) -> list[str]:
        """`project` and its test-scoped projects without settings of their own (they are keyed by its)."""
        own = self.store.all_project_settings()
        return [project, *(p for p in self.store.projects() if p != project and base_project(p) == project
                           and p not in own)]

    def refingerprint(self, project: str, settings: ProjectSettings, reload: bool = True) -> int:
        """Recompute a project's fingerprints (and the aliases and review candidates keyed by them) from
        stored requests: the normalised ones, and the exact ones too (the project's `ignore` feeds both)."""
        rows = {row.id: (row.request_fp, row.normalised_fp)
                for row in self.store.index_rows() if row.project == project}
        updates = []
        for entry_id, _, canonical in each_canonical(self.store, project):
            old = rows.get(entry_id, ("", ""))
            n = occurrence_of(old[0])  # a sequence's n-th answer keeps #n
            new = tuple(sequenced(fp, n) for fp in fingerprints_of(CanonicalRequest.from_json(canonical), settings))
            if new != old:
                updates.append((entry_id, new[0], new[1]))
        candidates = [(c.id, *fingerprints_of(CanonicalRequest.from_json(c.request_canonical), settings))
                      for c in self.store.candidates(project, status=None, limit=10**9)]
        self.store.set_fingerprints(updates, [c for c in candidates if c])
        self._refingerprint_aliases(project, settings)
        if reload:
            self.reload()
        return len(updates)

    def _refingerprint_aliases(self, project: str, settings: ProjectSettings) -> None:
        """An alias is keyed by its request's normalised fp: recompute it from the stored request."""
        aliases = [
            AliasRequest(normalised_fingerprint(CanonicalRequest.from_json(request), *settings.fingerprint_inputs)
                         if request else fp, entry_id, request)
            for fp, entry_id, request in self.store.alias_requests(project)
        ]
        self.store.replace_aliases(project, aliases)

    def upgrade_fingerprints(self) -> int:
        """Re-fingerprint a store whose fingerprints were made under another version; returns the entries redone.

        Every fingerprint is recomputed from the stored request: entries, review candidates and
        aliases. A request stored under fp1 had each secret redacted to a bare ``[REDACTED]`` (the
        secret is gone, so no keyed tag can be made for it): such an entry keeps that placeholder,
        and as no new request carries a bare ``[REDACTED]`` where a secret was, it stops matching
        requests that carry a secret; it is re-recorded on the next such call (auto/record), or
        replay misses until it is. Entries without a secret keep matching as before.
        """
        if self.store.fingerprint_version() == FINGERPRINT_VERSION:
            return 0
        settings = {p: settings_from_mapping(v) for p, v in self.store.all_project_settings().items()}

        def of(project: str, canonical: dict[str, Any], occurrence: int = 1) -> tuple[str, str]:
            fps = fingerprints_of(CanonicalRequest.from_json(canonical), settings_in(settings, project))
            return sequenced(fps[0], occurrence), sequenced(fps[1], occurrence)

        projects = self.store.projects()
        occurrences = {row.id: occurrence_of(row.request_fp) for row in self.store.index_rows()}
        entries = [(entry_id, *of(project, canonical, occurrences.get(entry_id, 1)))
                   for entry_id, project, canonical in each_canonical(self.store)]
        candidates = [(c.id, *of(c.project, c.request_canonical))
                      for c in self.store.candidates(status=None, limit=10**9)]
        self.store.set_fingerprints(entries, candidates)
        for project in projects:
            self._refingerprint_aliases(project, settings_in(settings, project))
        self.store.set_fingerprint_version(FINGERPRINT_VERSION)
        return len(entries)
