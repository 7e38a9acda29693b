"""Connecting to the Postgres store: the small pool, the masked URL every message shows, the watchdog
that bounds every call, and the one place psycopg errors become `StoreError`s.

A pool per process holds one to four connections: thirty runners with a big pool each would
exhaust a server's `max_connections`. No password ever reaches a log line: messages name the
server by `masked(url)`, and any text from the driver is scrubbed of the password too.

A server that stops answering must not hang the proxy. Each connection asks the server for a
`statement_timeout`, a `lock_timeout` and an `idle_in_transaction_session_timeout` (a live server
ends its own runaway work), and uses TCP keepalives and `tcp_user_timeout` (a dead network fails
the socket). Neither helps against a server that is frozen (SIGSTOP, a hung VM): its kernel still
accepts connections and acknowledges every packet, so only the client can give up. That is the
`Watchdog`: a call the server has not answered in `STALL_SECONDS` makes it try a fresh connection
(`PROBE_SECONDS`); a server that answers that is alive and merely busy (the call goes on, checked
again later), one that does not is frozen, and the watchdog shuts down the socket of every call in
flight on it, which then fails at once with the reason. A call on a frozen server therefore fails
within `FROZEN_BOUND_SECONDS`; the store's follower then knows the server is down and later calls
fail immediately until it is back (`store`, `changes`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict

from semula.store.postgres import text as pg_text
from semula.store.postgres.spec import SERVER_SCHEMES, is_server_store, masked  # noqa: F401 - re-exported
from semula.store.types import StoreError

# The pool logs every failed connection attempt (several lines each, a few a second while the server
# is down); semula says once why the store is unavailable and when it is back.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
# psycopg warns about a failed rollback on a connection the watchdog shut: the call's own error says why.
logging.getLogger("psycopg").setLevel(logging.ERROR)

POOL_MIN = 1
POOL_MAX = 4
CONNECT_TIMEOUT_SECONDS = 3
POOL_WAIT_SECONDS = 5.0  # a call waits this long for a connection before failing open

# What each session asks of the server (`options`), so that a live server ends a stuck statement itself.
STATEMENT_TIMEOUT_MS = 60_000  # longer than any statement semula runs (the start-up load included)
LOCK_TIMEOUT_MS = 10_000
IDLE_IN_TRANSACTION_MS = 60_000  # a client frozen mid-transaction does not hold its locks for ever
# A dead network: keepalives on an idle connection (the LISTEN one), tcp_user_timeout on unacknowledged data.
KEEPALIVE_IDLE_SECONDS = 5
KEEPALIVE_INTERVAL_SECONDS = 2
KEEPALIVE_COUNT = 3
TCP_USER_TIMEOUT_MS = 5_000
# A frozen server: the client-side bound (see the module docstring).
STALL_SECONDS = 1.5  # a call unanswered this long makes the watchdog check the server
PROBE_SECONDS = 2  # a fresh connection's wait (libpq's shortest connect_timeout)
FROZEN_BOUND_SECONDS = STALL_SECONDS + PROBE_SECONDS + 0.5  # = 4 s: a call on a frozen server fails by then


def _conninfo(url: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(url)
    except psycopg.Error:
        return {}


def _password(url: str) -> str | None:
    return str(_conninfo(url).get("password") or "") or None


def scrub(text: str, url: str) -> str:
    """`text` without the URL's password, wherever the driver may have echoed it."""
    password = _password(url)
    text = text.replace(url, masked(url))
    return text.replace(password, "***") if password else text


def reason(e: BaseException) -> str:
    """One line saying why: the server's own words when it gave any (a wrong password, too many
    clients), else the driver's first line."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    for line in lines:
        for severity in ("FATAL:", "ERROR:"):
            if severity in line:  # "connection to server at … failed: FATAL:  <the server's reason>"
                return line.rsplit(severity, 1)[1].strip() or line
    return lines[0] if lines else type(e).__name__


def server_answered(e: BaseException) -> bool:
    """Whether a failed connection attempt was refused by the server itself (it is up, and said why)."""
    return "FATAL:" in str(e) or "ERROR:" in str(e)


def describe(e: BaseException, url: str) -> str:
    if isinstance(e, psycopg.OperationalError) and server_answered(e):
        return scrub(f"the Postgres store {masked(url)} refused the connection: {reason(e)}", url)
    if isinstance(e, psycopg_pool.PoolTimeout) or isinstance(e, psycopg.OperationalError):
        return scrub(f"the Postgres store {masked(url)} is unreachable: {reason(e)}", url)
    return scrub(f"the Postgres store {masked(url)} failed: {reason(e)}", url)


@contextmanager
def pg_errors(url: str) -> Iterator[None]:
    try:
        yield
    except (psycopg.Error, psycopg_pool.PoolTimeout) as e:
        raise StoreError(describe(e, url)) from e


def connection_kwargs(url: str, schema: str | None) -> dict[str, object]:
    """What every connection semula makes asks for: timeouts on the server, keepalives on the socket.

    The URL's own `options` are kept (after ours, so they may override the timeouts); the schema's
    search_path comes last."""
    settings = [f"-c statement_timeout={STATEMENT_TIMEOUT_MS}", f"-c lock_timeout={LOCK_TIMEOUT_MS}",
                f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"]
    if given := str(_conninfo(url).get("options") or "").strip():
        settings.append(given)
    if schema:
        settings.append(f"-c search_path={schema}")
    return {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS, "application_name": "semula", "options": " ".join(settings),
        "keepalives": 1, "keepalives_idle": KEEPALIVE_IDLE_SECONDS,
        "keepalives_interval": KEEPALIVE_INTERVAL_SECONDS, "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
    }


def prepare(con: psycopg.Connection) -> None:
    """Every connection's adapters: NUL-safe text (`text`)."""
    pg_text.register(con.adapters)


def shut_socket(con: psycopg.Connection) -> None:
    """Shut a connection's socket down from another thread (through a dup of the fd: the connection's
    own stays libpq's): the read or write it is blocked in returns at once, and fails."""
    try:
        fd = con.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, psycopg.Error):
        pass


class Watch:
    """One call on one connection, while the watchdog looks after it (a context manager)."""

    def __init__(self, dog: Watchdog, con: psycopg.Connection) -> None:
        self.dog = dog
        self.con = con
        self.due = 0.0
        self.broken: str | None = None  # why the watchdog shut this connection

    def __enter__(self) -> Watch:
        self.dog._add(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.dog._remove(self)
        if e is None and self.broken is None:
            self.dog.frozen = None  # the server answered
        if self.broken is not None and isinstance(e, (psycopg.Error, StoreError)):
            raise StoreError(f"the Postgres store {masked(self.dog.url)} is unreachable: {self.broken}") from e

    def shut(self, why: str) -> None:
        if self.broken is None:
            self.broken = why
            shut_socket(self.con)


class Watchdog:
    """Bounds every call on a server that stopped answering (see the module docstring).

    `watch(con)` around a call; `on_frozen(reason)` is told when the server is found frozen (before
    the calls in flight fail). One thread, started on first use, sleeping while nothing is watched."""

    def __init__(self, url: str, on_frozen: Callable[[str], None] | None = None,
                 stall: float = STALL_SECONDS, probe: float = PROBE_SECONDS) -> None:
        self.url = url
        self.on_frozen = on_frozen
        self.stall = stall
        self.probe_seconds = probe
        self.frozen: str | None = None  # why the last probe found the server frozen; None once it answers
        self._cv = threading.Condition()
        self._watches: set[Watch] = set()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._probing: threading.Thread | None = None

    def watch(self, con: psycopg.Connection) -> Watch:
        return Watch(self, con)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def _add(self, w: Watch) -> None:
        with self._cv:
            w.due = time.monotonic() + self.stall
            idle = not self._watches
            self._watches.add(w)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="semula-pg-watchdog", daemon=True)
                self._thread.start()
            if idle:  # a later watch is never due before the ones the thread already waits for
                self._cv.notify_all()

    def _remove(self, w: Watch) -> None:
        with self._cv:
            self._watches.discard(w)

    def _run(self) -> None:
        while True:
            with self._cv:
                if self._closed:
                    return
                now = time.monotonic()
                due = min((w.due for w in self._watches), default=None)
                if due is None or due > now:
                    self._cv.wait(None if due is None else due - now)
                    continue
                overdue = [w for w in self._watches if w.due <= now]
            stalled = time.monotonic() - min(w.due for w in overdue) + self.stall
            why = self._probe()
            with self._cv:
                now = time.monotonic()
                if why is None:
                    self.frozen = None
                    for w in overdue:
                        w.due = now + self.stall  # busy, not frozen: look again later
                    continue
                why = f"the server stopped answering (no reply in {stalled:.1f} s; {why})"
                self.frozen = why
            if self.on_frozen is not None:  # first: the line saying so comes before the calls fail
                try:
                    self.on_frozen(why)
                except Exception:
                    pass
            with self._cv:  # under the lock: a call that already ended (its fd maybe reused) is not shut
                for w in list(self._watches):  # every call in flight waits on the same frozen server
                    w.shut(why)

    def _probe(self) -> str | None:
        """None if a fresh connection gets an answer (any answer: a server refusing a connection is
        alive); else why not. A probe still stuck from last time means no answer."""
        if self._probing is not None and self._probing.is_alive():
            return "a new connection is still unanswered"
        outcome: list[str | None] = []

        def attempt() -> None:
            try:
                with psycopg.connect(self.url, autocommit=True,
                                     **{**connection_kwargs(self.url, None),
                                        "connect_timeout": self.probe_seconds}) as con:  # type: ignore[arg-type]
                    con.execute("SELECT 1")
                outcome.append(None)
            except psycopg.Error as e:
                outcome.append(None if server_answered(e) else f"a new connection: {scrub(reason(e), self.url)}")
            except Exception as e:  # noqa: BLE001 - whatever it is, the server did not answer
                outcome.append(type(e).__name__)

        self._probing = threading.Thread(target=attempt, name="semula-pg-probe", daemon=True)
        self._probing.start()
        self._probing.join(self.probe_seconds + 0.5)
        if not outcome:
            return f"a new connection got no answer in {self.probe_seconds} s"
        return outcome[0]


def connect(url: str, schema: str | None, autocommit: bool = True) -> psycopg.Connection:
    """A connection outside the pool, with semula's settings and adapters."""
    con = psycopg.connect(url, autocommit=autocommit, **connection_kwargs(url, schema))  # type: ignore[arg-type]
    prepare(con)
    return con


def check_server(url: str, schema: str | None, dog: Watchdog, sql: str = "SELECT 1") -> None:
    """One direct connection and statement: the server's own reason at once (a wrong password, too
    many clients, a timeout) instead of a pool that only says it did not fill up."""
    with pg_errors(url), connect(url, schema) as con, dog.watch(con):
        con.execute(sql)


def open_pool(url: str, schema: str | None, dog: Watchdog,
              configure: Callable[[psycopg.Connection], None] | None = None) -> psycopg_pool.ConnectionPool:
    """A small pool, opened and checked: a server that cannot be reached fails here, with the reason."""
    check_server(url, schema, dog)

    def configured(con: psycopg.Connection) -> None:
        prepare(con)
        if configure is not None:
            configure(con)

    pool = psycopg_pool.ConnectionPool(
        url, min_size=POOL_MIN, max_size=POOL_MAX, kwargs=connection_kwargs(url, schema), open=False,
        timeout=POOL_WAIT_SECONDS, configure=configured, name="semula",
    )  # no `check`: `PgStore` checks a connection on checkout itself, under the watchdog
    try:
        pool.open(wait=True, timeout=POOL_WAIT_SECONDS)
    except (psycopg.Error, psycopg_pool.PoolTimeout) as e:
        pool.close(timeout=1)
        check_server(url, schema, dog)  # why the pool could not fill (the server's reason, if it gives one)
        raise StoreError(describe(e, url)) from e
    return pool


def direct_connection(url: str, schema: str | None) -> psycopg.Connection:
    """A connection outside the pool (LISTEN needs one that stays ours); autocommit."""
    return connect(url, schema)
