"""The data dir's one way into existence, so that it never reaches git.

The data dir holds the store (every prompt and answer), the call logs, `proxy.log` and the admin token.
It usually sits in the repository root (`./.semula`), beside the recordings folder that *is* committed,
so a `git add .` would take it along. As virtual environments do, semula writes a `.gitignore` holding
`*` into every data dir it creates. A directory that already exists (such as `.`) is never given one:
it would hide the whole tree.
"""

from __future__ import annotations

import os
from pathlib import Path

GITIGNORE = "# created by semula: the data dir (store, call logs, admin token) stays out of git\n*\n"


def make_data_dir(path: Path | str) -> bool:
    """Create the data dir `path` (mode 0700, parents too) with its `.gitignore`; False if it already existed.

    OSError when it cannot be created, as `Path.mkdir`; a `.gitignore` that cannot be written is not an error
    (the store and logs say so when the directory is not writable)."""
    path = Path(path).expanduser()
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        return False
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        with os.fdopen(os.open(path / ".gitignore", flags, 0o600), "w") as f:  # private like the rest of the data dir
            f.write(GITIGNORE)
    except OSError:
        pass
    return True


def tracked_data_dirs(where: Path, data_dir: Path | None = None) -> dict[str, int]:
    """Data dirs inside the git work tree around `where` that git tracks files of: {dir: files}, relative
    to the work tree's top. A data dir is `data_dir` (the default one), any `.semula` directory, and any
    directory holding a store file (`semula.duckdb*`) or a call log (`calls/date=…/part-….parquet`).
    No git, or not in a work tree: {} (nothing to warn about)."""
    import subprocess

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    listed = git("ls-files", "-z", "--full-name", ":/") if top else None
    if not top or listed is None:
        return {}
    root = Path(top.strip()).resolve()
    own: tuple[str, ...] = ()
    if data_dir is not None:
        try:
            own = Path(data_dir).expanduser().resolve().relative_to(root).parts
        except ValueError:
            pass  # outside the work tree: git cannot track it
    found: dict[str, int] = {}
    for name in filter(None, listed.split("\0")):
        parts = tuple(name.split("/"))
        directory = _data_dir_of(parts, own)
        if directory is not None:
            found[directory] = found.get(directory, 0) + 1
    return found


def _data_dir_of(parts: tuple[str, ...], own: tuple[str, ...]) -> str | None:
    if own and parts[:len(own)] == own and len(parts) > len(own):
        return "/".join(own)
    if ".semula" in parts[:-1]:
        return "/".join(parts[:parts.index(".semula") + 1])
    if parts[-1].startswith("semula.duckdb"):
        return "/".join(parts[:-1]) or "."
    for i, part in enumerate(parts[:-2]):
        if part in ("calls", "reviews") and parts[i + 1].startswith("date=") and parts[-1].endswith(".parquet"):
            return "/".join(parts[:i]) or "."
    return None
