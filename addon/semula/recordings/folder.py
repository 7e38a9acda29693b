"""The recordings folder: the portable, versioned form of the store that people commit.

The DuckDB store stays the store and index (hits, FTS, vectors); this folder is what travels.
At start the folder is loaded into the store incrementally: files unchanged since the last load
(size and modification time, then a content hash) are skipped, changed ones re-imported, and
the entries of removed files removed. Only entries that came from this folder are ever removed:
the manifest (in the data dir) remembers which. A recording the proxy makes is written here
atomically (a temporary file, then a rename), so a crash never leaves a half file.
A bad file (invalid JSON, a conflict marker, a missing field) is reported and skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from semula.core.canonical import CanonicalRequest
from semula.core.repeats import base_of, occurrence_of
from semula.core.settings import ProjectSettings, SettingsError, validate_project
from semula.providers.base import Usage
from semula.recordings.entry import recording_of
from semula.recordings.format import Recording, RecordingFileError, dumps, loads, relative_path
from semula.recordings.shared import SharedReport, check_shared, load_settings, load_shared
from semula.store.base import RecordingStore
from semula.store.types import Entry

log = logging.getLogger("semula")

MANIFEST_FILE = "recordings-manifest.json"
META_FILE = "_semula.json"  # the folder's format and the salt of secrets' tags: commit it with the recordings
FOLDER_FORMAT = "semula-recordings/1"
GITATTRIBUTES = "*.json linguist-generated=true\n"
SKIPPED_PREFIX = ("_", ".")
SYNC_BATCH = 2000  # recordings per store transaction when loading  # folder metadata (_semula.json), editor and git files


@dataclass
class SyncReport:
    loaded: int = 0
    unchanged: int = 0
    removed: int = 0
    bad: list[tuple[str, str]] = field(default_factory=list)  # (relative path, problem)
    exported: int = 0
    shared: SharedReport = field(default_factory=SharedReport)  # aliases, rejections, settings

    def line(self, root: Path) -> str:
        text = (f"semula: recordings {root}: {self.loaded} loaded, {self.unchanged} unchanged, "
                f"{self.removed} removed")
        if self.exported:
            text += f", {self.exported} exported from the store"
        if self.shared.aliases or self.shared.rejections:
            text += f", {self.shared.aliases} alias(es) and {self.shared.rejections} rejection(s) loaded"
        if self.bad or self.shared.bad:
            text += f", {len(self.bad) + len(self.shared.bad)} bad file(s) skipped (semula recordings check lists them)"
        return text


def recording_from_entry(entry: Entry) -> Recording:
    recorded_at = entry.updated_at or entry.created_at
    return Recording(
        project=entry.project, provider=entry.provider, host=entry.host, method=entry.method,
        endpoint=entry.endpoint, model=entry.model, request=entry.canonical, status=entry.status,
        headers=[tuple(h) for h in entry.headers], body=entry.body, streamed=entry.streamed,
        prompt_tokens=entry.prompt_tokens, completion_tokens=entry.completion_tokens,
        upstream_ms=entry.upstream_ms,
        recorded_at=recorded_at.isoformat() if isinstance(recorded_at, datetime) else recorded_at,
        occurrence=occurrence_of(entry.request_fp),
    )


def relpath_of(entry: Entry) -> str:
    """Where the file of this recording is, relative to the folder."""
    request = CanonicalRequest.from_json(entry.canonical)
    return relative_path(entry.project, entry.provider, entry.endpoint, request.last_user_text() or request.last_text(),
                         base_of(entry.request_fp), occurrence_of(entry.request_fp))


def iter_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.json")):
        rel = path.relative_to(root)
        if not any(part.startswith(SKIPPED_PREFIX) for part in rel.parts):
            yield path


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check(root: Path) -> tuple[int, list[tuple[str, str]]]:
    """(good files, [(relative path, problem)]) for `semula recordings check`."""
    good, bad = 0, []
    for path in iter_files(root):
        try:
            loads(path.read_text(encoding="utf-8"))
            good += 1
        except (RecordingFileError, UnicodeDecodeError, OSError) as e:
            bad.append((str(path.relative_to(root)), str(e)))
    shared_good, shared_bad = check_shared(root)
    return good + shared_good, bad + shared_bad


class RecordingsFolder:
    def __init__(self, root: Path | str, data_dir: Path | str):
        self.root = Path(root).expanduser().resolve()
        self.manifest_path = Path(data_dir) / MANIFEST_FILE
        self.files: dict[str, dict[str, Any]] = {}  # relative path -> size, mtime_ns, sha256, entry_id
        self._load_manifest()

    def _load_manifest(self) -> None:
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("folder") == str(self.root) and isinstance(data.get("files"), dict):
            self.files = data["files"]

    def _save_manifest(self) -> None:
        try:
            write_atomically(self.manifest_path, json.dumps({"folder": str(self.root), "files": self.files}))
        except OSError as e:
            log.warning("semula: cannot write %s (%s); the next start re-reads every recording", self.manifest_path, e)

    def _remember(self, rel: str, path: Path, digest: str, entry_id: int) -> None:
        stat = path.stat()
        self.files[rel] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest, "entry_id": entry_id}

    # --- the folder's salt ------------------------------------------------------------------

    def fingerprint_salt(self, default: bytes) -> bytes:
        """The salt keying redacted secrets' tags, committed in `_semula.json`; written from `default` if absent."""
        meta = self.root / META_FILE
        try:
            return bytes.fromhex(json.loads(meta.read_text(encoding="utf-8"))["fingerprint_salt"])
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("semula: %s is unreadable (%s); using the store's salt", meta, e)
            return default
        try:
            write_atomically(meta, json.dumps({"format": FOLDER_FORMAT, "fingerprint_salt": default.hex()},
                                              indent=2) + "\n")
        except OSError as e:
            log.warning("semula: cannot write %s (%s)", meta, e)
        return default

    # --- the proxy's writes ---------------------------------------------------------------

    def write(self, entry: Entry, save: bool = True) -> Path:
        rel = relpath_of(entry)
        text = dumps(recording_from_entry(entry))
        path = self.root / rel
        write_atomically(path, text)
        self._ensure_gitattributes()
        self._remember(rel, path, hashlib.sha256(text.encode()).hexdigest(), entry.id)
        if save:
            self._save_manifest()
        return path

    def delete(self, entry_id: int) -> list[str]:
        gone = [rel for rel, info in self.files.items() if info.get("entry_id") == entry_id]
        for rel in gone:
            (self.root / rel).unlink(missing_ok=True)
            del self.files[rel]
        if gone:
            self._save_manifest()
        return gone

    def write_shared(self, rel_and_text: tuple[str, str]) -> None:
        """An alias, a rejection or a project's settings (`recordings.shared`); failing only logs."""
        rel, text = rel_and_text
        try:
            write_atomically(self.root / rel, text)
        except OSError as e:
            log.error("semula: cannot write %s (%s): teammates and CI will not see it", self.root / rel, e)

    def entry_of(self, rel: str) -> int | None:
        """The entry id of the recording file at `rel`, if it is loaded."""
        return (self.files.get(rel) or {}).get("entry_id")

    def _ensure_gitattributes(self) -> None:
        path = self.root / ".gitattributes"
        if not path.exists():
            write_atomically(path, GITATTRIBUTES)

    # --- loading --------------------------------------------------------------------------

    def sync(self, store: RecordingStore, settings_for: Callable[[str], ProjectSettings],
             before_delete: Callable[[int], None] | None = None) -> SyncReport:
        """Load new and changed files into the store, remove the entries of deleted files."""
        report = SyncReport()
        load_settings(self.root, store, report.shared)  # first: recordings are fingerprinted under them
        if not self.files and (not self.root.is_dir() or not any(iter_files(self.root))):
            report.exported = self.export(store)  # an upgrade: the store's recordings become the first files
            if report.exported:
                return report
        seen = set()
        pending: list[tuple[str, Path, str, Any]] = []  # (relative path, path, digest, new entry)
        for path in iter_files(self.root):
            rel = str(path.relative_to(self.root))
            seen.add(rel)
            known = self.files.get(rel)
            try:
                stat = path.stat()
                if known and (known["size"], known["mtime_ns"]) == (stat.st_size, stat.st_mtime_ns):
                    report.unchanged += 1
                    continue
                raw = path.read_bytes()
                digest = hashlib.sha256(raw).hexdigest()
                if known and known["sha256"] == digest and store.get_entry(known["entry_id"]) is not None:
                    self._remember(rel, path, digest, known["entry_id"])
                    report.unchanged += 1
                    continue
                recording = loads(raw.decode("utf-8"))
                validate_project(recording.project)
                pending.append((rel, path, digest, self._new_entry(recording, settings_for(recording.project))))
            except (RecordingFileError, SettingsError, UnicodeDecodeError, OSError, KeyError, TypeError,
                    ValueError) as e:
                report.bad.append((rel, str(e)))
                log.warning("semula: recording %s skipped: %s", path, e)
                continue
        for start in range(0, len(pending), SYNC_BATCH):
            batch = pending[start:start + SYNC_BATCH]
            for (rel, path, digest, _), entry_id in zip(batch, store.upsert_entries([b[3] for b in batch])):
                self._remember(rel, path, digest, entry_id)
            report.loaded += len(batch)
        for rel in [r for r in self.files if r not in seen]:
            entry_id = self.files.pop(rel)["entry_id"]
            if not any(info["entry_id"] == entry_id for info in self.files.values()):
                if before_delete is not None:  # e.g. log its open review candidates closed
                    before_delete(entry_id)
                store.delete_entry(entry_id)
                report.removed += 1
        self._save_manifest()
        load_shared(self.root, store, self.entry_of, settings_for, report.shared)
        for rel, problem in report.shared.bad:
            log.warning("semula: %s skipped: %s", self.root / rel, problem)
        return report

    @staticmethod
    def _new_entry(recording: Recording, settings: ProjectSettings):
        request = CanonicalRequest.from_json(recording.request)
        return recording_of(
            recording.project, request, settings, host=recording.host, body=recording.body,
            status=recording.status, headers=recording.headers, streamed=recording.streamed,
            usage=Usage(recording.prompt_tokens, recording.completion_tokens), upstream_ms=recording.upstream_ms,
            occurrence=recording.occurrence,
        )

    def export(self, store: RecordingStore) -> int:
        """Write every entry of the store as a file (`semula export`, and the first start after an upgrade)."""
        count = 0
        for entry_id, *_ in sorted(store.index_rows()):  # ids only: the entries are read one at a time
            entry = store.get_entry(entry_id)
            if entry is not None:
                self.write(entry, save=False)
                count += 1
        self._save_manifest()
        return count
