"""The recordings folder: the portable, versioned form of the store that people commit.

The DuckDB store stays the store and index (hits, FTS, vectors); this folder is what travels.
At start the folder is loaded into the store incrementally: files unchanged since the last load
(size and modification time, then a content hash) are skipped, changed ones re-imported, and
the entries of removed files removed. Only entries that came from this folder are ever removed:
the manifest (in the data dir) remembers which.

The folder is untrusted input (it arrives from pull requests): `files` decides what is read,
written or deleted there, `validate` what a file may hold. A bad file is named and costs only
itself: a store batch that fails falls back to one recording at a time. Two files recording one
request are named, and the first loaded wins; deleting it loads the other.

Every stored recording reaches its file: a recording is noted in the data dir's journal before it
is stored, and a write that failed (a full disk, a read-only folder, a kill -9 between the store
and the file) is retried at the next start and with every later recording.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from semula.core.request.canonical import CanonicalRequest
from semula.core.redact import FingerprintKey
from semula.core.repeats import occurrence_of
from semula.core.settings import ProjectSettings, SettingsError, validate_project
from semula.providers.base import Usage
from semula.recordings.entry import Answer, recording_of, redacted_request
from semula.recordings.files import (Found, SyncStopped, UnsafePath, contained, directory_times, ensure_ignores, make_directories,
                                     max_file_bytes, plain_relative, read_capped, remove_stale_temps, scan, up_to,
                                     write_atomically)
from semula.recordings import conversations, sidecars
from semula.recordings.format import Recording, RecordingFileError, dumps_with_sidecars, loads, request_path
from semula.recordings.sidecars import SidecarRef
from semula.recordings.shared import SharedReport, check_shared, folder_settings_for, load_settings, load_shared
from semula.store.base import RecordingStore
from semula.store.types import Entry, NewEntry, RecordingKind, StoreError

log = logging.getLogger("semula")

MANIFEST_FILE = "recordings-manifest.json"
JOURNAL_FILE = "recordings-journal"  # in the data dir: recordings stored whose file may not be written yet
META_FILE = "_semula.json"  # the folder's format and the salt of secrets' tags: commit it with the recordings
FOLDER_FORMAT = "semula-recordings/1"
SYNC_BATCH = 2000  # recordings per store transaction when loading
EXPORT_BATCH = 32  # recordings read per store query when exporting: one query each, at most 32 answers in memory
LOAD_ERRORS = (RecordingFileError, SettingsError, UnicodeDecodeError, OSError)


@dataclass
class SyncReport:
    loaded: int = 0
    unchanged: int = 0
    removed: int = 0
    bad: list[tuple[str, str]] = field(default_factory=list)  # (relative path, problem)
    exported: int = 0
    written: int = 0  # stored recordings whose file had not been written, now written
    shared: SharedReport = field(default_factory=SharedReport)  # aliases, rejections, settings

    def line(self, root: Path) -> str:
        text = (f"semula: recordings {root}: {self.loaded} loaded, {self.unchanged} unchanged, "
                f"{self.removed} removed")
        if self.exported:
            text += f", {self.exported} exported from the store"
        if self.written:
            text += f", {self.written} written that had no file yet"
        if self.shared.aliases or self.shared.rejections:
            text += f", {self.shared.aliases} alias(es) and {self.shared.rejections} rejection(s) loaded"
        if self.bad or self.shared.bad:
            text += f", {len(self.bad) + len(self.shared.bad)} bad file(s) skipped (semula recordings check lists them)"
        return text


def recording_from_entry(entry: Entry) -> Recording:
    provenance = dict(entry.provenance or {})
    recorded_at = provenance.pop("recorded_at", None) or entry.updated_at or entry.created_at
    return Recording(
        **(entry.call_fields() | {"headers": [tuple(h) for h in entry.headers], "provenance": provenance or None}),
        request=entry.canonical,
        recorded_at=recorded_at.isoformat() if isinstance(recorded_at, datetime) else recorded_at,
        occurrence=occurrence_of(entry.request_fp),
    )


def relpath_of(entry: Entry) -> str:
    """Where the file of this recording is, relative to the folder."""
    if entry.kind == RecordingKind.REALTIME:
        return conversations.file_of(entry)[0]
    return request_path(entry.project, CanonicalRequest.from_json(entry.canonical), entry.request_fp)


def entry_from_file(raw: bytes, settings_for: Callable[[str], ProjectSettings],
                    key: FingerprintKey | None, sidecar: Callable[[SidecarRef], bytes] | None = None,
                    rel: str = "") -> NewEntry:
    """A recording file's bytes as the entry the store gets: validated, and redacted like live traffic.

    The loader and `semula recordings check` both run this, so check fails exactly where loading would.
    A file under `_realtime/` (`rel`) is a conversation. Raises RecordingFileError (or SettingsError,
    UnicodeDecodeError) naming the problem.
    """
    if conversations.in_folder(rel):
        return conversations.entry_from_file(raw, rel, sidecar)
    recording = loads(raw.decode("utf-8"), sidecar=sidecar)
    settings = settings_for(validate_project(recording.project))
    try:
        request = CanonicalRequest.from_json(redacted_request(recording.request, key))
    except (KeyError, TypeError, ValueError) as e:
        raise RecordingFileError(f"request: {e!r:.80}") from None
    answer = Answer(host=recording.host, body=recording.body, status=recording.status, headers=recording.headers,
                    streamed=recording.streamed, usage=Usage(recording.prompt_tokens, recording.completion_tokens),
                    upstream_ms=recording.upstream_ms, provenance=file_provenance(recording))
    return recording_of(recording.project, request, settings, answer, key=key, occurrence=recording.occurrence)


def file_provenance(recording: Recording) -> dict[str, str] | None:
    """What the store keeps of a file's provenance: its recorded_at too, so a load is not a re-recording."""
    out = {**(recording.provenance or {}), **({"recorded_at": recording.recorded_at} if recording.recorded_at else {})}
    return out or None


def claim(entry: NewEntry) -> str:
    """What two files must not both record: one request of one project."""
    return f"{entry.project}/{entry.request_fp}"


def load_each(root: Path, settings_for: Callable[[str], ProjectSettings] | None = None,
              key: FingerprintKey | None = None) -> Iterator[tuple[str, NewEntry | None, str | None]]:
    """(path, entry, None) for each file the loader would load, (path, None, problem) for each it would skip:
    what `check` counts and `semula recordings diff` compares. Secrets are tagged alike under one `key`."""
    settings_for, key, max_bytes = settings_for or (lambda _: ProjectSettings()), key or FingerprintKey.generate(), max_file_bytes()
    for found in scan(root):
        try:
            if found.problem is not None:
                raise UnsafePath(found.problem)
            yield found.rel, entry_from_file(read_capped(found.path, max_bytes), settings_for, key,
                                             sidecars.resolver(root, found.rel, max_bytes), found.rel), None
        except LOAD_ERRORS as e:
            yield found.rel, None, str(e)


def check(root: Path, settings_for: Callable[[str], ProjectSettings] | None = None, key: FingerprintKey | None = None,
          each: Callable[[str, NewEntry], None] = lambda _rel, _entry: None) -> tuple[int, list[tuple[str, str]]]:
    """(good files, [(relative path, problem)]) for `semula recordings check`: what the loader would skip,
    two files claiming one request included. `each` sees every good one (check lists error answers)."""
    good, bad = 0, []
    settings_for = settings_for or folder_settings_for(root)  # its `ignore` keys the recordings, as when loaded
    claims: dict[str, str] = {}
    for rel, entry, problem in load_each(root, settings_for, key):
        if entry is None:
            bad.append((rel, problem or "not loaded"))
            continue
        if (first := claims.setdefault(claim(entry), rel)) != rel:
            bad.append((rel, duplicate_problem(first)))
            continue
        each(rel, entry)
        good += 1
    shared_good, shared_bad = check_shared(root)
    return good + shared_good, bad + shared_bad


def duplicate_problem(first: str) -> str:
    return f"records the same request as {first}: delete one of them (this one is not loaded)"


class RecordingsFolder:
    def __init__(self, root: Path | str, data_dir: Path | str):
        self.root = Path(root).expanduser().resolve()
        self.manifest_path = Path(data_dir) / MANIFEST_FILE
        self.journal_path = Path(data_dir) / JOURNAL_FILE
        # relative path -> size, mtime_ns, sha256, entry_id, claim (project/request_fp)
        self.files: dict[str, dict[str, Any]] = {}
        self.unwritten: set[int] = set()  # stored entries whose file write failed: retried
        self.max_bytes = max_file_bytes()
        self.directories: dict[str, int] = {}  # each directory's mtime as last seen: `changed_on_disk`
        self.stopping: Callable[[int], bool] = lambda left: False  # (files left) true: SyncStopped raised
        self._load_manifest()

    def _load_manifest(self) -> None:
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return
        if isinstance(data, dict) and data.get("folder") == str(self.root) and isinstance(data.get("files"), dict):
            self.files = {rel: info for rel, info in data["files"].items() if _plain(rel) and _known(info)}
            self.unwritten = {i for i in data.get("unwritten") or () if isinstance(i, int)}

    def _save_manifest(self) -> None:
        try:
            write_atomically(self.manifest_path, json.dumps({"folder": str(self.root), "files": self.files,
                                                             "unwritten": sorted(self.unwritten)}), mode=0o600)
        except OSError as e:
            log.warning("semula: cannot write %s (%s); the next start re-reads every recording", self.manifest_path, e)

    def _remember(self, rel: str, path: Path, digest: str, entry_id: int, claimed: str | None) -> None:
        info = os.stat(path)
        self.files[rel] = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "sha256": digest,
                           "entry_id": entry_id, "claim": claimed}

    # --- the folder's salt ------------------------------------------------------------------

    def fingerprint_salt(self, default: bytes) -> bytes:
        """The salt keying redacted secrets' tags, committed in `_semula.json`; written from `default` if absent."""
        meta = self.root / META_FILE
        try:
            return bytes.fromhex(json.loads(read_capped(meta, 1 << 16).decode("utf-8"))["fingerprint_salt"])
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("semula: %s is unreadable (%s); using the store's salt", meta, e)
            return default
        try:
            ensure_ignores(self.root)  # before the first temporary file
            write_atomically(contained(self.root, META_FILE),
                             json.dumps({"format": FOLDER_FORMAT, "fingerprint_salt": default.hex()}, indent=2) + "\n")
        except OSError as e:
            log.warning("semula: cannot write %s (%s)", meta, e)
        return default

    # --- the proxy's writes ---------------------------------------------------------------

    def intend(self, entry: NewEntry) -> None:
        """Note, before the store has it, that this recording's file is due (a kill -9 in between is
        caught at the next start). Failing only logs: the write itself says what went wrong."""
        try:
            fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0),
                         0o600)
            try:
                os.write(fd, (claim(entry) + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def write(self, entry: Entry, save: bool = True) -> Path:
        if entry.kind == RecordingKind.REALTIME:
            rel, text, blobs = conversations.file_of(entry)
        else:
            rel = relpath_of(entry)
            text, blobs = dumps_with_sidecars(recording_from_entry(entry), sidecars.threshold())
        try:
            path = contained(self.root, rel)
            if make_directories(path.parent):
                path = contained(self.root, rel)  # again: a link planted while the directories were made
            ensure_ignores(self.root)  # before the first temporary file
            for _, data in blobs:  # first: the file never refers to a sidecar not there yet
                sidecars.write(self.root, rel.rpartition("/")[0], data)
            write_atomically(path, text)
        except OSError:
            self.unwritten.add(entry.id)
            if save:
                self._save_manifest()
            raise
        self.unwritten.discard(entry.id)
        self._saw_directory(path.parent)
        self._remember(rel, path, hashlib.sha256(text.encode()).hexdigest(), entry.id,
                       f"{entry.project}/{entry.request_fp}")
        if save:
            self._save_manifest()
        return path

    def write_unwritten(self, store: RecordingStore) -> int:
        """Write the files of stored recordings whose write failed; returns how many reached the folder."""
        written = 0
        for entry_id in sorted(self.unwritten):
            entry = store.get_entry(entry_id)
            if entry is None:
                self.unwritten.discard(entry_id)
                continue
            try:
                self.write(entry, save=False)
                written += 1
            except OSError:
                break  # still failing: the next recording retries
        self._save_manifest()
        if written:
            log.info("semula: %d recording(s) whose file could not be written earlier are now in %s",
                     written, self.root)
        return written

    def delete(self, entry_id: int) -> list[str]:
        gone = [rel for rel, info in self.files.items() if info.get("entry_id") == entry_id]
        for rel in gone:
            try:
                path = contained(self.root, rel)
                path.unlink(missing_ok=True)
                self._saw_directory(path.parent)
            except OSError as e:
                log.error("semula: recording file %s was not deleted: %s", self.root / rel, e)
            del self.files[rel]
        for directory in {rel.rpartition("/")[0] for rel in gone}:  # the sidecars only they referred to
            sidecars.prune(self.root, directory)
        if gone:
            self._save_manifest()
        return gone

    def write_shared(self, rel_and_text: tuple[str, str]) -> None:
        """An alias, a rejection or a project's settings (`recordings.shared`); failing only logs."""
        rel, text = rel_and_text
        try:
            path = contained(self.root, rel)
            ensure_ignores(self.root)  # before the first temporary file
            write_atomically(path, text)
            self._saw_directory(path.parent)
        except OSError as e:
            log.error("semula: cannot write %s (%s): teammates and CI will not see it", self.root / rel, e)

    def entry_of(self, rel: str) -> int | None:
        """The entry id of the recording file at `rel`, if it is loaded."""
        return (self.files.get(rel) or {}).get("entry_id")

    # --- files that change under a running proxy -------------------------------------------

    def changed_on_disk(self) -> bool:
        """Whether a directory of the folder changed since the last load, other than by this proxy's own
        writes (the watch polls this; a changed directory means a checkout or a pull touched its files)."""
        return self.root.is_dir() and directory_times(self.root) != self.directories

    def _saw_directory(self, directory: Path) -> None:
        """This proxy's own write or delete changed `directory`: not a change to load."""
        try:
            parent_times = {key: os.stat(path).st_mtime_ns for key, path in up_to(self.root, directory)}
        except (OSError, ValueError):
            return
        self.directories.update(parent_times)

    def changed_for(self, project: str, request: CanonicalRequest, request_fp: str) -> bool:
        """Whether the file this request would be recorded in exists and is not what was loaded (a branch
        switch or a pull put it there): one stat, before a miss is treated as one."""
        try:
            rel = request_path(project, request, request_fp)
            info = os.stat(contained(self.root, rel))
        except (OSError, RecordingFileError):
            return False
        known = self.files.get(rel)
        return known is None or (known["size"], known["mtime_ns"]) != (info.st_size, info.st_mtime_ns)

    # --- loading --------------------------------------------------------------------------

    def sync(self, store: RecordingStore, settings_for: Callable[[str], ProjectSettings],
             before_delete: Callable[[int], None] | None = None, key: FingerprintKey | None = None) -> SyncReport:
        """Load new and changed files into the store, remove the entries of deleted files, and write the
        files of stored recordings that never reached the folder."""
        report = SyncReport()
        load_settings(self.root, store, report.shared)  # first: recordings are fingerprinted under them
        if self.root.is_dir():
            remove_stale_temps(self.root)
            self.directories = directory_times(self.root)  # before the scan: a change during it is seen next time
        found = list(scan(self.root)) if self.root.is_dir() else []
        if not self.files and not any(f.problem is None for f in found):
            report.exported = self.export(store)  # an upgrade: the store's recordings become the first files
            if report.exported:
                return report
        seen: set[str] = set()
        claims: dict[str, str] = {}  # claim -> the file that has it
        pending: list[tuple[Found, str, NewEntry]] = []  # (file, digest, new entry)
        for done, item in enumerate(found):
            self._unless_stopping(len(found) - done)
            seen.add(item.rel)
            if item.problem is not None:
                self._bad(report, item.rel, item.problem)
                continue
            loaded = self._read_one(store, item, settings_for, key, report)
            if isinstance(loaded, str):
                claims.setdefault(loaded, item.rel)
            elif loaded is not None:
                pending.append(loaded)
        loads_now, dropped = [], set()
        for item, digest, new in pending:
            first = claims.setdefault(claim(new), item.rel)
            if first != item.rel:  # two files, one request: the first keeps it
                self._bad(report, item.rel, duplicate_problem(first))
                dropped.add(item.rel)
            else:
                loads_now.append((item, digest, new))
        loaded_ids = self._store_batches(store, loads_now, report)
        for rel in [r for r in self.files if r not in seen or r in dropped]:
            entry_id = self.files.pop(rel)["entry_id"]
            if entry_id not in loaded_ids and not any(info["entry_id"] == entry_id for info in self.files.values()):
                if before_delete is not None:  # e.g. log its open review candidates closed
                    before_delete(entry_id)
                store.delete_entry(entry_id)
                report.removed += 1
        self._resume_journal(store)
        report.written = self.write_unwritten(store) if self.unwritten else 0
        self._save_manifest()
        load_shared(self.root, store, self.entry_of, settings_for, report.shared)
        for rel, problem in report.shared.bad:
            log.warning("semula: %s skipped: %s", self.root / rel, problem)
        return report

    def _unless_stopping(self, left: int) -> None:
        if self.stopping(left):
            raise SyncStopped(f"the proxy stopped while loading {self.root}")

    def _bad(self, report: SyncReport, rel: str, problem: str) -> None:
        report.bad.append((rel, problem))
        log.warning("semula: recording %s skipped: %s", self.root / rel, problem)

    def _read_one(self, store: RecordingStore, item: Found, settings_for: Callable[[str], ProjectSettings],
                  key: FingerprintKey | None, report: SyncReport) -> str | tuple[Found, str, NewEntry] | None:
        """An unchanged file's claim, a changed file's new entry, or None (bad: reported)."""
        known = self.files.get(item.rel)
        try:
            info = os.stat(item.path)
            if known and known.get("claim") and (known["size"], known["mtime_ns"]) == (info.st_size, info.st_mtime_ns):
                report.unchanged += 1
                return known["claim"]
            raw = read_capped(item.path, self.max_bytes)
            digest = hashlib.sha256(raw).hexdigest()
            if known and known.get("claim") and known["sha256"] == digest and store.get_entry(known["entry_id"]):
                self._remember(item.rel, item.path, digest, known["entry_id"], known["claim"])
                report.unchanged += 1
                return known["claim"]
            return item, digest, entry_from_file(raw, settings_for, key,
                                                 sidecars.resolver(self.root, item.rel, self.max_bytes), item.rel)
        except LOAD_ERRORS as e:
            self._bad(report, item.rel, str(e))
            return None

    def _store_batches(self, store: RecordingStore, items: list[tuple[Found, str, NewEntry]],
                       report: SyncReport) -> set[int]:
        """Upsert in batches; a batch the store refuses is retried one recording at a time, so a bad
        file costs only itself. Every recording failing means the store itself failed: raised."""
        loaded: set[int] = set()
        for start in range(0, len(items), SYNC_BATCH):
            self._unless_stopping(len(items) - start)
            batch = items[start:start + SYNC_BATCH]
            try:
                ids = store.upsert_entries([new for _, _, new in batch])
                done = list(zip(batch, ids))
            except (StoreError, ValueError, TypeError, OverflowError) as batch_error:
                done = []
                for one in batch:
                    try:
                        done.append((one, store.upsert_entry(one[2])))
                    except (StoreError, ValueError, TypeError, OverflowError) as e:
                        self._bad(report, one[0].rel, f"the store refused it: {e}")
                if not done:
                    raise StoreError(str(batch_error)) from batch_error
            for (item, digest, new), entry_id in done:
                self._remember(item.rel, item.path, digest, entry_id, claim(new))
                loaded.add(entry_id)
            report.loaded += len(done)
        return loaded

    def _resume_journal(self, store: RecordingStore) -> None:
        """Recordings the journal says were being stored when the last process stopped: those stored
        without a file join `unwritten`. The journal then starts afresh."""
        try:
            lines = set(self.journal_path.read_text(encoding="utf-8").split())
        except (OSError, ValueError):
            return
        have = {info.get("claim") for info in self.files.values()}
        due = lines - have
        if due:
            for entry_id, project, request_fp, _ in store.index_rows():
                if f"{project}/{request_fp}" in due:
                    self.unwritten.add(entry_id)
        try:
            self.journal_path.unlink()
        except OSError:
            pass

    def export(self, store: RecordingStore) -> int:
        """Write every entry of the store as a file (`semula export`, and the first start after an upgrade)."""
        count = 0
        ids = sorted(entry_id for entry_id, *_ in store.index_rows())
        for start in range(0, len(ids), EXPORT_BATCH):  # a few at a time: one query each, a bounded memory
            batch = ids[start:start + EXPORT_BATCH]
            for entry in store.entries_between(batch[0], batch[-1]):  # (one stored meanwhile is exported too)
                try:
                    self.write(entry, save=False)
                    count += 1
                except (OSError, RecordingFileError) as e:
                    log.error("semula: recording #%s was not exported: %s", entry.id, e)
        self._save_manifest()
        return count


def _plain(rel: Any) -> bool:
    try:
        plain_relative(rel)
        return True
    except (UnsafePath, TypeError):
        return False


def _known(info: Any) -> bool:
    return isinstance(info, dict) and isinstance(info.get("entry_id"), int) and all(
        isinstance(info.get(k), int) for k in ("size", "mtime_ns")) and isinstance(info.get("sha256"), str)
