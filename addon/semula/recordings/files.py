"""The recordings folder as a work tree: what semula reads, writes and deletes there, and nothing else.

The folder arrives from pull requests, branch switches and merges, so it is treated the way git
treats a work tree:
- a path is built only from validated names, and checked to lie under the folder;
- a symbolic link to a directory is never written or deleted through, nor descended into;
- a linked file is read only when the link stays inside the folder and names a regular file;
- only regular files are read (never a FIFO, a device or a socket), up to a size cap;
- a write goes to a temporary file beside its target, then a rename; the file gets the user's
  umask (0644 under 022), as git would give it. Temporary files a killed writer left behind are
  removed, and the folder's own `.gitignore` keeps them out of `git add`.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path, PurePosixPath

SKIPPED_PREFIX = ("_", ".")  # folder metadata (_semula.json), editor and git files
KIND_DIRS = ("_realtime",)  # the folders of the other kinds of recording (`conversations.FOLDER_DIR`): scanned too
TEMP_PREFIX = ".tmp-"
GITIGNORE = f"# semula: a write interrupted by a crash leaves its temporary file\n{TEMP_PREFIX}*\n"
GITATTRIBUTES = "*.json linguist-generated=true\n"
STALE_TEMP_SECONDS = 600.0  # older than any write in progress: a killed writer's
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # a recording file's size cap (SEMULA_RECORDING_MAX_MB)
LINKED_DIRECTORY = ("a symbolic link to a directory: its files are not loaded, and semula does not write "
                    "through it (make it a real directory)")


class UnsafePath(OSError):
    """A path in the folder semula will not read, write or delete through; the message says why."""


class SyncStopped(Exception):
    """The proxy is stopping: a sync under way stops between files (the next start takes it up again)."""


_user_umask: int | None = None  # the umask the user started semula with (the proxy narrows its own)


def remember_user_umask(mask: int) -> None:
    """The proxy narrows its umask to keep the data dir private; recordings keep the user's."""
    global _user_umask
    if _user_umask is None:
        _user_umask = mask


def user_umask() -> int:
    """The user's umask: as remembered, else the process's (read from /proc: setting it to read it races)."""
    return _user_umask if _user_umask is not None else _process_umask()


@cache
def _process_umask() -> int:
    """The umask this process started with (read once: an export writes thousands of files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def make_directories(directory: Path) -> bool:
    """`directory` and its missing parents, each with the user's umask (git's modes for a work tree);
    whether any was made."""
    missing = []
    while not os.path.lexists(directory):
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        os.chmod(path, 0o777 & ~user_umask())
    return bool(missing)


def max_file_bytes(environ: os._Environ[str] | dict[str, str] = os.environ) -> int:
    """The size cap of one recording file: SEMULA_RECORDING_MAX_MB, else 256 MB."""
    value = environ.get("SEMULA_RECORDING_MAX_MB", "").strip()
    try:
        return int(float(value) * 1024 * 1024) if value else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


def plain_relative(rel: str) -> PurePosixPath:
    """`rel` as a relative path of plain names (no root, no `..`, no empty or `.` part), else UnsafePath."""
    path = PurePosixPath(rel)
    if not rel or path.is_absolute() or "\\" in rel or "\x00" in rel or any(
            part in ("", ".", "..") for part in rel.split("/")):
        raise UnsafePath(f"{rel!r} is not a plain path inside the recordings folder")
    return path


def contained(root: Path, rel: str) -> Path:
    """The path of `rel` under `root`, refusing any part that is a link or leaves the folder.

    Parts that do not exist yet are fine (a write creates them as real directories). The file itself
    may be a link: a write renames over it, never writes through it. (Plain `os.path` on strings: an
    export checks every file it writes twice.)
    """
    parts = plain_relative(rel).parts
    current = os.fspath(root)
    for depth, part in enumerate(parts, 1):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break
        if stat.S_ISLNK(mode) and depth < len(parts):
            raise UnsafePath(f"{current} is a symbolic link: semula does not write or delete through a linked "
                             "directory in the recordings folder (make it a real directory)")
    path = root / rel
    real_root = os.path.realpath(root)
    if os.path.commonpath((real_root, os.path.realpath(os.path.dirname(path)))) != real_root:
        raise UnsafePath(f"{path} leaves the recordings folder {root}")
    return path


@lru_cache(maxsize=256)
def up_to(root: Path, directory: Path) -> tuple[tuple[str, str], ...]:
    """(relative key, path) of `directory` and of each parent up to `root`: "." for the root itself.
    Cached: a folder's writes go to the same few directories again and again."""
    parts = directory.relative_to(root).parts
    return tuple(("/".join(parts[:depth]) or ".", os.path.join(root, *parts[:depth])) for depth in range(len(parts) + 1))


@dataclass(frozen=True)
class Found:
    """One `.json` file the scan met: loadable (`problem` None) or named with why it is skipped."""

    rel: str
    path: Path
    problem: str | None = None


def scan(root: Path) -> Iterator[Found]:
    """Every recording file under `root`, sorted, without following links out of it or into directories;
    a link to a directory is named (`LINKED_DIRECTORY`), whatever its name."""
    real_root = root.resolve()
    prefix = os.path.join(root, "")  # every entry's path starts with it (`Path.relative_to`: 0.1 ms a file)
    found: list[Found] = []
    for entry in _with_kinds(root):
        if not entry.is_dir(follow_symlinks=False):
            path = Path(entry.path)
            rel = entry.path.removeprefix(prefix).replace(os.sep, "/")
            try:
                if entry.is_symlink() and path.is_dir():
                    found.append(Found(rel, path, LINKED_DIRECTORY))
                    continue
                if not entry.name.endswith(".json"):
                    continue
                if entry.is_symlink():
                    if not path.resolve().is_relative_to(real_root):
                        found.append(Found(rel, path, "a symbolic link out of the recordings folder"))
                        continue
                    regular = stat.S_ISREG(os.stat(path).st_mode)
                else:
                    regular = entry.is_file(follow_symlinks=False)  # the directory listing's type: no stat
            except OSError as e:
                found.append(Found(rel, path, f"cannot read it ({e.strerror or e})"))
                continue
            found.append(Found(rel, path, None if regular else "not a regular file (a FIFO, device "
                                                               "or socket is never read)"))
    yield from sorted(found, key=lambda f: f.rel)


def _with_kinds(root: Path) -> Iterator[os.DirEntry[str]]:
    """The entries of the request/answer tree, then those of the other kinds' folders (`KIND_DIRS`)."""
    yield from _entries(root, SKIPPED_PREFIX)
    try:
        kinds = [e for e in os.scandir(root) if e.name in KIND_DIRS]
    except OSError:
        return
    for entry in kinds:
        if entry.is_dir(follow_symlinks=False):
            yield from _entries(Path(entry.path), SKIPPED_PREFIX)
        else:
            yield entry  # a link in its place is named, never followed


def _entries(root: Path, skipped: tuple[str, ...]) -> Iterator[os.DirEntry[str]]:
    """Every entry under `root` whose name does not start with `skipped`, descending into real
    directories only (a link to a directory is yielded, never entered)."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(skipped):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            yield entry


def read_capped(path: Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most `max_bytes`: a FIFO never blocks, a device is never read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(f"{path} is not a regular file")
        if info.st_size > max_bytes:
            raise UnsafePath(f"{info.st_size} bytes, over the {max_bytes // (1024 * 1024)} MB cap "
                             "(SEMULA_RECORDING_MAX_MB)")
        chunks, left = [], max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise UnsafePath(f"over the {max_bytes // (1024 * 1024)} MB cap (SEMULA_RECORDING_MAX_MB)")
        return data
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str, mode: int = 0o666) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`.

    `mode` is filtered by the umask, as for any file the user creates (0o666: 0644 under 022);
    the data dir's own files pass 0o600. The temporary file is created exclusively and never
    through a link, and the rename replaces a link at `path` rather than writing through it.
    """
    write_bytes_atomically(path, text.encode("utf-8"), mode)


def write_bytes_atomically(path: Path, data: bytes, mode: int = 0o666) -> None:
    """`write_atomically` for bytes (a sidecar)."""
    make_directories(path.parent)
    tmp = path.with_name(f"{TEMP_PREFIX}{secrets.token_hex(6)}-{path.name}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, mode)
    try:
        os.fchmod(fd, mode & ~user_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def ensure_ignores(root: Path) -> None:
    """The folder's `.gitignore` (temporary files) and `.gitattributes`, if absent: called before the
    folder's first temporary file, so a writer killed mid-write never leaves one `git add` would take.

    `.gitignore` itself is written in place, never through a temporary file of its own (nothing
    ignores that one yet): created exclusively, not through a link, in one small write.
    """
    make_directories(root)
    path = root / ".gitignore"
    if not os.path.lexists(path):
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o666 & ~user_umask())
        except FileExistsError:  # another writer made it meanwhile
            pass
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(GITIGNORE.encode())
    if not os.path.lexists(root / ".gitattributes"):
        write_atomically(root / ".gitattributes", GITATTRIBUTES)


def remove_stale_temps(root: Path, older_than: float = STALE_TEMP_SECONDS) -> int:
    """Remove the temporary files of writes a crash interrupted; returns how many."""
    removed = 0
    cutoff = time.time() - older_than
    for directory, dirs, names in os.walk(root):  # os.walk does not follow links to directories
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            if name.startswith(TEMP_PREFIX):
                path = Path(directory) / name
                try:
                    info = os.lstat(path)
                    if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                        path.unlink()
                        removed += 1
                except OSError:
                    pass
    return removed


def read_inside(root: Path, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """`read_capped`, for a path found by a glob: refused when it resolves outside `root`."""
    if not path.resolve().is_relative_to(root.resolve()):
        raise UnsafePath(f"{path} links out of the recordings folder")
    return read_capped(path, max_bytes)


def directory_times(root: Path) -> dict[str, int]:
    """Each directory of the folder (links not followed) and its modification time: what a checkout,
    a pull or a merge changes when it adds, removes or replaces a file."""
    times: dict[str, int] = {}
    for directory, dirs, _ in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        try:
            times[Path(directory).relative_to(root).as_posix()] = os.stat(directory).st_mtime_ns
        except OSError:
            pass
    return times
