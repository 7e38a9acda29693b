"""The engine: recordings, their in-memory indexes, the near-match search and the review queue,
wired to one store.

The proxy and the CLI talk to this façade; its parts depend on the store and the index only
(`index` → `review` → `near`, `recordings`), never on each other in a circle. Hits read
only memory (`match`, `cached_entry`); everything else runs on the caller's store thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from semula.calllog.schema import ReviewEvent
from semula.core.request.canonical import CanonicalRequest, request_fingerprint
from semula.core.cascade import Candidate
from semula.core.conversation import Conversation, url_fingerprint
from semula.core.decision import Match
from semula.core.explain import Nearest, close_nearest, nearest_recordings
from semula.core.nearmatch import near_match
from semula.core.redact import FingerprintKey
from semula.core.repeats import base_of
from semula.core.settings import ProjectSettings
from semula.core.tiers import Tier
from semula.engine.follow import ENTRY_BATCH, RELOAD_KINDS, StoreChange, run_here, start_following
from semula.engine.index import AnswerCache, FingerprintIndex
from semula.engine.calibrated import LearntThresholds
from semula.engine.near import NearSearcher
from semula.engine.tiers import open_tiers
from semula.engine.recordings import Recordings, stored_settings
from semula.engine.review import ReviewQueue
from semula.recordings.conversations import conversation_of
from semula.recordings.folder import RecordingsFolder, SyncReport
from semula.recordings.format import RecordingFileError
from semula.engine.upkeep import upgrade
from semula.store.base import RecordingStore
from semula.store.types import Entry, RecordingKind, StoreError

log = logging.getLogger("semula")

# A replay miss's explanation diffs at most this many recordings: the lexical proposals for its
# last user text, then the newest of the same provider and endpoint.
NEAREST_CANDIDATES = 50


class MissContext(NamedTuple):
    """What `Engine.miss_context` gives the replay-miss message (`core.explain.miss_message`)."""

    nearest: list[Nearest]
    candidate: Candidate | None
    recording_fp: str | None
    files: dict[int, str]  # entry id -> its file in the recordings folder


class Engine:
    """The recordings in memory and their store. `Engine.open(store, …)` gives one ready to serve; the
    constructor only assembles the parts (a bare engine has an empty index and starts no thread)."""

    def __init__(self, store: RecordingStore, review_log: Callable[[ReviewEvent], None] | None = None,
                 embedder: Any = None, folder: RecordingsFolder | None = None, key: FingerprintKey | None = None):
        self.store = store
        self.folder = folder
        # The salt of every redacted secret's tag: the recordings folder's (committed, so every clone
        # fingerprints alike), else the store's own, unless the caller brings one. Whoever canonicalises
        # requests for this engine must use it (`Adapter.canonicalise(raw, key)`).
        salt = folder.fingerprint_salt(default=store.fingerprint_salt()) if folder is not None else None
        self.fingerprint_key = key or FingerprintKey(salt or store.fingerprint_salt())
        self.lexical = store.lexical_index()  # also proposes the nearest recordings for a miss's message
        self.tiers = open_tiers(store, self.lexical, embedder)
        # The embedding tier when on: `semula eval` waits for its vectors.
        self.embeddings: Any = next((t for t in self.tiers if t.tier is Tier.EMBEDDING), None)
        self.index = FingerprintIndex()
        self.answers = AnswerCache()
        self.review = ReviewQueue(store, self.index, review_log, folder=folder)
        self.learnt = LearntThresholds()  # calibrated mode (near_serve = "calibrated")
        self.review.on_verdict = self.learnt.invalidate
        self.searcher = NearSearcher(store, self.tiers, self.review, self.learnt, self.answers.peek)
        self.recordings = Recordings(store, self.index, self.answers, self.tiers, self.review, folder)
        self.sync_report: SyncReport | None = None
        # A shared store (Postgres): other proxies' writes reach memory; `dispatch` says on which thread.
        self.dispatch: Callable[[Callable[[], None]], Any] = run_here
        self._readers: dict[int, RecordingStore] = {}  # thread id -> that thread's read handle
        self._readers_lock = threading.Lock()
        self._preloader: threading.Thread | None = None
        self._closing = threading.Event()

    @classmethod
    def open(cls, store: RecordingStore, review_log: Callable[[ReviewEvent], None] | None = None,
             embedder: Any = None, folder: RecordingsFolder | None = None, key: FingerprintKey | None = None
             ) -> Engine:
        """An engine ready to serve: fingerprints of an older version upgraded, the committed recordings
        synced in, a shared store's changes followed, the index built, the answers preloading."""
        engine = cls(store, review_log, embedder, folder, key)
        engine.recordings.upgrade_fingerprints()
        # Before the sync: what it loads is made by this code already (a new store's first import was
        # re-derived whole, 3 of a 7.5 s start at 5,000 recordings).
        upgrade(store, lambda project, settings: engine.recordings.refingerprint(project, settings, reload=False))
        if folder is not None:  # the committed recordings, before the index is built from the store
            engine.sync_report = engine._sync_folder(folder)
        start_following(engine)
        engine.recordings.reload(preload=False)
        # The answer preload (up to 64 MB parsed) runs beside the first requests, not before them:
        # hits it has not reached yet read the store.
        engine._preloader = threading.Thread(target=engine._preload_answers, name="semula-preload", daemon=True)
        engine._preloader.start()
        return engine

    def _preload_answers(self) -> None:
        try:
            reader = self.store.for_thread()
        except StoreError as e:
            log.warning("semula: could not preload recorded answers (%s); hits read the store", e)
            return
        try:
            self.recordings.preload(reader, self._closing.is_set)
        except StoreError as e:
            log.warning("semula: could not preload recorded answers (%s); hits read the store", e)
        finally:
            reader.close()

    def preloaded(self, timeout: float | None = None) -> bool:
        """Wait for the start-up answer preload; whether it is done."""
        if self._preloader is None:
            return True
        self._preloader.join(timeout)
        return not self._preloader.is_alive()

    def close(self) -> None:
        self._closing.set()  # the preload stops at its next page (a stop need not wait for 64 MB of answers)
        self.preloaded(timeout=60)
        with self._readers_lock:
            readers, self._readers = self._readers, {}
        for reader in readers.values():
            reader.close()
        for tier in reversed(self.tiers):  # the opt-in ones first: they may still write through the store
            tier.close()
        self.store.close()

    def reload(self) -> None:
        self.recordings.reload()

    def _sync_folder(self, folder: RecordingsFolder) -> SyncReport:
        store = self.store
        known: dict[str, ProjectSettings] = {}  # read once a project (a query each: 1 s of 5,000 files)

        def settings_for(project: str) -> ProjectSettings:
            if project not in known:
                known[project] = stored_settings(store, project)
            return known[project]

        report = folder.sync(store, settings_for, before_delete=self.review.recording_deleted, key=self.fingerprint_key)
        for project in sorted(report.shared.settings_changed):  # a teammate's fingerprint inputs
            for scoped in self.recordings.with_scopes(project):
                self.recordings.refingerprint(scoped, stored_settings(store, scoped), reload=False)
        return report

    def folder_changed_for(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        """Whether this request's recording file changed on disk since it was loaded (any thread: a stat)."""
        return self.folder is not None and self.folder.changed_for(project, request, request_fp)

    def refresh_folder(self) -> SyncReport | None:
        """Load what changed in the recordings folder under the running proxy (a checkout, a pull), and
        rebuild the indexes when anything did (store thread)."""
        if self.folder is None:
            return None
        report = self._sync_folder(self.folder)
        if report.loaded or report.removed or report.shared.settings_changed:
            self.reload()
            log.info("semula: recordings folder changed on disk: %d loaded, %d removed", report.loaded,
                     report.removed)
        return report

    # --- reads from memory (any thread) ----------------------------------------------------

    def match(self, project: str, request_fp: str, normalised_fp: str | None) -> Match | None:
        return self.index.match(project, request_fp, normalised_fp)

    def projects_with(self, request_fp: str) -> set[str]:
        return self.index.projects_with(request_fp)

    def settings_for(self, project: str) -> ProjectSettings:
        return self.index.settings_for(project)

    def cached_entry(self, entry_id: int) -> Entry | None:
        """An entry from memory, or None (then fetch it with `entry` on the store thread)."""
        return self.answers.get(entry_id)

    # --- the store thread ------------------------------------------------------------------

    def entry(self, entry_id: int) -> Entry | None:
        entry = self.answers.get(entry_id)
        if entry is None:
            entry = self.store.get_entry(entry_id)
            if entry is not None:
                self.answers.put(entry)
        return entry

    def record(self, new: Any, started: Any = None) -> int:
        return self.recordings.record(new, started)

    def record_many(self, news: list[Any]) -> list[int]:
        return self.recordings.record_many(news)

    def conversations(self, project: str, url: str) -> list[tuple[int, Conversation]]:
        """The project's recorded conversations of this URL (`core.conversation.url_key`) and their entry ids,
        newest first. The
        folder's changes are loaded first (a file added under a running proxy replays at once); an entry
        the loader refuses is skipped with a log line naming it."""
        if self.folder is not None and self.folder.changed_on_disk():
            self.refresh_folder()
        ids = self.store.entries_with_normalised_fp(project, url_fingerprint(url))
        found = []
        for entry in sorted(self.store.entries_by_ids(ids) if ids else [], key=lambda e: -e.id):
            try:
                found.append((entry.id, conversation_of(entry)))
            except RecordingFileError as e:
                log.warning("semula: realtime recording #%s skipped: %s", entry.id, e)
        return found

    def reader(self) -> RecordingStore:
        """This thread's own read handle on the store (the near search's `find` runs on reader threads)."""
        ident = threading.get_ident()
        reader = self._readers.get(ident)
        if reader is None:
            reader = self.store.for_thread()
            with self._readers_lock:
                self._readers[ident] = reader
        return reader

    def nearest(self, project: str, request: CanonicalRequest, limit: int = 3) -> list[Nearest]:
        """The recordings nearest a miss, from the indexes (never a scan of the whole project)."""
        text = request.last_user_text()
        ids = self.lexical.propose(project, text) if text.strip() else []
        stored = self.store.canonicals_by_ids(ids)
        chosen = {i: stored[i] for i in ids if i in stored}
        same = self.store.project_canonicals(project, provider=request.provider, endpoint=request.endpoint,
                                             limit=NEAREST_CANDIDATES)
        for entry_id, canonical in same:
            if len(chosen) >= NEAREST_CANDIDATES:
                break
            chosen.setdefault(entry_id, canonical)
        if not chosen:  # nothing at this endpoint: the project's newest, so the message can say what differs
            chosen = dict(self.store.project_canonicals(project, limit=NEAREST_CANDIDATES))
        candidates = [(entry_id, CanonicalRequest.from_json(c)) for entry_id, c in chosen.items()]
        return nearest_recordings(request, candidates, limit, self.settings_for(project))

    def miss_context(self, project: str, request: CanonicalRequest, normalised_fp: str | None,
                     candidate: Candidate | None) -> MissContext:
        """What a replay miss says: the nearest recordings, the review candidate to name (this call's,
        else one an earlier call queued), the request fingerprint of that candidate's recording, and
        the files of the recordings it names."""
        if (candidate is None or candidate.candidate_id is None) and normalised_fp:
            # Sequence mode's n-th occurrence (`fp#n`) shares the candidates queued under the bare fingerprint.
            candidate = self.review.open_candidate(project, base_of(normalised_fp)) or candidate
        nearest = self.nearest(project, request)
        if (candidate is None or candidate.candidate_id is None) and normalised_fp:
            candidate = self._queue_named(project, request, normalised_fp, nearest) or candidate
        entry = self.entry(candidate.entry_id) if candidate is not None else None
        named = {n.entry_id for n in nearest} | ({candidate.entry_id} if candidate is not None else set())
        return MissContext(nearest, candidate, entry.request_fp if entry is not None else None,
                           self.recording_files(named))

    def _queue_named(self, project: str, request: CanonicalRequest, normalised_fp: str,
                     nearest: list[Nearest]) -> Candidate | None:
        """Queue the recording the miss message names when its score (the queue's own) reaches the
        review threshold and the index did not propose it: a person can approve only what is queued."""
        best = close_nearest(nearest)
        settings = self.settings_for(project)
        threshold = settings.lexical_review_threshold
        if best is None or not best.reviewable or threshold is None or best.similarity < threshold:
            return None
        paired = self.store.paired_entries(project, normalised_fp)
        stored = self.store.canonicals_by_ids([best.entry_id]).get(best.entry_id)
        if best.entry_id in paired or stored is None:
            return None
        verdict = near_match(request, CanonicalRequest.from_json(stored), settings)
        if not verdict.review:
            return None
        try:
            queued = self.review.queue(project, request, request_fingerprint(request, settings.ignore), normalised_fp,
                                       [Candidate(best.entry_id, verdict)], paired)
        except StoreError as e:  # the miss stands; only the queueing is lost
            log.warning("semula: could not queue the nearest recording for review (%s)", e)
            return None
        return queued[0] if queued else None

    def recording_files(self, entry_ids: set[int]) -> dict[int, str]:
        """Each entry's file relative to the recordings folder, from its manifest (none without a folder)."""
        if self.folder is None or not entry_ids:
            return {}
        return {info["entry_id"]: rel for rel, info in list(self.folder.files.items())
                if info.get("entry_id") in entry_ids}

    def apply_changes(self, changes: list[StoreChange]) -> None:
        """Bring memory up to date with writes the store reports (`engine.follow`: other proxies' changes)."""
        kinds = {c.kind for c in changes}
        if kinds & RELOAD_KINDS:
            self.recordings.reload()
            return
        entry_ids = sorted({c.ref for c in changes if c.kind == "entry" and c.ref is not None})
        deleted, added = self.recordings.deleted, []
        for start in range(0, len(entry_ids), ENTRY_BATCH):
            # the answers too: the hit is served from memory, even if the server goes down later
            for entry in self.store.entries_by_ids(entry_ids[start:start + ENTRY_BATCH]):
                if entry.kind != RecordingKind.HTTP or entry.id in deleted:  # a conversation: read when replayed
                    continue
                self.index.add(entry.id, entry.project, entry.request_fp, entry.normalised_fp)
                self.answers.put(entry)
                added.append(entry.id)
        if deleted.intersection(added):  # deleted here (on another thread) after it was read: never served
            self.recordings.reload()
            return
        if "alias" in kinds:
            self.index.replace_aliases(self.store.alias_rows())
        if "candidate" in kinds:
            self.review.reload()

    def approve(self, candidate_id: int) -> dict[str, Any]:
        return self.review.approve(candidate_id)  # never deletes a recording: nothing to reload

    def projects(self) -> list[str]:
        return self.store.projects()
