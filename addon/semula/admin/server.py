"""The proxy's side of the admin endpoint: a JSON-over-HTTP server on 127.0.0.1 that runs each call
through the `dispatch` it is given, and the admin.json that tells the CLI its port and token.

It knows nothing of what the calls do: the proxy (`proxy/run/lifecycle.py`) hands it the dispatch,
which runs them on the store thread.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from semula.admin.protocol import (ADMIN_FILE, Dispatch, dumps, fallback_admin_dir, private_dir, read_trusted,
                                   write_private_file)
from semula.store.datadir import make_data_dir

IDLE_SECONDS = 30  # a kept-alive admin connection idle this long is closed by the proxy

SHUTDOWN_POLL_S = 0.02


class AdminServer:
    def __init__(self, data_dir: Path, dispatch: Dispatch, info: dict[str, Any], fallback: bool = False,
                 beside: Callable[[Path], dict[str, Any]] | None = None):
        """Serve `dispatch`; write admin.json into `data_dir`, or (`fallback`) into its fallback_admin_dir.
        `beside(directory)`: what else is kept in admin.json's directory, for admin.json to name."""
        self.data_dir = private_dir(fallback_admin_dir(data_dir)) if fallback else Path(data_dir)
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
        if not fallback:  # (the fallback dir was made by private_dir)
            make_data_dir(self.data_dir)
        kept = beside(self.data_dir) if beside is not None else {}
        self.info = {**info, **kept, "port": self.port, "token": self.token, "pid": os.getpid()}
        try:
            write_private_file(self.path, json.dumps(self.info))
        except BaseException:
            self.server.shutdown()
            self.server.server_close()
            raise

    def close(self) -> None:
        current = read_trusted(self.path, warn=False) or {}
        if current.get("pid") == os.getpid() and current.get("port") == self.port:
            try:
                self.path.unlink()
            except OSError:
                pass
        self.server.shutdown()
        self.server.server_close()
