"""Following the other proxies' writes: the change log, read by id, woken by LISTEN/NOTIFY.

Every write to the shared store adds a row to `changes` (triggers, `migrations`) and notifies
`semula_changes` at commit. The follower thread holds one direct connection that LISTENs (a pooled
one would be handed to others), and on every notification, or every few seconds anyway, reads the
log after the last id it applied. On (re)connect it catches up the same way, so nothing written
while it was away is missed. Behind PgBouncer's transaction pooling LISTEN does not work: with
`listen=False` it polls by id every `poll_seconds` instead.

Ids are handed out at insert but become visible at commit, so a lower id can appear after a higher
one was read: an id skipped over is asked for again until it shows up or `GAP_SECONDS` pass (a
rolled-back write never shows up).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import psycopg

from semula.store.postgres.connect import shut_socket
from semula.store.postgres.migrations import CHANNEL
from semula.store.types import StoreError, one_row

log = logging.getLogger("semula")

LISTEN_SAFETY_POLL_SECONDS = 2.0  # with LISTEN, still read the log this often (gaps, a lost notification)
POLL_SECONDS = 0.25  # without LISTEN
GAP_SECONDS = 10.0
MAX_GAPS = 10_000  # more ids missing than this: the caller reloads everything
RECONNECT_SECONDS = 1.0
BATCH = 5000
KEEP_SECONDS = 7 * 24 * 3600  # the log keeps a week; a proxy away longer reloads everything


@dataclass(frozen=True)
class Change:
    id: int
    kind: str  # entry | entry_deleted | alias | settings | candidate | reload
    project: str
    ref: int | None


class ChangeFollower:
    def __init__(self, connect: Callable[[], psycopg.Connection],
                 pooled: Callable[[], AbstractContextManager[psycopg.Connection]],
                 apply: Callable[[list[Change]], None], after: int, *, listen: bool = True, describe: str = "",
                 poll_seconds: float | None = None, on_state: Callable[[str | None], None] | None = None,
                 watch: Callable[[psycopg.Connection], AbstractContextManager[object]] | None = None) -> None:
        self._connect = connect
        self._pooled = pooled
        self._apply = apply
        self.last = after
        self.listen = listen
        self.describe = describe
        self.poll_seconds = poll_seconds or (LISTEN_SAFETY_POLL_SECONDS if listen else POLL_SECONDS)
        self._gaps: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="semula-pg-changes", daemon=True)
        self._down: str | None = None
        self._con: psycopg.Connection | None = None
        self._on_state = on_state or (lambda problem: None)  # told why the server is lost, and None when back
        self._watch = watch or (lambda con: nullcontext())  # bounds a statement on the direct connection
        self._state_lock = threading.Lock()  # `lost` is called from the store's watchdog too
        self._con_lock = threading.Lock()  # `stop` shuts the direct connection's socket only while it is open

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        con = self._con
        with self._con_lock:
            if con is not None and con is self._con and not con.closed:
                shut_socket(con)  # wakes a wait for notifications at once (a cancel would not: no query runs)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.listen:
                    self._listen_loop()
                else:
                    self._poll_loop()
            except (psycopg.Error, StoreError, OSError) as e:
                if self._stop.is_set():
                    break  # stopping: the socket was shut on purpose
                self._lost(e)
                self._stop.wait(RECONNECT_SECONDS)
            except Exception as e:  # a bug in applying: say so, keep following
                log.warning("semula: applying other proxies' changes failed: %s", e)
                self._stop.wait(RECONNECT_SECONDS)
            finally:
                self._close_direct()

    def _lost(self, e: BaseException) -> None:
        if isinstance(e, StoreError) and "stopped answering" in str(e):  # the watchdog's reason, not the socket's
            reason = str(e).split(" is unreachable: ", 1)[-1]
        else:
            cause = e.__cause__ if isinstance(e, StoreError) and e.__cause__ is not None else e
            reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        self.lost(reason)

    def lost(self, reason: str) -> None:
        """The server is unavailable: say so once (until it is back); calls fail at once meanwhile."""
        with self._state_lock:
            if self._down is None:
                print(f"semula: lost the Postgres store {self.describe} ({reason}): hits are served from memory, "
                      "new calls are not recorded (replay: refused); reconnecting by itself", flush=True)
            self._down = reason
            self._on_state(reason)

    def _back(self) -> None:
        with self._state_lock:
            self._on_state(None)
            if self._down is not None:
                print(f"semula: the Postgres store {self.describe} is back; following changes again", flush=True)
                self._down = None

    def _listen_loop(self) -> None:
        con = self._con = self._connect()
        with self._watch(con):
            con.execute(f"LISTEN {CHANNEL}")
        self._after_reconnect()
        self.catch_up()  # after LISTEN: whatever commits from here on also notifies
        self._back()
        while not self._stop.is_set():
            notified = False
            for _ in con.notifies(timeout=self.poll_seconds, stop_after=1):
                notified = True
            if notified:  # drain the burst that came with it, then read the log once
                for _ in con.notifies(timeout=0.01):
                    pass
            self.catch_up()
            if self._down is not None:  # the watchdog saw the server frozen, and it answers again
                self._back()

    def _poll_loop(self) -> None:
        self._after_reconnect()
        while not self._stop.is_set():
            self.catch_up()
            self._back()
            self._stop.wait(self.poll_seconds)

    def _after_reconnect(self) -> None:
        """Trim the log's old rows (any proxy may), and reload everything if rows we never read were trimmed."""
        with self._pooled() as con:
            con.execute("DELETE FROM changes WHERE at < (now() AT TIME ZONE 'utc') - %s * interval '1 second'",
                        [KEEP_SECONDS])
            oldest = one_row(con.execute("SELECT min(id) FROM changes").fetchone())[0]
        if oldest is not None and self.last and oldest > self.last + 1:
            self._apply([Change(0, "reload", "", None)])

    def _close_direct(self) -> None:
        with self._con_lock:
            con, self._con = self._con, None
            if con is not None:
                try:
                    con.close()
                except Exception:
                    pass

    def catch_up(self) -> None:
        """Read and apply the log after the last id (and the ids still missing below it)."""
        while not self._stop.is_set():
            now = time.monotonic()
            self._gaps = {i: t for i, t in self._gaps.items() if now - t < GAP_SECONDS}
            with self._pooled() as con:
                rows = con.execute("SELECT id, kind, project, ref FROM changes WHERE id > %s OR id = ANY(%s) "
                                   "ORDER BY id LIMIT %s", [self.last, list(self._gaps), BATCH]).fetchall()
            changes = [Change(int(i), k, p, int(r) if r is not None else None) for i, k, p, r in rows]
            fresh = [c for c in changes if c.id > self.last]
            for c in changes:
                self._gaps.pop(c.id, None)
            expected = self.last + 1
            for c in fresh:
                for missing in range(expected, min(c.id, expected + MAX_GAPS)):
                    self._gaps[missing] = now
                expected = c.id + 1
            if len(self._gaps) >= MAX_GAPS:
                self._gaps.clear()
                changes.append(Change(0, "reload", "", None))
            if changes:
                self._apply(changes)
            if fresh:
                self.last = fresh[-1].id
            if len(rows) < BATCH:
                return
