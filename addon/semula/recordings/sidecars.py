"""Sidecar files: a recording's large binary body, beside its JSON, named by its content.

A TTS answer or a downloaded file is megabytes of bytes no one reads in a diff: above a threshold
(64 KiB, SEMULA_SIDECAR_KB) it is written as `<kind>-<sha256 prefix>.bin` in the recording file's own
directory, and the JSON holds a reference `{"sha256", "size", "file"}` under a key ending in
`_sidecar` (`response.body_sidecar` for an answer). The name is a function of the bytes alone
(`kind` is sniffed from them), so the same bytes in one directory are one file, shared by every
recording there that refers to them.

A reference arrives from a pull request, so it is hostile: it names only a file in the recording's
own directory whose name is exactly the content-addressed name (no `/`, no `..`, no link), a regular
file of the stated size under the size cap, whose sha256 is the stated one. A reference that fails
any of these costs only its own recording (`SidecarError` names why).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semula.recordings.files import (
    UnsafePath, contained, make_directories, max_file_bytes, read_capped, scan, write_bytes_atomically,
)

DEFAULT_THRESHOLD = 64 * 1024
SUFFIX = ".bin"
HASH_CHARS = 16  # of the sha256 in the name; the reference holds all 64
_NAME = re.compile(r"^(?P<kind>[a-z0-9]{1,12})-(?P<prefix>[0-9a-f]{16})\.bin$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# Magic numbers, first match wins: a readable hint of what the bytes are, nothing more.
_KINDS: tuple[tuple[str, Callable[[bytes], bool]], ...] = (
    ("mp3", lambda b: b[:3] == b"ID3" or (len(b) > 1 and b[0] == 0xFF and b[1] & 0xE0 == 0xE0)),
    ("wav", lambda b: b[:4] == b"RIFF" and b[8:12] == b"WAVE"),
    ("ogg", lambda b: b[:4] == b"OggS"),
    ("flac", lambda b: b[:4] == b"fLaC"),
    ("webm", lambda b: b[:4] == b"\x1a\x45\xdf\xa3"),
    ("png", lambda b: b[:8] == b"\x89PNG\r\n\x1a\n"),
    ("jpeg", lambda b: b[:3] == b"\xff\xd8\xff"),
    ("gif", lambda b: b[:6] in (b"GIF87a", b"GIF89a")),
    ("webp", lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP"),
    ("pdf", lambda b: b[:5] == b"%PDF-"),
    ("zip", lambda b: b[:4] == b"PK\x03\x04"),
)


class SidecarError(ValueError):
    """A sidecar reference or file that cannot be used; the recording referring to it is not loaded."""


@dataclass(frozen=True)
class SidecarRef:
    """A recording's pointer to its sidecar: the bytes' full sha256, their size, and the file's name."""

    sha256: str
    size: int
    file: str

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "size": self.size, "file": self.file}

    @classmethod
    def from_json(cls, value: Any, where: str = "sidecar") -> SidecarRef:
        if (problem := reference_problem(value, where)) is not None:
            raise SidecarError(problem)
        return cls(value["sha256"], value["size"], value["file"])


def kind_of(data: bytes) -> str:
    return next((name for name, test in _KINDS if test(data)), "data")


def sidecar_name(data: bytes) -> str:
    """`<kind>-<sha256 prefix>.bin`: a function of the bytes alone."""
    return f"{kind_of(data)}-{hashlib.sha256(data).hexdigest()[:HASH_CHARS]}{SUFFIX}"


def ref_for(data: bytes) -> SidecarRef:
    return SidecarRef(hashlib.sha256(data).hexdigest(), len(data), sidecar_name(data))


def threshold(environ: os._Environ[str] | dict[str, str] = os.environ) -> int:
    """Bodies larger than this many bytes go to a sidecar: SEMULA_SIDECAR_KB, else 64 KiB."""
    value = environ.get("SEMULA_SIDECAR_KB", "").strip()
    try:
        return max(0, int(float(value) * 1024)) if value else DEFAULT_THRESHOLD
    except ValueError:
        return DEFAULT_THRESHOLD


def is_reference_key(key: Any) -> bool:
    return isinstance(key, str) and key.endswith("_sidecar")


def reference_problem(value: Any, where: str = "sidecar", max_bytes: int | None = None) -> str | None:
    """Why `value` is not a sidecar reference a recording may hold, or None. Pure: no file is touched."""
    if not isinstance(value, dict) or set(value) != {"sha256", "size", "file"}:
        return f"{where} is not an object of exactly sha256, size and file"
    sha, size, name = value["sha256"], value["size"], value["file"]
    if not isinstance(sha, str) or not _SHA256.match(sha):
        return f"{where}.sha256 {sha!r:.80} is not 64 lower-case hex digits"
    cap = max_file_bytes() if max_bytes is None else max_bytes
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= cap:
        return f"{where}.size {size!r:.40} is not a number of bytes from 0 to the {cap // (1024 * 1024)} MB cap"
    match = _NAME.match(name) if isinstance(name, str) else None
    if match is None:
        return (f"{where}.file {name!r:.80} is not a sidecar name (<kind>-<16 hex>.bin, in the recording's own "
                "directory: no path, no '..')")
    if match.group("prefix") != sha[:HASH_CHARS]:
        return f"{where}.file {name!r:.80} is not the name of sha256 {sha[:HASH_CHARS]}…"
    return None


def references(doc: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) in a parsed recording whose key ends in `_sidecar`, valid or not."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if is_reference_key(key):
                    yield key, value
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


# ---------------------------------------------------------------- the folder's files


def read(root: Path, directory: str, ref: SidecarRef, max_bytes: int | None = None) -> bytes:
    """The bytes of `ref`, a sidecar in `directory` (relative to `root`), checked against the reference."""
    rel = f"{directory}/{ref.file}" if directory else ref.file
    cap = max_file_bytes() if max_bytes is None else max_bytes
    try:
        path = contained(root, rel)
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise SidecarError(f"sidecar {ref.file} is a symbolic link: sidecars are read only as regular files")
        if stat.S_ISREG(info.st_mode) and info.st_size != ref.size:
            raise SidecarError(f"sidecar {ref.file} has {info.st_size} bytes, the recording says {ref.size}")
        data = read_capped(path, cap)
    except FileNotFoundError:
        raise SidecarError(f"sidecar {ref.file} is missing (it is committed beside the recording)") from None
    except (UnsafePath, OSError) as e:
        raise SidecarError(f"sidecar {ref.file}: {e}") from None
    if len(data) != ref.size:
        raise SidecarError(f"sidecar {ref.file} has {len(data)} bytes, the recording says {ref.size}")
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise SidecarError(f"sidecar {ref.file}: its sha256 is not the recording's (changed or corrupted)")
    if sidecar_name(data) != ref.file:
        raise SidecarError(f"sidecar {ref.file} is not named for its bytes ({sidecar_name(data)})")
    return data


def resolver(root: Path, rel: str, max_bytes: int | None = None) -> Callable[[SidecarRef], bytes]:
    """What `format.loads` calls to read the sidecars of the recording file at `rel`."""
    directory = rel.rpartition("/")[0]
    return lambda ref: read(root, directory, ref, max_bytes)


def write(root: Path, directory: str, data: bytes) -> SidecarRef:
    """Store `data` as a sidecar in `directory` (relative to `root`), once: a file already holding these
    bytes is left alone. Never through a link (a link at the name is replaced)."""
    ref = ref_for(data)
    rel = f"{directory}/{ref.file}" if directory else ref.file
    path = contained(root, rel)
    try:
        if read(root, directory, ref) == data:
            return ref
    except SidecarError:
        pass
    make_directories(path.parent)
    write_bytes_atomically(contained(root, rel), data)
    return ref


def referenced_names(root: Path, directory: str | None = None) -> dict[str, set[str]]:
    """Each directory of the folder (or only `directory`) and the sidecar names its recording files refer
    to, parsed leniently: a bad file's references still keep their sidecars."""
    base = root
    names: dict[str, set[str]] = {directory: set()} if directory is not None else {}
    if directory:
        base = contained(root, directory)
        if not base.is_dir() or base.is_symlink():
            return names
    for found in scan(base):
        rel = f"{directory}/{found.rel}" if directory else found.rel
        here = rel.rpartition("/")[0]
        names.setdefault(here, set())
        if found.problem is not None:
            continue
        try:
            doc = json.loads(read_capped(found.path, max_file_bytes()).decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        names[here] |= _names_in(doc)
    if directory is None:  # folders the recordings scan skips (`_realtime/<project>/`) refer to sidecars too
        for here in _directories(root):
            if here.startswith("_") and here not in names:
                names[here] = _referenced_in(root / here)
    return names


def _names_in(doc: Any) -> set[str]:
    return {v["file"] for _, v in references(doc) if isinstance(v, dict) and isinstance(v.get("file"), str)}


def _referenced_in(directory: Path) -> set[str]:
    """The sidecar names the JSON files of one directory (not below it) refer to, read leniently."""
    names: set[str] = set()
    try:
        entries = [e for e in os.scandir(directory) if e.name.endswith(".json") and not e.name.startswith(".")]
    except OSError:
        return names
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                names |= _names_in(json.loads(read_capped(Path(entry.path), max_file_bytes()).decode("utf-8")))
        except (OSError, ValueError, RecursionError):
            continue
    return names


def unreferenced(root: Path, directory: str | None = None) -> list[str]:
    """Sidecar files (relative paths) no recording file in their directory refers to: in the whole folder,
    or in `directory` only."""
    if directory is not None and not _has_sidecars(root / directory if directory else root):
        return []  # most directories (chat recordings) have none: their files are not read
    names = referenced_names(root, directory)
    out = []
    for here in [directory] if directory is not None else _directories(root):
        try:
            entries = list(os.scandir(root / here if here else root))
        except OSError:
            continue
        for entry in entries:
            if _NAME.match(entry.name) and entry.name not in names.get(here, set()) and not entry.is_dir(
                    follow_symlinks=False):
                out.append(f"{here}/{entry.name}" if here else entry.name)
    return sorted(out)


def _has_sidecars(directory: Path) -> bool:
    try:
        return any(_NAME.match(entry.name) for entry in os.scandir(directory))
    except OSError:
        return False


def _directories(root: Path) -> Iterator[str]:
    for directory, dirs, _ in os.walk(root):  # never follows a link to a directory
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        rel = Path(directory).relative_to(root).as_posix()
        yield "" if rel == "." else rel


def prune(root: Path, directory: str | None = None) -> list[str]:
    """Delete the sidecars no recording refers to (in `directory`, else everywhere); their paths."""
    removed = []
    for rel in unreferenced(root, directory):
        try:
            contained(root, rel).unlink()
            removed.append(rel)
        except OSError:
            pass
    return removed
