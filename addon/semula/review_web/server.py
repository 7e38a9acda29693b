"""The local HTTP server behind `semula review web`.

Loopback by default, and a random token per run: the first visit carries it in the URL (`?token=`),
the server answers with an HttpOnly, SameSite=Strict cookie and a redirect that drops it from the
address bar. Every page needs the cookie (or the token); approve and reject are POSTs that must also
carry the token in an `X-Semula-Token` header, which another site's page can neither read nor send
(a custom header across origins needs a CORS preflight, which is never granted). The Host header
must name this server, so a DNS-rebinding page is refused too.

The store is reached through `operations`, a callable that opens one session of review operations
(the CLI's: through a running proxy's admin endpoint, or the store opened for that one page), so
the page never holds the store and a proxy can start while it is open. A failed operation is a
message on the page or in the JSON answer; the server keeps serving.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from semula.review_web.page import KNOWN_TIERS, Filters, QueuePage, page_html

Run = Callable[[str, dict[str, Any]], Any]
Operations = Callable[[], AbstractContextManager[Run]]

PAGE_SIZE = 50  # candidates rendered on one page; the filters narrow a longer queue
MAX_BODY = 4096
TOKEN_HEADER = "x-semula-token"


def parse_filters(query: str, default_project: str | None = None) -> tuple[Filters, str | None]:
    """The filters in a page's query string, and a message for a value that makes no sense (then ignored)."""
    values = {k: v[-1].strip() for k, v in parse_qs(query).items() if v}
    project = values.get("project", default_project or "") or None
    tier = values.get("tier") or None
    problem = None
    min_score = None
    if raw := values.get("min_score"):
        try:
            min_score = float(raw)
        except ValueError:
            problem = f"min score {raw!r} is not a number: showing every score"
        else:
            if not 0 <= min_score <= 1:
                problem, min_score = f"min score {raw} is not between 0 and 1: showing every score", None
    return Filters(project, tier, min_score), problem


def load_queue(run: Run, filters: Filters) -> QueuePage:
    """The open candidates passing the filters, best first, each as `review show` returns it."""
    rows = run("review.list", {"project": filters.project, "status": "open"})
    tiers = sorted({*KNOWN_TIERS, *(r["tier"] for r in rows)})
    matching = sorted((r for r in rows if filters.admits(r)), key=lambda r: (-float(r["score"]), r["id"]))
    shown = [run("review.show", {"id": r["id"]}) for r in matching[:PAGE_SIZE]]
    return QueuePage(filters, run("projects", {}), tiers, shown, len(matching))


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def decision_message(action: str, result: dict[str, Any]) -> str:
    if action == "reject":
        return f"rejected #{result['rejected']}: this pairing will never be queued or served again"
    closed = f"; closed #{', #'.join(str(i) for i in result['closed'])}" if result.get("closed") else ""
    return f"approved #{result['id']}: served recording #{result['alias_to']} from now on (tier alias){closed}"


class ReviewWeb:
    """The server; `url` (with the token) is what the user opens. `serve_forever` until `shutdown`."""

    def __init__(self, operations: Operations, host: str = "127.0.0.1", port: int = 0,
                 default_project: str | None = None, log: Callable[[str], None] | None = None):
        self.token = secrets.token_urlsafe(32)
        self.operations = operations
        self.default_project = default_project
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self.lock = threading.Lock()  # one store session at a time: a direct DuckDB open is exclusive
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.host, self.port = host, self.httpd.server_address[1]
        self.loopback = is_loopback(host)  # only then is the Host header checked: another host has other names
        self.cookie = f"semula_review_{self.port}"  # cookies ignore ports: one name per server

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/?token={self.token}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def shutdown(self) -> None:
        """From another thread: stop `serve_forever` and close."""
        self.httpd.shutdown()
        self.close()

    def close(self) -> None:
        self.httpd.server_close()

    def token_ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(str(given).encode(), self.token.encode())

    def page(self, query: str) -> tuple[str, str]:
        """(the page's HTML, the nonce its script and style carry)."""
        filters, problem = parse_filters(query, self.default_project)
        try:
            with self.lock, self.operations() as run:
                queue = load_queue(run, filters)
        except Exception as e:  # the page says what failed; the server keeps serving
            self.log(f"semula review web: could not read the review queue: {e}")
            queue = QueuePage(filters, [], list(KNOWN_TIERS), [], 0, error=f"could not read the review queue: {e}")
        if problem and not queue.error:
            queue = QueuePage(queue.filters, queue.projects, queue.tiers, queue.candidates, queue.matching, problem)
        nonce = secrets.token_urlsafe(16)
        return page_html(queue, self.token, nonce), nonce

    def decide(self, action: str, body: bytes) -> dict[str, Any]:
        try:
            candidate_id = json.loads(body or b"{}").get("id")
        except (ValueError, AttributeError):
            candidate_id = None
        if not isinstance(candidate_id, int) or isinstance(candidate_id, bool) or candidate_id < 1:
            return {"ok": False, "error": "give the candidate's id as a positive integer: {\"id\": 7}"}
        try:
            with self.lock, self.operations() as run:
                result = run(f"review.{action}", {"id": candidate_id})
        except Exception as e:
            self.log(f"semula review web: {action} #{candidate_id} failed: {e}")
            return {"ok": False, "error": str(e)}
        result = {**result, "id": candidate_id}
        self.log(decision_message(action, result))
        return {"ok": True, "message": decision_message(action, result), "result": result}


def _handler(web: ReviewWeb) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 30  # an idle browser connection never holds a thread for long
        server_version = "semula-review"
        sys_version = ""

        def log_message(self, *args: Any) -> None:  # the console shows decisions, not requests
            pass

        def _host_ok(self) -> bool:
            if not web.loopback:
                return True
            host = (self.headers.get("host") or "").lower()
            return host in {f"{name}:{web.port}" for name in (web.host, "127.0.0.1", "localhost", "[::1]")}

        def _cookie_token(self) -> str | None:
            for part in (self.headers.get("cookie") or "").split(";"):
                name, _, value = part.strip().partition("=")
                if name == web.cookie:
                    return value
            return None

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if not self._host_ok():
                return self._send(403, "text/plain", b"unknown host")
            if url.path != "/":
                return self._send(404, "text/plain", b"not found")
            query = parse_qs(url.query)
            if "token" in query:
                if not web.token_ok(query["token"][-1]):
                    return self._send(403, "text/plain", b"wrong token: open the URL semula review web printed")
                rest = "&".join(p for p in url.query.split("&") if not p.startswith("token="))
                return self._send(303, "text/plain", b"", {
                    "location": "/" + (f"?{rest}" if rest else ""),
                    "set-cookie": f"{web.cookie}={web.token}; HttpOnly; SameSite=Strict; Path=/",
                })
            if not web.token_ok(self._cookie_token()):
                return self._send(403, "text/plain", b"no token: open the URL semula review web printed")
            text, nonce = web.page(url.query)
            self._send(200, "text/html; charset=utf-8", text.encode(), {"content-security-policy": page_csp(nonce)})

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            action = {"/api/approve": "approve", "/api/reject": "reject"}.get(path)
            if action is None:
                return self._json(404, {"ok": False, "error": "not found"})
            if not self._host_ok() or not web.token_ok(self.headers.get(TOKEN_HEADER)):
                return self._json(403, {"ok": False, "error": "bad token"})
            origin = self.headers.get("origin")
            if origin is not None and urlsplit(origin).netloc.lower() != (self.headers.get("host") or "").lower():
                return self._json(403, {"ok": False, "error": "cross-origin request refused"})
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                return self._json(413, {"ok": False, "error": "request too large"})
            self._json(200, web.decide(action, self.rfile.read(length)))

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            self._send(status, "application/json", json.dumps(payload).encode())

        def _send(self, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in {"content-type": content_type, "content-length": str(len(body)),
                                "cache-control": "no-store", "x-content-type-options": "nosniff",
                                "referrer-policy": "no-referrer", "content-security-policy": NOTHING_ALLOWED,
                                **(extra or {})}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


NOTHING_ALLOWED = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"


def page_csp(nonce: str) -> str:
    """The page's policy: only its own nonce'd script and style, fetches to this server, forms to it."""
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
