"""What a team shares beside the recordings: approved aliases, rejections and project settings.

One small file each, so two branches that approve, reject or configure different things never
touch the same file:

- `<project>/_aliases/<prompt-slug>-<hash>.json`: an approved review, the request and the recording
  file whose answer it gets;
- `<project>/_rejections/<prompt-slug>-<hash>.json`: a rejected pairing, never queued or served again;
- `<project>/_settings.json`: the project's settings (`semula config set`).

Like a recording, a file holds no fingerprint (they are recomputed from the request on load) and
points at a recording by its path in the folder, never by a store's entry id. Loaded after the
recordings by the folder's `sync`; written when a review is approved or rejected and a setting set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from semula.core.request.canonical import CanonicalRequest
from semula.core.tiers import Tier
from semula.core.settings import (FINGERPRINT_KEYS, ProjectSettings, SettingsError, parse_setting, setting_json,
                                  settings_in, validate_project)
from semula.recordings.entry import fingerprints_of
from semula.recordings.files import read_inside
from semula.recordings.format import slug
from semula.store.base import RecordingStore, ReviewRows
from semula.store.types import AliasRequest, NewCandidate

ALIASES_DIR = "_aliases"
REJECTIONS_DIR = "_rejections"
SETTINGS_FILE = "_settings.json"
ALIAS_FORMAT = "semula-alias/1"
REJECTION_FORMAT = "semula-rejection/1"
SETTINGS_FORMAT = "semula-settings/1"


@dataclass
class SharedReport:
    aliases: int = 0  # aliases loaded or changed
    rejections: int = 0  # rejections new to the store
    settings_changed: set[str] = field(default_factory=set)  # projects whose fingerprint inputs changed
    bad: list[tuple[str, str]] = field(default_factory=list)  # (relative path, problem)


def _name(request: dict[str, Any], *parts: str) -> str:
    canonical = CanonicalRequest.from_json(request)
    digest = hashlib.sha256("\n".join([json.dumps(request, sort_keys=True), *parts]).encode()).hexdigest()[:12]
    return f"{slug(canonical.last_user_text() or canonical.last_text())}-{digest}.json"


def _text(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


# ---------------------------------------------------------------- writing


def alias_file(project: str, request: dict[str, Any], recording: str) -> tuple[str, str]:
    """(relative path, text) of an approved alias: `request` gets the answer of the file `recording`."""
    rel = f"{project}/{ALIASES_DIR}/{_name(request)}"
    return rel, _text({"format": ALIAS_FORMAT, "project": project, "request": request, "recording": recording})


def rejection_file(project: str, request: dict[str, Any], recording: str, tier: str, score: float,
                   reason: str | None) -> tuple[str, str]:
    rel = f"{project}/{REJECTIONS_DIR}/{_name(request, recording)}"
    return rel, _text({"format": REJECTION_FORMAT, "project": project, "request": request, "recording": recording,
                       "tier": tier, "score": score, "reason": reason})


def settings_file(project: str, values: dict[str, Any]) -> tuple[str, str]:
    return f"{project}/{SETTINGS_FILE}", _text({"format": SETTINGS_FORMAT, "project": project, "settings": values})


# ---------------------------------------------------------------- loading


def _read(path: Path, fmt: str, root: Path) -> dict[str, Any]:
    text = read_inside(root, path).decode("utf-8")
    if "\n<<<<<<< " in f"\n{text}":
        raise ValueError("a git conflict marker: resolve the conflict")
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise ValueError(f"not a {fmt} file")
    validate_project(str(data.get("project")))
    return data


def load_shared(root: Path, store: RecordingStore, entry_of: Callable[[str], int | None],
                settings_for: Callable[[str], ProjectSettings], report: SharedReport) -> None:
    """Aliases and rejections, after the recordings loaded (`entry_of(path of a recording file)` → its entry id)."""
    aliases: dict[str, dict[str, AliasRequest]] = {}
    for path in sorted(root.glob(f"*/{ALIASES_DIR}/*.json")):
        try:
            data = _read(path, ALIAS_FORMAT, root)
            entry_id = entry_of(str(data["recording"]))
            if entry_id is None:
                raise ValueError(f"its recording {data['recording']} is not in the folder")
            project = data["project"]
            _, fp = fingerprints_of(CanonicalRequest.from_json(data["request"]), settings_for(project))
            aliases.setdefault(project, {})[fp] = AliasRequest(fp, entry_id, data["request"])
        except (OSError, ValueError, KeyError, TypeError, SettingsError) as e:
            report.bad.append((str(path.relative_to(root)), str(e)))
    for project, by_fp in aliases.items():
        current = {alias.normalised_fp: alias for alias in store.alias_requests(project)}
        changed = [fp for fp, alias in by_fp.items() if fp not in current or current[fp].entry_id != alias.entry_id]
        if changed:
            store.replace_aliases(project, list({**current, **by_fp}.values()))
            report.aliases += len(changed)
    for path in sorted(root.glob(f"*/{REJECTIONS_DIR}/*.json")):
        try:
            report.rejections += _load_rejection(store, _read(path, REJECTION_FORMAT, root), entry_of, settings_for)
        except (OSError, ValueError, KeyError, TypeError, SettingsError) as e:
            report.bad.append((str(path.relative_to(root)), str(e)))


def _load_rejection(store: ReviewRows, data: dict[str, Any], entry_of: Callable[[str], int | None],
                    settings_for: Callable[[str], ProjectSettings]) -> int:
    entry_id = entry_of(str(data["recording"]))
    if entry_id is None:
        return 0  # the recording is gone: nothing left to reject
    project, request = data["project"], CanonicalRequest.from_json(data["request"])
    request_fp, fp = fingerprints_of(request, settings_for(project))
    status = store.paired_entries(project, fp).get(entry_id)
    if status == "rejected":
        return 0
    open_ids = [c.id for c in store.open_candidates_for(project, fp) if c.entry_id == entry_id]
    if not open_ids:
        rows = store.add_candidates(project, request_fp, fp, data["request"], request.last_user_text(), [
            NewCandidate(str(data.get("tier") or Tier.LEXICAL.value), float(data.get("score") or 0.0), None,
                         data.get("reason"), entry_id)])
        open_ids = [row.id for row in rows]
    store.set_candidate_status(open_ids, "rejected")
    return 1


def _settings_files(root: Path, bad: list[tuple[str, str]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(project, {key: parsed value}) of each good `<project>/_settings.json`; a bad one goes in `bad`."""
    for path in sorted(root.glob(f"*/{SETTINGS_FILE}")):
        try:
            data = _read(path, SETTINGS_FORMAT, root)
            project, values = data["project"], data["settings"]
            if not isinstance(values, dict):
                raise ValueError("settings is not an object")
            parsed = {key: parse_setting(key, value) for key, value in values.items()}
        except (OSError, ValueError, KeyError, TypeError, SettingsError) as e:
            bad.append((str(path.relative_to(root)), str(e)))
            continue
        yield project, parsed


def load_settings(root: Path, store: RecordingStore, report: SharedReport) -> None:
    """Each `<project>/_settings.json` into the store; the projects whose fingerprint inputs changed go in `report`."""
    for project, values in _settings_files(root, report.bad):
        current = store.project_settings(project)
        for key, parsed in values.items():
            stored = setting_json(parsed)
            if current.get(key) != stored:
                store.set_project_setting(project, key, stored)
                if key in FINGERPRINT_KEYS:
                    report.settings_changed.add(project)


def folder_settings(root: Path) -> dict[str, ProjectSettings]:
    """Each project's settings as its `_settings.json` holds them: what the loader fingerprints a fresh
    clone's recordings under (`check` uses them too, so it fails where the loader would skip)."""
    return {project: replace(ProjectSettings(), **values) for project, values in _settings_files(root, [])}


def folder_settings_for(root: Path) -> Callable[[str], ProjectSettings] | None:
    """`folder_settings` as a lookup by project (a test-scoped one has its base's); None when the folder
    declares no settings."""
    settings = folder_settings(root)
    return (lambda project: settings_in(settings, project)) if settings else None


def check_shared(root: Path) -> tuple[int, list[tuple[str, str]]]:
    """(good files, [(relative path, problem)]) of the aliases, rejections and settings (`semula recordings check`)."""
    good, bad = 0, []
    for pattern, fmt in ((f"*/{ALIASES_DIR}/*.json", ALIAS_FORMAT), (f"*/{REJECTIONS_DIR}/*.json", REJECTION_FORMAT)):
        for path in sorted(root.glob(pattern)):
            try:
                _read(path, fmt, root)
                good += 1
            except (OSError, ValueError, SettingsError) as e:
                bad.append((str(path.relative_to(root)), str(e)))
    good += sum(1 for _ in _settings_files(root, bad))  # their values too, as the loader reads them
    return good, bad
