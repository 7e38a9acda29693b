"""Where Realtime recordings live, and the only code here that reads or writes them.

In the recordings folder they sit in `_realtime/<project>/` (the leading `_` keeps them out of the
request/answer scan, like `_aliases/`), each `<slug>-<hash>.json` beside its audio sidecar; with the
folder off they go to the data dir's `realtime/<project>/`. Paths are built only from a validated
project name and a hash, and checked to stay under the root; files are read as regular files under
the size cap, and a bad one is skipped with one log line naming why.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from semula.core.settings import PROJECT_NAME
from semula.realtime import fileformat
from semula.realtime.conversation import Conversation
from semula.recordings import sidecars
from semula.recordings.files import (
    UnsafePath, contained, make_directories, max_file_bytes, read_capped, write_atomically,
)
from semula.recordings.format import RecordingFileError

log = logging.getLogger("semula")

FOLDER_DIR = "_realtime"  # inside the recordings folder
DATA_DIR = "realtime"  # inside the data dir, when the recordings folder is off
_SLUG = re.compile(r"[^a-z0-9]+")


def root_of(recordings: str | None, data_dir: str) -> Path:
    return Path(recordings) / FOLDER_DIR if recordings else Path(data_dir) / DATA_DIR


def file_name(conversation: Conversation) -> str:
    model = dict(p.split("=", 1) for p in conversation.url.partition("?")[2].split("&") if "=" in p).get("model", "")
    slug = _SLUG.sub("-", f"realtime {model}".lower()).strip("-")[:48]
    return f"{slug}-{conversation.identity[:12]}.json"


def write(root: Path, conversation: Conversation) -> Path:
    """Write the conversation (its sidecar first), replacing an earlier recording of the same one.

    Only what the loader accepts is written: a file or sidecar over the size cap, or a document it
    refuses, raises `RecordingFileError` naming why, and nothing is written."""
    if not PROJECT_NAME.match(conversation.project):
        raise UnsafePath(f"{conversation.project!r} is not a project name")
    text, audio = fileformat.dumps(conversation, sidecars.ref_for)
    loadable(text, audio)
    if audio:
        sidecars.write(root, conversation.project, audio)
    path = contained(root, f"{conversation.project}/{file_name(conversation)}")
    make_directories(path.parent)
    write_atomically(path, text)
    return path


def loadable(text: str, audio: bytes) -> None:
    """Raise `RecordingFileError` unless the loader would take this file and its sidecar."""
    cap, size = max_file_bytes(), len(text.encode())
    for what, length in (("file", size), ("audio sidecar", len(audio))):
        if length > cap:
            raise RecordingFileError(f"its {what} would be {length / (1024 * 1024):.1f} MB, over the "
                                     f"{cap // (1024 * 1024)} MB a recording may have (SEMULA_RECORDING_MAX_MB)")
    fileformat.loads(text, lambda _ref: audio)


def load(root: Path, project: str) -> list[Conversation]:
    """Every loadable recording of `project`, newest file first; a bad file is skipped with a log line."""
    loaded = []
    for found in _read(root, project):
        if found.problem is not None:
            log.warning("semula: realtime recording %s skipped: %s", root / found.rel, found.problem)
        elif found.conversation is not None:
            loaded.append((found.mtime, found.conversation))
    return [c for _, c in sorted(loaded, key=lambda pair: -pair[0])]


@dataclass(frozen=True)
class Found:
    """One recording file under the root (`rel`: `<project>/<name>.json`): its conversation, or why not."""

    rel: str
    conversation: Conversation | None
    problem: str | None
    mtime: float = 0.0


def files(root: Path) -> list[Found]:
    """Every recording file of every project under the root, loaded or with its problem: for
    `semula recordings check` and `unused`. A directory that is not a project name is a problem too."""
    try:
        projects = sorted(e.name for e in os.scandir(root) if not e.name.startswith("."))
    except OSError:
        return []
    out: list[Found] = []
    for project in projects:
        if not PROJECT_NAME.match(project) or not (root / project).is_dir() or (root / project).is_symlink():
            out.append(Found(project, None, "not a project directory (a project name, not a link)"))
            continue
        out.extend(_read(root, project))
    return out


def _read(root: Path, project: str) -> list[Found]:
    if not PROJECT_NAME.match(project):
        return []
    try:
        directory = contained(root, project)
        entries = [e for e in os.scandir(directory) if e.name.endswith(".json") and not e.name.startswith((".", "_"))]
    except (OSError, UnsafePath):
        return []
    out = []
    for entry in sorted(entries, key=lambda e: e.name):
        rel = f"{project}/{entry.name}"
        try:
            if not entry.is_file(follow_symlinks=False):
                raise RecordingFileError("not a regular file (links and devices are never read)")
            text = read_capped(Path(entry.path), max_file_bytes()).decode()
            conversation = fileformat.loads(text, sidecars.resolver(root, rel))
            if conversation.project != project:
                raise RecordingFileError(f"its project is {conversation.project!r}, not the folder's {project!r}")
            out.append(Found(rel, conversation, None, entry.stat(follow_symlinks=False).st_mtime))
        except (RecordingFileError, UnicodeDecodeError, OSError, UnsafePath) as e:
            out.append(Found(rel, None, str(e)))
    return out
