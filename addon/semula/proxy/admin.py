"""The running proxy's admin endpoint, and the CLI's client for it.

DuckDB lets one process open a file while another writes it — not even read-only — so
while a proxy runs, `semula entries|config|review|…` reach the store through it: a small
JSON-over-HTTP endpoint on 127.0.0.1, its port and a random token in `<data dir>/admin.json`
(mode 0600). Calls run on the proxy's store thread, the same code as a direct CLI call.

A proxy that cannot write its data dir (read-only replay), or must not (a data dir other users
can write), keeps admin.json in a per-user directory named after the data dir (`fallback_admin_dir`),
where the CLI looks next.

The token is the key to every prompt and answer, so admin.json is never written through a link
(a temp file created O_EXCL|O_NOFOLLOW, renamed over it) and the CLI trusts only a regular file of
its own user that nobody else can read or write.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import secrets
import stat
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from semula.store.datadir import make_data_dir

ADMIN_FILE = "admin.json"
IDLE_SECONDS = 30  # a kept-alive admin connection idle this long is closed by the proxy

SHUTDOWN_POLL_S = 0.02


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


def _private_dir(path: Path) -> Path:
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


def _read_trusted(path: Path, warn: bool = True) -> dict[str, Any] | None:
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


def _write_private_file(path: Path, text: str) -> None:
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


class AdminServer:
    def __init__(self, data_dir: Path, dispatch: Dispatch, info: dict[str, Any], fallback: bool = False):
        """Serve `dispatch`; write admin.json into `data_dir`, or (`fallback`) into its fallback_admin_dir."""
        self.data_dir = _private_dir(fallback_admin_dir(data_dir)) if fallback else Path(data_dir)
        self.token = secrets.token_urlsafe(24)
        token = self.token

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive: a caller that asks often (the pytest plugin, 3-4 calls per test) keeps one
            # connection; an idle one is closed after `timeout` seconds and the client reconnects.
            protocol_version = "HTTP/1.1"
            timeout = IDLE_SECONDS
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: Any) -> None:  # keep the proxy's console clean
                pass

            def do_POST(self) -> None:
                given = self.headers.get("authorization", "").removeprefix("Bearer ")
                if not hmac.compare_digest(given.encode(), token.encode()):
                    return self._send(403, {"ok": False, "error": "bad admin token"})
                try:
                    length = int(self.headers.get("content-length") or 0)
                    call = json.loads(self.rfile.read(length) or b"{}")
                    result = dispatch(str(call.get("method", "")), dict(call.get("params") or {}))
                except Exception as e:  # the CLI shows the message; the proxy keeps serving
                    return self._send(200, {"ok": False, "error": str(e), "type": type(e).__name__})
                self._send(200, {"ok": True, "result": result})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = dumps(payload)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        # shutdown() waits for the serving loop's next poll: the default half second was most of a stop.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(SHUTDOWN_POLL_S,),
                                       name="semula-admin", daemon=True)
        self.thread.start()
        self.path = self.data_dir / ADMIN_FILE
        self.info = {**info, "port": self.port, "token": self.token, "pid": os.getpid()}
        if not fallback:  # (the fallback dir was made by _private_dir)
            make_data_dir(self.data_dir)
        try:
            _write_private_file(self.path, json.dumps(self.info))
        except BaseException:
            self.server.shutdown()
            self.server.server_close()
            raise

    def close(self) -> None:
        current = _read_trusted(self.path, warn=False) or {}
        if current.get("pid") == os.getpid() and current.get("port") == self.port:
            try:
                self.path.unlink()
            except OSError:
                pass
        self.server.shutdown()
        self.server.server_close()


def read_admin_info(data_dir: Path | str) -> dict[str, Any] | None:
    """The live proxy's admin.json (in the data dir, else in its fallback dir), or None when no proxy
    answers for this data dir. Only a regular file of this user that nobody else can read or write is
    trusted (`admin_file_problem`); another is ignored, with one line on stderr."""
    for path in (Path(data_dir) / ADMIN_FILE, fallback_admin_dir(data_dir) / ADMIN_FILE):
        info = _read_trusted(path)
        if info is None:
            continue
        try:
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a stale file from a proxy that died
        return info
    return None


def call(data_dir: Path | str, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0,
         info: dict[str, Any] | None = None) -> Any:
    """Run one admin method; `info`: the admin.json already read (a caller that asks often)."""
    info = info or read_admin_info(data_dir)
    if info is None:
        raise NoProxy(str(data_dir))
    request = urllib.request.Request(
        f"http://127.0.0.1:{info['port']}/rpc",
        data=dumps({"method": method, "params": params or {}}),
        headers={"authorization": f"Bearer {info['token']}", "content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
    except urllib.error.HTTPError as e:
        raise AdminError(f"the proxy's admin endpoint refused the call: HTTP {e.code}") from e
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        raise NoProxy(f"{data_dir}: admin endpoint not answering ({e})") from e
    return _result(payload)


def _result(payload: Any) -> Any:
    if not isinstance(payload, dict) or not payload.get("ok"):
        raise AdminError((payload.get("error") if isinstance(payload, dict) else None) or "unknown error")
    return payload["result"]


class AdminClient:
    """One kept-alive connection to a proxy's admin endpoint, for a caller that asks often.

    Only for idempotent methods (which test runs, refusals since N): a call on a reused connection
    that the proxy closed while idle is sent once more on a fresh one."""

    def __init__(self, data_dir: Path | str, info: dict[str, Any], timeout: float = 10.0) -> None:
        self.data_dir, self.info, self.timeout = data_dir, info, timeout
        self._connection: http.client.HTTPConnection | None = None

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        body = dumps({"method": method, "params": params or {}})
        headers = {"authorization": f"Bearer {self.info['token']}", "content-type": "application/json"}
        for attempt in (1, 2):
            reused = self._connection is not None
            connection = self._connection or http.client.HTTPConnection("127.0.0.1", self.info["port"],
                                                                          timeout=self.timeout)
            try:
                connection.request("POST", "/rpc", body, headers)
                response = connection.getresponse()
                payload, status = json.loads(response.read()), response.status
            except (OSError, http.client.HTTPException, ValueError) as e:
                connection.close()
                self._connection = None
                if reused and attempt == 1 and not isinstance(e, TimeoutError):
                    continue  # closed while idle: once more, on a new connection
                raise NoProxy(f"{self.data_dir}: admin endpoint not answering ({e})") from e
            self._connection = connection
            if status != 200 and not isinstance(payload, dict):
                raise AdminError(f"the proxy's admin endpoint refused the call: HTTP {status}")
            return _result(payload)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
