"""The running proxy's admin endpoint, and the CLI's client for it.

DuckDB lets one process open a file while another writes it — not even read-only — so
while a proxy runs, `semula entries|config|review|…` reach the store through it: a small
JSON-over-HTTP endpoint on 127.0.0.1, its port and a random token in `<data dir>/admin.json`
(mode 0600). Calls run on the proxy's store thread, the same code as a direct CLI call.

A proxy that cannot write its data dir (read-only replay) keeps admin.json in a per-user
directory named after the data dir (`fallback_admin_dir`), where the CLI looks next.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def _own_private_file(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


class AdminServer:
    def __init__(self, data_dir: Path, dispatch: Dispatch, info: dict[str, Any], fallback: bool = False):
        """Serve `dispatch`; write admin.json into `data_dir`, or (`fallback`) into its fallback_admin_dir."""
        self.data_dir = _private_dir(fallback_admin_dir(data_dir)) if fallback else Path(data_dir)
        self.token = secrets.token_urlsafe(24)
        token = self.token

        class Handler(BaseHTTPRequestHandler):
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
        self.thread = threading.Thread(target=self.server.serve_forever, name="semula-admin", daemon=True)
        self.thread.start()
        self.path = self.data_dir / ADMIN_FILE
        self.info = {**info, "port": self.port, "token": self.token, "pid": os.getpid()}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.info, f)
        os.chmod(self.path, 0o600)

    def close(self) -> None:
        try:
            current = json.loads(self.path.read_text())
            if current.get("pid") == os.getpid() and current.get("port") == self.port:
                self.path.unlink()
        except (OSError, ValueError):
            pass
        self.server.shutdown()
        self.server.server_close()


def read_admin_info(data_dir: Path | str) -> dict[str, Any] | None:
    """The live proxy's admin.json (in the data dir, else in its fallback dir), or None when no proxy
    answers for this data dir."""
    fallback = fallback_admin_dir(data_dir) / ADMIN_FILE
    for path in (Path(data_dir) / ADMIN_FILE, fallback):
        if path == fallback and not _own_private_file(path):
            continue  # a shared temp dir: trust only a file of our own that nobody else can change
        try:
            info = json.loads(path.read_text())
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # missing, unreadable, or a stale file from a proxy that died
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
    if not payload.get("ok"):
        raise AdminError(payload.get("error") or "unknown error")
    return payload["result"]
