"""What the proxy and its callers agree on: the admin.json that says where the endpoint is, who may trust
it, and the JSON each call and answer is.

DuckDB lets one process open a file while another writes it — not even read-only — so
while a proxy runs, `semula entries|config|review|…` reach the store through it: a small
JSON-over-HTTP endpoint on 127.0.0.1 (`server.py`), its port and a random token in `<data dir>/admin.json`
(mode 0600). Calls run on the proxy's store thread, the same code as a direct CLI call (`client.py`).

A proxy that cannot write its data dir (read-only replay), or must not (a data dir other users
can write), keeps admin.json in a per-user directory named after the data dir (`fallback_admin_dir`),
where the CLI looks next.

The token is the key to every prompt and answer, so admin.json is never written through a link
(a temp file created O_EXCL|O_NOFOLLOW, renamed over it) and the CLI trusts only a regular file of
its own user that nobody else can read or write.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import sys
import tempfile
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

ADMIN_FILE = "admin.json"


class AdminError(Exception):
    """The admin call itself failed (the proxy answered with an error)."""


class NoProxy(Exception):
    """No live proxy holds this data dir: open the store directly."""


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (set, tuple)):
        return list(value)
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__}
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(value: Any) -> bytes:
    return json.dumps(value, default=_json_default, ensure_ascii=False).encode()


Dispatch = Callable[[str, dict[str, Any]], Any]


def fallback_admin_dir(data_dir: Path | str) -> Path:
    """Where a proxy that cannot write `data_dir` keeps its admin.json: the same path for the proxy
    and the CLI (per user, per resolved data dir), in a 0700 directory of the user's own."""
    key = hashlib.sha256(str(Path(data_dir).expanduser().resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"semula-admin-{os.getuid()}" / key


def private_dir(path: Path) -> Path:
    """Create `path` (and its parent) 0700; refuse a directory someone else owns or others can open."""
    for directory in (path.parent, path):
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
        except FileExistsError:
            pass
        st = os.lstat(directory)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise OSError(f"{directory} is not a private directory of this user")
    return path


def admin_file_problem(st: os.stat_result) -> str | None:
    """Why an admin.json with this (l)stat cannot be trusted, or None: a regular file of this user,
    neither readable nor writable by anyone else."""
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_uid != os.getuid():
        return f"it belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"other users may read or write it (mode {stat.S_IMODE(st.st_mode):04o}, expected 0600)"
    return None


_warned: set[tuple[str, str]] = set()


def read_trusted(path: Path, warn: bool = True) -> dict[str, Any] | None:
    """The JSON in admin.json at `path` if it is trustworthy (`admin_file_problem`), else None; an
    untrusted file is named once per process on stderr."""
    try:
        problem = admin_file_problem(os.lstat(path))
        if problem is None:  # open without following a link swapped in since, and check what was opened
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as f:
                problem = admin_file_problem(os.fstat(f.fileno()))
                data = f.read(1 << 16) if problem is None else b""
    except OSError:
        return None  # missing or unreadable: no proxy here
    if problem is not None:
        if warn and (str(path), problem) not in _warned:
            _warned.add((str(path), problem))
            print(f"semula: ignoring {path} ({problem}): it may not come from a proxy of yours; going on as "
                  "if no proxy ran on this data dir (if yours does: stop it, delete the file, start it again)",
                  file=sys.stderr, flush=True)
        return None
    try:
        info = json.loads(data)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def write_private_file(path: Path, text: str) -> None:
    """Write `path` 0600 without ever opening what is there: a new temp file next to it (O_EXCL,
    O_NOFOLLOW), renamed over it — a rename replaces a planted link itself, never its target."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def pid_alive(pid: int) -> bool:
    """Whether a process of ours has this pid (one of another user's has taken a dead one's pid: not ours)."""
    try:
        os.kill(pid, 0)
    except (OSError, OverflowError):
        return False
    return True


def read_admin_info(data_dir: Path | str) -> dict[str, Any] | None:
    """The live proxy's admin.json (in the data dir, else in its fallback dir), or None when no proxy
    answers for this data dir. Only a regular file of this user that nobody else can read or write is
    trusted (`admin_file_problem`); another is ignored, with one line on stderr."""
    for path in (Path(data_dir) / ADMIN_FILE, fallback_admin_dir(data_dir) / ADMIN_FILE):
        info = read_trusted(path)
        if info is None:
            continue
        try:
            alive = pid_alive(int(info["pid"]))
        except (ValueError, KeyError, TypeError):
            alive = False
        if alive:
            return info  # else a stale file from a proxy that died
    return None


def result_of(payload: Any) -> Any:
    if not isinstance(payload, dict) or not payload.get("ok"):
        raise AdminError((payload.get("error") if isinstance(payload, dict) else None) or "unknown error")
    return payload["result"]
