"""The DuckDB store: recordings, aliases and per-project settings in `<data dir>/semula.duckdb`.

One connection, used from one thread (the caller's store worker). Every DuckDB error is
mapped here to `StoreError`; what to do about it (fail open, refuse) is the caller's call.
The schema comes from `migrations` (named, ordered, forward-only). The SQL both stores share is
`store.sql.SqlStore`'s; this class is its DuckDB dialect plus what only DuckDB does: opening a
file (read-only, or a working copy), bulk writes through Arrow (`bulk`) and the paged preload
(`recent`). It also hands out the DuckDB-backed pieces the engine needs (`lexical_index()`,
`vectors`), so nothing outside `semula.store` touches the connection.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from semula.store.datadir import make_data_dir
from semula.store.duckdb import STORE_FILE
from semula.store.duckdb import bulk, migrations, recent
from semula.store.duckdb.connect import connect, working_copy
from semula.store.duckdb.errors import describe_duckdb_error, store_errors
from semula.store.duckdb.fts import LexicalIndex
from semula.store.duckdb.vectors import VectorTable, delete_vectors
from semula.store.rows import KEY, WRITTEN, written_values
from semula.store.sql import SqlStore, now
from semula.store.types import Entry, NewEntry, StoreError, one_row

MEMORY = ":memory:"  # DuckDB's name for a database held in memory
BULK_CHUNK_BYTES = 16 * 1024 * 1024  # rows per transaction of `upsert_entries`: within DuckDB's memory limit
BULK_MIN_ROWS = 8  # fewer rows than this are upserted a statement each (Arrow's fixed cost is ~9 rows')
_UPDATE_SQL = f"UPDATE entries SET {', '.join(c + '=?' for c in WRITTEN)}, updated_at=? WHERE id=?"
_INSERT_SQL = (f"INSERT INTO entries ({', '.join(KEY + WRITTEN)}, created_at, updated_at) "
               f"VALUES ({', '.join(['?'] * (len(KEY + WRITTEN) + 2))}) RETURNING id")


class DuckDBStore(SqlStore):
    """Thin DuckDB adapter. Not thread-safe: call it from one thread."""

    # the file has one writer, this process: nothing to follow, and a failed file is reopened (the
    # store thread's recovery); `file` is set per store
    follows_changes = False
    reconnects = False
    shared = False

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool = False):
        self.con = con  # tests may inspect the database through it; code goes through the methods
        self.path = path
        self.read_only = read_only  # opened read_only: every write raises StoreError
        self.copied_from: Path | None = None  # this is a temporary working copy of a read-only store
        self.file = path  # the data dir's file (a working copy says which one it copies: `open_copy`)
        self.vectors = VectorTable(con, path)
        self._lexical: list[LexicalIndex] = []

    def for_thread(self) -> DuckDBStore:
        """The same store on a new cursor, for reads on another thread; close it when done."""
        with self._errors():
            reader = DuckDBStore(self.con.cursor(), self.path, read_only=self.read_only)
        reader.file = self.file
        return reader

    def lexical_index(self, on_error: Callable[[Exception], None] | None = None) -> LexicalIndex:
        """A new full-text index over this store's entries; closing the store closes it first."""
        with self._errors():
            index = LexicalIndex(self.con, on_error, read_only=self.read_only)
        self._lexical.append(index)
        return index

    @classmethod
    def open(cls, data_dir: Path | str, read_only: bool = False) -> DuckDBStore:
        """Open (and migrate) the store; `read_only` never writes (needing migrations: a temp copy)."""
        data_dir = Path(data_dir)
        path = data_dir / STORE_FILE
        if read_only:
            if not path.is_file():
                raise StoreError(f"there is no store at {path} to read (read-only data dir)")
            store = cls(connect(path, read_only=True), path, read_only=True)
            with store._errors():
                if not migrations.pending(store.con):
                    return store
            store.close()
            return cls.open_copy(data_dir)
        try:
            make_data_dir(data_dir)
        except OSError as e:
            raise StoreError(f"cannot create the data dir {data_dir}: {e}") from e
        new = not path.exists()
        store = cls(connect(path), path)
        try:
            if new:  # DuckDB takes no file mode: make the new, still empty store private at once
                with suppress(OSError):
                    path.chmod(0o600)
            store.migrate()
        except duckdb.Error as e:
            store.close()
            raise StoreError(describe_duckdb_error(e, path)) from e
        return store

    @classmethod
    def in_memory(cls, label: Path) -> DuckDBStore:
        """A migrated store in memory, never written to disk (`semula eval`'s throwaway store: a commit there
        costs no file write, about a third of an evaluated pair's time); `label` names it in messages."""
        store = cls(connect(Path(MEMORY)), label)
        try:
            store.migrate()
        except duckdb.Error as e:
            store.close()
            raise StoreError(describe_duckdb_error(e, label)) from e
        return store

    @classmethod
    def open_copy(cls, data_dir: Path | str) -> DuckDBStore:
        """A writable temporary copy of a read-only store (migrated; writes are lost at close)."""
        store = cls.open(working_copy(Path(data_dir) / STORE_FILE))
        store.copied_from = store.file = Path(data_dir) / STORE_FILE
        return store

    def close(self) -> None:
        # Background index builds use this connection: stop them before it closes, whoever closes
        # the store (an engine, or a caller whose engine never finished opening).
        for index in self._lexical:
            index.close()
        try:
            self.con.close()
        except duckdb.Error:
            pass
        if self.copied_from is not None:  # the temporary working copy of a read-only store
            shutil.rmtree(self.path.parent, ignore_errors=True)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        with store_errors(lambda e: describe_duckdb_error(e, self.path)):
            yield

    @contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._errors():
            yield self.con

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._errors():
            self.con.begin()
            try:
                yield self.con
            except BaseException:
                self.con.rollback()
                raise
            self.con.commit()

    def _many(self, con: duckdb.DuckDBPyConnection, sql: str, rows: list[Sequence[Any]]) -> None:
        for row in rows:  # a statement a row, inside the one transaction
            con.execute(sql, row)

    @staticmethod
    def any_of(column: str) -> str:
        return f"{column} IN (SELECT unnest(?::BIGINT[]))"

    @staticmethod
    def upsert_sql(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
        return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['?'] * len(columns))})"

    def _delete_vectors(self, con: duckdb.DuckDBPyConnection, entry_id: int) -> None:
        delete_vectors(con, entry_id)

    def migrate(self) -> list[str]:
        """Apply pending migrations; returns their names. DuckDB errors propagate (open maps them)."""
        return migrations.migrate(self.con)

    # --- recording and the preload: DuckDB's own ---------------------------------------------

    def upsert_entry(self, new: NewEntry) -> int:
        """Record an answer. Re-recording the same request keeps the entry's id (aliases stay valid)."""
        with self.transaction() as con:
            return _upsert_one(con, new, now())

    def upsert_entries(self, news: list[NewEntry]) -> list[int]:
        """Many recordings at once, ids in `news` order (the last one for a request wins): a few in one
        transaction, a statement each; more through Arrow, a transaction per BULK_CHUNK_BYTES (DuckDB's
        memory limit). The Arrow statements cost ~9 ms whatever their size: a row's own, ~1 ms."""
        at = now()
        if len(news) < BULK_MIN_ROWS:
            latest = {(n.project, n.request_fp): n for n in news}
            with self.transaction() as con:
                ids = {key: _upsert_one(con, new, at) for key, new in latest.items()}
            return [ids[(n.project, n.request_fp)] for n in news]
        found: dict[tuple[str, str], int] = {}
        for rows in bulk.encoded_chunks(news, BULK_CHUNK_BYTES):
            with self.transaction() as con:
                found.update(bulk.upsert_rows(con, rows, at))
        return [found[(n.project, n.request_fp)] for n in news]

    def memory_bytes(self) -> int | None:  # DuckDB's buffer pool and working memory (SEMULA_DUCKDB_MEMORY)
        with self._errors():
            return int(one_row(self.con.execute(
                "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()").fetchone())[0])

    def recent_entries(self, max_bytes: int, stopping: Callable[[], bool] = lambda: False) -> list[Entry]:
        """The newest entries within `max_bytes` as the answer cache counts them, oldest first (`recent`);
        fewer when `stopping` turns true between pages."""
        with self._errors():
            cursor = self.con.cursor()
            try:
                return recent.recent_entries(cursor, max_bytes, stopping)
            finally:
                cursor.close()


def _upsert_one(con: duckdb.DuckDBPyConnection, new: NewEntry, at: datetime) -> int:
    """Insert or update one recording inside the caller's transaction; its entry id."""
    row = con.execute("SELECT id FROM entries WHERE project = ? AND request_fp = ?",
                      [new.project, new.request_fp]).fetchone()
    if row:
        con.execute(_UPDATE_SQL, [*written_values(new), at, row[0]])
        return int(row[0])
    return int(one_row(con.execute(_INSERT_SQL, [*written_values(new, KEY + WRITTEN), at, at]).fetchone())[0])
