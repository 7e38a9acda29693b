"""The two sides of `semula recordings diff`: a folder, or the recordings folder as a git commit holds it.

A commit's files are as untrusted as a work tree's, and are read the same way: checked out, as git
would, into a private temporary folder (regular files, symbolic links kept as links, every name
validated by `files.plain_relative` and never written through a link), then read by the loader
(`folder.load_each`: the same scan, link rules, size cap and validator). So a file the diff calls
unreadable is one the proxy would skip, for the same reason. A blob over the size cap is not read out
of git: its file is made sparse at the blob's size, and the loader refuses it by that size alone.
Git runs as a subprocess with fixed arguments; a ref from the command line is only ever one argument
after `--end-of-options`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from semula.core.redact import FingerprintKey
from semula.recordings.files import UnsafePath, contained, make_directories, max_file_bytes
from semula.recordings.folder import load_each
from semula.recordings.shared import folder_settings_for
from semula.store.types import NewEntry

DEFAULT_BRANCHES = ("main", "master")
MAX_LINK_TARGET = 4096
LINK, GITLINK = "120000", "160000"


class SideError(ValueError):
    """A side that cannot be read at all (not a folder, not a commit, no git repository): a usage error."""


@dataclass(frozen=True)
class Side:
    label: str
    entries: dict[str, NewEntry]
    unreadable: tuple[tuple[str, str], ...]  # (path, the loader's reason)


def git(top: Path, *args: str) -> str:
    """`git args` in `top`, its output; a failure is a SideError with git's first line."""
    try:
        done = subprocess.run(["git", "-C", str(top), *args], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SideError(f"git {args[0]}: {e}") from None
    if done.returncode != 0:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["failed"])[0]
        raise SideError(f"git {args[0]}: {first}")
    return done.stdout.decode("utf-8", "surrogateescape")


def repository_top(start: Path) -> Path:
    try:
        return Path(git(start, "rev-parse", "--show-toplevel").strip())
    except SideError:
        raise SideError(f"{start} is not in a git repository: name two folders to compare instead") from None


def commit_of(top: Path, ref: str) -> str:
    try:
        return git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").strip()
    except SideError:
        raise SideError(f"{ref!r} is neither a folder nor a git commit") from None


def default_base(top: Path) -> tuple[str, str]:
    """(name, commit) of where this branch left the default branch: origin/HEAD's, else main's or master's."""
    candidates = []
    try:
        candidates.append(git(top, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD").strip())
    except SideError:
        pass
    for name in (*candidates, *DEFAULT_BRANCHES):
        try:
            tip = commit_of(top, name)
        except SideError:
            continue
        return f"merge base with {name}", git(top, "merge-base", tip, "HEAD").strip()
    raise SideError("no default branch (origin/HEAD, main or master) to compare with: name BASE")


def folder_in_repository(top: Path, folder: Path) -> str:
    """The recordings folder's path inside the repository, as a commit's tree names it."""
    try:
        return folder.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        raise SideError(f"the recordings folder {folder} is outside the git repository {top}") from None


def read_folder(label: str, root: Path, key: FingerprintKey) -> Side:
    entries: dict[str, NewEntry] = {}
    unreadable: list[tuple[str, str]] = []
    # Each side keyed by its own folder's settings (`semula_ignore` changes the exact fingerprint), as `check` does.
    for rel, entry, problem in load_each(root, folder_settings_for(root), key) if root.is_dir() else ():
        if entry is not None:
            entries[rel] = entry
        else:
            unreadable.append((rel, problem or "not loaded"))
    return Side(label, entries, tuple(unreadable))


def read_commit(label: str, top: Path, commit: str, folder: str, key: FingerprintKey) -> Side:
    with checked_out(top, commit, folder) as (root, refused):
        side = read_folder(label, root, key)
    return Side(side.label, side.entries, tuple(sorted(side.unreadable + tuple(refused))))


@contextmanager
def checked_out(top: Path, commit: str, folder: str) -> Iterator[tuple[Path, list[tuple[str, str]]]]:
    """The folder as `commit` holds it, in a temporary directory removed afterwards; and the paths that
    could not be checked out there, with why."""
    refused: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="semula-diff-") as temporary:
        root = Path(temporary) / "recordings"
        root.mkdir()
        tree = f"{commit}:{folder}" if folder != "." else f"{commit}^{{tree}}"
        try:
            listing = git(top, "ls-tree", "-r", "-l", "-z", "--end-of-options", tree)
        except SideError:  # the folder is not in that commit: no recordings there
            listing = ""
        with _Blobs(top) as blobs:
            for line in filter(None, listing.split("\0")):
                meta, _, rel = line.partition("\t")
                mode, _kind, oid, size = meta.split()
                try:
                    _check_out(root, rel, mode, oid, size, blobs)
                except (UnsafePath, OSError) as e:
                    refused.append((rel, str(e) if isinstance(e, UnsafePath) else f"cannot check it out ({e})"))
        yield root, refused


def _check_out(root: Path, rel: str, mode: str, oid: str, size: str, blobs: _Blobs) -> None:
    path = contained(root, rel)  # a plain name, no part a link, under the root
    make_directories(path.parent)
    if mode == GITLINK:
        if rel.endswith(".json"):
            raise UnsafePath("a git submodule, not a file")
        return
    if mode == LINK:
        if int(size) > MAX_LINK_TARGET:
            raise UnsafePath("a symbolic link to a path too long to be a file's")
        os.symlink(blobs.read(oid, MAX_LINK_TARGET).decode("utf-8", "surrogateescape"), path)
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as out:
        if int(size) > max_file_bytes():
            out.truncate(int(size))  # sparse: the loader refuses it by its size, nothing is read from git
        else:
            out.write(blobs.read(oid, int(size)))


class _Blobs:
    """One `git cat-file --batch` for every blob of a side, read one at a time (never all in memory)."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Blobs:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=60)

    def read(self, oid: str, max_bytes: int) -> bytes:
        if self.proc is None:
            self.proc = subprocess.Popen(["git", "-C", str(self.top), "cat-file", "--batch"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(oid.encode("ascii") + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise UnsafePath(f"git has no blob {oid}")
        size = int(header[2])
        data = self.proc.stdout.read(size + 1)[:size]  # and the newline after it
        if size > max_bytes:
            raise UnsafePath(f"{size} bytes, over the {max_bytes} bytes git may give here")
        return data
