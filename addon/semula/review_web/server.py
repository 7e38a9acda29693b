"""The local HTTP server behind `semula review web`.

Loopback by default, and a random token per run that lives only in the page's own origin. The URL
the CLI prints carries it in the fragment (`#token=…`), which a browser never sends to any server or
puts in a Referer; the page moves it into sessionStorage (scoped to scheme, host and port) and drops
it from the address bar. No cookie: cookies ignore ports, so any other server on 127.0.0.1 would be
sent one. `GET /` is only the page's shell; the queue (`GET /api/queue`) and approve and reject
(POSTs) need the token in the `X-Semula-Token` header, which another origin's page can neither read
nor send (a custom header across origins needs a CORS preflight, never granted). Every request must
name this server in its Host header (a DNS-rebinding name is refused), a request carrying a foreign
Origin is refused, and a state change must carry this server's own Origin. Every answer forbids
framing, caching and Referers, and the server logs no request line.

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
import socket
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from semula.review_web.page import KNOWN_TIERS, Filters, QueuePage, queue_html, shell_html

Run = Callable[[str, dict[str, Any]], Any]
Operations = Callable[[], AbstractContextManager[Run]]

PAGE_SIZE = 50  # candidates rendered on one page; the filters narrow a longer queue
MAX_BODY = 4096
TOKEN_HEADER = "x-semula-token"
WILDCARDS = ("0.0.0.0", "::", "")  # binds that listen on every address


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


def authority(host: str, port: int) -> str:
    """`host:port` as a Host header or an origin spells it (an IPv6 literal in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def decision_message(action: str, result: dict[str, Any]) -> str:
    if action == "reject":
        return f"rejected #{result['rejected']}: this pairing will never be queued or served again"
    closed = f"; closed #{', #'.join(str(i) for i in result['closed'])}" if result.get("closed") else ""
    return f"approved #{result['id']}: served recording #{result['alias_to']} from now on (tier alias){closed}"


class ReviewWeb:
    """The server; `url` (the token in its fragment) is what the user opens. `serve_forever` until `shutdown`."""

    def __init__(self, operations: Operations, host: str = "127.0.0.1", port: int = 0,
                 default_project: str | None = None, log: Callable[[str], None] | None = None,
                 on_first_use: Callable[[], None] | None = None):
        self.token = secrets.token_urlsafe(32)
        self.on_first_use = on_first_use  # once, on the first request that carries the token
        self.operations = operations
        self.default_project = default_project
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self.lock = threading.Lock()  # one store session at a time: a direct DuckDB open is exclusive
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.host, self.port = host, self.httpd.server_address[1]
        self.loopback = is_loopback(host)
        self.hosts = self._host_names()

    def _host_names(self) -> frozenset[str]:
        """The Host headers that name this server. A wildcard bind is reached by any of the machine's
        addresses: an IP literal can't be rebound, so any is accepted, with the machine's own names."""
        names = {self.host, "127.0.0.1", "localhost", "::1"}
        if self.host in WILDCARDS:
            names |= {socket.gethostname(), socket.getfqdn()}
        return frozenset(authority(n.lower(), self.port) for n in names if n)

    @property
    def url(self) -> str:
        return f"http://{authority(self.host, self.port)}/#token={self.token}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def shutdown(self) -> None:
        """From another thread: stop `serve_forever` and close."""
        self.httpd.shutdown()
        self.close()

    def close(self) -> None:
        self.httpd.server_close()

    def token_ok(self, given: str | None) -> bool:
        ok = bool(given) and hmac.compare_digest(str(given).encode(), self.token.encode())
        if ok and self.on_first_use is not None:
            used, self.on_first_use = self.on_first_use, None
            used()
        return ok

    def host_ok(self, host: str | None) -> bool:
        host = (host or "").lower()
        if host in self.hosts:
            return True
        name, _, port = host.rpartition(":")
        return self.host in WILDCARDS and port == str(self.port) and is_ip_literal(name)

    def queue(self, query: str) -> dict[str, Any]:
        """The queue's markup for the filters in `query`, as the page's script asks for it."""
        filters, problem = parse_filters(query, self.default_project)
        try:
            with self.lock, self.operations() as run:
                queue = load_queue(run, filters)
        except Exception as e:  # the page says what failed; the server keeps serving
            self.log(f"semula review web: could not read the review queue: {e}")
            queue = QueuePage(filters, [], list(KNOWN_TIERS), [], 0, error=f"could not read the review queue: {e}")
        if problem and not queue.error:
            queue = QueuePage(queue.filters, queue.projects, queue.tiers, queue.candidates, queue.matching, problem)
        return {"ok": True, "html": queue_html(queue), "shown": len(queue.candidates)}

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


NO_TOKEN = "no token: open the URL semula review web printed (each run has its own)"


def _handler(web: ReviewWeb) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 30  # an idle browser connection never holds a thread for long
        server_version = "semula-review"
        sys_version = ""

        def log_message(self, *args: Any) -> None:  # the console shows decisions, not requests
            pass

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            # the standard error page would go out without the guard headers
            self.close_connection = True
            self._send(code, "text/plain", (message or self.responses.get(code, ("error",))[0]).encode())

        def _refusal(self, state_change: bool) -> tuple[int, str] | None:
            """Why this request is refused (status, reason), or None: Host, then Origin, then the token."""
            host = self.headers.get("host")
            if host is None or not web.host_ok(host):
                return 403, "unknown host: open the URL semula review web printed"
            origin = self.headers.get("origin")
            if (origin is not None or state_change) and (origin or "").lower() != f"http://{host.lower()}":
                return 403, "cross-origin request refused"
            if not web.token_ok(self.headers.get(TOKEN_HEADER)):
                return 401, NO_TOKEN
            return None

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/api/queue":
                if refused := self._refusal(state_change=False):
                    return self._json(refused[0], {"ok": False, "error": refused[1]})
                return self._json(200, web.queue(url.query))
            if not web.host_ok(self.headers.get("host")):
                return self._send(403, "text/plain", b"unknown host: open the URL semula review web printed")
            if url.path != "/":
                return self._send(404, "text/plain", b"not found")
            if "token" in parse_qs(url.query):
                return self._send(400, "text/plain", b"the token goes after # in the URL, never in its query: "
                                                     b"open the URL semula review web printed")
            nonce = secrets.token_urlsafe(16)
            self._send(200, "text/html; charset=utf-8", shell_html(nonce).encode(),
                       {"content-security-policy": page_csp(nonce)})

        def do_POST(self) -> None:
            action = {"/api/approve": "approve", "/api/reject": "reject"}.get(urlsplit(self.path).path)
            if action is None:
                return self._json(404, {"ok": False, "error": "not found"})
            if refused := self._refusal(state_change=True):
                return self._json(refused[0], {"ok": False, "error": refused[1]})
            try:
                length = int(self.headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                return self._json(413, {"ok": False, "error": f"the body must be at most {MAX_BODY} bytes"})
            self._json(200, web.decide(action, self.rfile.read(length)))

        def _not_allowed(self) -> None:
            """Any other method, a CORS preflight included: never granted."""
            self._json(405, {"ok": False, "error": "method not allowed"}, {"allow": "GET, POST"})

        do_OPTIONS = do_PUT = do_PATCH = do_DELETE = do_HEAD = _not_allowed

        def _json(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
            self._send(status, "application/json", json.dumps(payload).encode(), extra)

        def _send(self, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in {"content-type": content_type, "content-length": str(len(body)), **GUARD,
                                **(extra or {})}.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    return Handler


NOTHING_ALLOWED = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
GUARD = {  # on every answer: never framed, cached, sniffed, referred, or shared with another origin or window
    "cache-control": "no-store", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
    "x-frame-options": "DENY", "content-security-policy": NOTHING_ALLOWED,
    "cross-origin-opener-policy": "same-origin", "cross-origin-resource-policy": "same-origin",
}


def page_csp(nonce: str) -> str:
    """The page's policy: only its own nonce'd script and style, fetches to this server, forms to it."""
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
