"""The shared Postgres store: the same `RecordingStore` as the DuckDB file, on a server many proxies use.

Each call takes a connection from a small pool (`connect`) for one transaction, so the store is
safe from any thread and survives a server restart: a failed call raises `StoreError`, and the next
one gets a fresh connection. Every call runs under the watchdog (`connect.Watchdog`): on a server
that stopped answering it fails within `FROZEN_BOUND_SECONDS`, and the follower, told at once, says
"lost the Postgres store" and makes later calls fail immediately until the server is back. Text is
NUL-safe (`text`). Recording is one statement, `INSERT … ON CONFLICT (project,
request_fp) DO UPDATE … RETURNING id`: two runners recording the same request at once get one
entry (in the ordered-repeats mode `request_fp` carries the sequence number). The SQL both stores
share (reads, aliases, the review queue, settings) is `store.sql.SqlStore`'s, this class its
Postgres dialect; full text and vectors live in `lexical`; the change log other proxies follow in
`changes`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import psycopg
import psycopg_pool

from semula.store.postgres import migrations as pg_migrations
from semula.store.postgres.changes import ChangeFollower, Change
from semula.store.postgres.connect import (
    POOL_WAIT_SECONDS,
    Watchdog,
    check_server,
    describe,
    direct_connection,
    masked,
    open_pool,
    pg_errors,
)
from semula.store.postgres.lexical import PgLexical, PgVectors
from semula.store.rows import ENTRY_COLUMNS, KEY, WRITTEN, entry_from_row, written_values
from semula.store.sql import SqlStore, now
from semula.store.types import Entry, NewEntry, StoreError, one_row

log = logging.getLogger("semula")

UPSERT_SQL = (
    f"INSERT INTO entries ({', '.join(KEY + WRITTEN)}, created_at, updated_at) "
    f"VALUES ({', '.join(['%s'] * (len(KEY + WRITTEN) + 2))}) "
    f"ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in WRITTEN) + ", updated_at = EXCLUDED.updated_at RETURNING id"
)


_entry = entry_from_row


def _upsert_params(new: NewEntry, now: datetime) -> list[Any]:
    return [*written_values(new, KEY + WRITTEN), now, now]


class PgStore(SqlStore):
    """`RecordingStore` on PostgreSQL. Thread-safe: every call is its own pooled transaction."""

    placeholder = "%s"
    reconnects = True  # a failed call does not need the store reopened: keep serving from memory
    shared = True  # many proxies, one store (and no file: `SqlStore.file` stays None)

    def __init__(self, url: str, schema: str | None = None, listen: bool = True, follow: bool = True):
        self.url = url
        self.schema = schema
        self.listen = listen  # LISTEN/NOTIFY (direct connection); False: poll the change log by id
        self.path = masked(url)  # what messages call this store
        self.read_only = False
        self._follower: ChangeFollower | None = None
        # an engine on this store follows other writers' changes (`engine.follow`); a one-shot command need not
        self.follows_changes = follow
        self.down: str | None = None  # why the server is unreachable, as the follower last saw it
        self._watchdog = Watchdog(url, on_frozen=self._frozen)
        try:
            self._pool = open_pool(url, schema, self._watchdog)
        except BaseException:
            self._watchdog.close()
            raise
        self.vectors = PgVectors(self)

    @classmethod
    def open(cls, url: str, schema: str | None = None, listen: bool = True, follow: bool = True) -> PgStore:
        """Connect and migrate (under the advisory lock). StoreError says why it cannot."""
        if schema:
            dog = Watchdog(url)
            try:
                check_server(url, None, dog, f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            finally:
                dog.close()
        store = cls(url, schema, listen, follow)
        try:
            with store.connection() as con:
                applied = pg_migrations.migrate(con)  # no statement or lock timeout: it may wait for another's
            if applied:
                log.info("semula: Postgres store %s migrated: %s", store.path, ", ".join(applied))
        except BaseException:
            store.close()
            raise
        return store

    def for_thread(self) -> PgStore:
        """A reader for another thread: the pool is thread-safe, so the same store (its close does nothing)."""
        return _ThreadReader(self)

    def close(self) -> None:
        if self._follower is not None:
            self._follower.stop()
            self._follower = None
        self._pool.close(timeout=5)
        self._watchdog.close()

    def drop_schema(self) -> None:
        """Remove this store's own schema (a throwaway one, `semula eval`), then close."""
        schema = self.schema
        self.close()
        if schema:
            dog = Watchdog(self.url)
            try:
                check_server(self.url, None, dog, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                dog.close()

    @contextmanager
    def connection(self, probe: bool = False) -> Iterator[psycopg.Connection]:
        """A pooled connection for one transaction (committed on success); errors become StoreError.

        While the follower knows the server is down, calls fail at once instead of each waiting for
        the pool's timeout: misses go upstream without delay; the follower says when it is back.
        The checkout's check, the statements and the commit all run under the watchdog."""
        if self.down is not None and not probe:
            raise StoreError(f"the Postgres store {self.path} is unreachable: {self.down}")
        con = self._checkout()
        watch = self._watchdog.watch(con)
        try:
            with pg_errors(self.url), watch:
                try:
                    yield con
                except BaseException:
                    _rollback_quietly(con)
                    raise
                con.commit()
        finally:
            if watch.broken is not None or con.broken:
                con.close()  # the pool replaces it
            self._pool.putconn(con)

    def _checkout(self) -> psycopg.Connection:
        """A pooled connection that answers: a dead one (the server restarted) is replaced, a frozen
        server fails the call (within the watchdog's bound), no connection in `POOL_WAIT_SECONDS`
        says why."""
        deadline = time.monotonic() + POOL_WAIT_SECONDS
        while True:
            try:
                con = self._pool.getconn(timeout=max(deadline - time.monotonic(), 0.05))
            except psycopg_pool.PoolTimeout as e:
                why = self._watchdog.frozen
                raise StoreError(f"the Postgres store {self.path} is unreachable: {why}" if why
                                 else describe(e, self.url)) from e
            except psycopg.Error as e:
                raise StoreError(describe(e, self.url)) from e
            watch = self._watchdog.watch(con)
            try:
                with watch:
                    psycopg_pool.ConnectionPool.check_connection(con)
                return con
            except StoreError:  # the watchdog found the server frozen
                con.close()
                self._pool.putconn(con)
                raise
            except psycopg.Error as e:  # a dead connection: another one, while there is time
                con.close()
                self._pool.putconn(con)
                if time.monotonic() >= deadline:
                    raise StoreError(describe(e, self.url)) from e

    def _frozen(self, reason: str) -> None:
        """The watchdog found the server frozen: the follower says so once and marks the store down."""
        follower = self._follower
        if follower is not None:
            follower.lost(reason)

    # --- the dialect ---------------------------------------------------------------------------

    def _reading(self) -> AbstractContextManager[psycopg.Connection]:
        return self.connection()

    def transaction(self) -> AbstractContextManager[psycopg.Connection]:
        return self.connection()

    def _many(self, con: psycopg.Connection, sql: str, rows: list[Sequence[Any]]) -> None:
        with con.cursor() as cur:
            cur.executemany(sql, rows)

    @staticmethod
    def any_of(column: str) -> str:
        return f"{column} = ANY(?)"

    @staticmethod
    def upsert_sql(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
        return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['?'] * len(columns))}) "
                f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET "
                + ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in key))

    def _delete_vectors(self, con: psycopg.Connection, entry_id: int) -> None:
        self._run(con, "DELETE FROM entry_vector WHERE entry_id = ?", [entry_id])

    def lexical_index(self, on_error: Callable[[Exception], None] | None = None) -> PgLexical:
        return PgLexical(self)

    def connections_used(self) -> dict[str, int]:
        """The pool's own figures (the benchmark reports them)."""
        stats = self._pool.get_stats()
        return {"pool_size": stats.get("pool_size", 0), "pool_max": self._pool.max_size}

    # --- following other proxies' writes ----------------------------------------------------

    def change_position(self) -> int:
        row = self._one("SELECT coalesce(max(id), 0) FROM changes")
        return int(row[0]) if row else 0

    def follow(self, after: int, apply: Callable[[list[Change]], None], poll_seconds: float | None = None) -> None:
        """Call `apply` with every change after `after`, from a thread, until `close`. A second engine on
        the same store takes the follower over (the first one's would outlive `close` and report the
        closed pool as a lost server)."""
        if self._follower is not None:
            self._follower.stop()
        self._follower = ChangeFollower(
            lambda: direct_connection(self.url, self.schema), lambda: self.connection(probe=True), apply, after,
            listen=self.listen, describe=self.path, poll_seconds=poll_seconds, on_state=self._server_state,
            watch=self._watchdog.watch)
        self._follower.start()

    def _server_state(self, problem: str | None) -> None:
        self.down = problem

    # --- entries -------------------------------------------------------------------------------

    def upsert_entry(self, new: NewEntry) -> int:
        """Record an answer in one statement; the same request recorded twice (or by two runners at once)
        keeps one entry and its id."""
        row = self._one(UPSERT_SQL, _upsert_params(new, now()))
        if row is None:
            raise StoreError(f"the Postgres store {self.path} returned no id for a recording")
        return int(row[0])

    def upsert_entries(self, news: list[NewEntry]) -> list[int]:
        """Many recordings in one transaction (loading a recordings folder); ids in `news` order."""
        if not news:
            return []
        latest = {(n.project, n.request_fp): n for n in news}  # the last one for a request wins
        at = now()
        ids: dict[tuple[str, str], int] = {}
        with self.connection() as con, con.cursor() as cur:
            cur.executemany(UPSERT_SQL, [_upsert_params(n, at) for n in latest.values()], returning=True)
            for key in latest:
                ids[key] = int(one_row(cur.fetchone())[0])
                cur.nextset()
        return [ids[(n.project, n.request_fp)] for n in news]

    def memory_bytes(self) -> int | None:
        return None  # the server's memory, not this process's

    def recent_entries(self, max_bytes: int, stopping: Callable[[], bool] = lambda: False) -> list[Entry]:
        rows = self._all(  # one query: `stopping` has no page to stop between
            f"""SELECT {ENTRY_COLUMNS} FROM (
                    SELECT *, sum(octet_length(body) + 2 * octet_length(canonical)  -- as duckdb/recent.py estimates
                                  + octet_length(coalesce(last_text, '')) + 3000) OVER (ORDER BY id DESC) AS running
                    FROM entries WHERE kind = 'http'
                ) recent WHERE running <= %s ORDER BY id""", [max_bytes])
        return [_entry(row) for row in rows]


def _rollback_quietly(con: psycopg.Connection) -> None:
    if not con.closed and not con.broken:
        try:
            con.rollback()
        except psycopg.Error:
            pass


class _ThreadReader(PgStore):
    """The store, seen from another thread; closing it leaves the shared pool open."""

    def __init__(self, store: PgStore) -> None:  # no PgStore.__init__: the state is the store's own
        self.__dict__ = store.__dict__  # one state: the follower's `down` reaches both

    def for_thread(self) -> PgStore:
        return self

    def close(self) -> None:
        pass
