"""The DuckDB store: recordings, aliases and per-project settings in `<data dir>/semula.duckdb`.

One connection, used from one thread (the caller's store worker). Every DuckDB error is
mapped here to `StoreError`; what to do about it (fail open, refuse) is the caller's call.
The schema comes from `migrations` (named, ordered, forward-only). The store also hands out
the DuckDB-backed pieces the engine needs (`lexical_index()`, `vectors`), so nothing outside
`semula.store` touches the connection. `base.RecordingStore` is the interface it implements.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from semula.store import bulk, duckdb_recent, migrations
from semula.store.duckdb_connect import connect, working_copy
from semula.store.duckdb_meta import StoreMeta
from semula.store.duckdb_errors import describe_duckdb_error, store_errors
from semula.store.fts import LexicalIndex
from semula.store.rows import (CANDIDATE_COLUMNS, ENTRY_COLUMNS, KEY, WRITTEN, candidate_from_row, entry_from_row,
                               written_values)
from semula.store.types import Entry, NewEntry, StoreError
from semula.store.base import STORE_FILE
from semula.store.vectors import VectorTable, delete_vectors


_entry = entry_from_row
_candidate = candidate_from_row

BULK_CHUNK_BYTES = 16 * 1024 * 1024  # rows per transaction of `upsert_entries`: within DuckDB's memory limit
_UPDATE_SQL = f"UPDATE entries SET {', '.join(c + '=?' for c in WRITTEN)}, updated_at=? WHERE id=?"
_INSERT_SQL = (f"INSERT INTO entries ({', '.join(KEY + WRITTEN)}, created_at, updated_at) "
               f"VALUES ({', '.join(['?'] * (len(KEY + WRITTEN) + 2))}) RETURNING id")


def _filters(**columns: Any) -> tuple[str, list[Any]]:
    """A WHERE clause for the columns given a value (None or empty: no filter), and its parameters."""
    given = {column: value for column, value in columns.items() if value}
    return " AND ".join([f"{column} = ?" for column in given] or ["true"]), list(given.values())


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Store(StoreMeta):
    """Thin DuckDB adapter. Not thread-safe: call it from one thread."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool = False):
        self.con = con  # tests may inspect the database through it; code goes through the methods
        self.path = path
        self.read_only = read_only  # opened read_only: every write raises StoreError
        self.copied_from: Path | None = None  # this is a temporary working copy of a read-only store
        self.vectors = VectorTable(con, path)
        self._lexical: list[LexicalIndex] = []

    def for_thread(self) -> Store:
        """The same store on a new cursor, for reads on another thread; close it when done."""
        with self._errors():
            reader = Store(self.con.cursor(), self.path, read_only=self.read_only)
        return reader

    def lexical_index(self, on_error: Callable[[Exception], None] | None = None) -> LexicalIndex:
        """A new full-text index over this store's entries; closing the store closes it first."""
        with self._errors():
            index = LexicalIndex(self.con, on_error, read_only=self.read_only)
        self._lexical.append(index)
        return index

    @classmethod
    def open(cls, data_dir: Path | str, read_only: bool = False) -> Store:
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
            data_dir.mkdir(parents=True, exist_ok=True)
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
    def open_copy(cls, data_dir: Path | str) -> Store:
        """A writable temporary copy of a read-only store (migrated; writes are lost at close)."""
        store = cls.open(working_copy(Path(data_dir) / STORE_FILE))
        store.copied_from = Path(data_dir) / STORE_FILE
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
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._errors():
            self.con.begin()
            try:
                yield self.con
            except BaseException:
                self.con.rollback()
                raise
            self.con.commit()

    def migrate(self) -> list[str]:
        """Apply pending migrations; returns their names. DuckDB errors propagate (open maps them)."""
        return migrations.migrate(self.con)

    # --- entries -------------------------------------------------------------------------

    def upsert_entry(self, new: NewEntry) -> int:
        """Record an answer. Re-recording the same request keeps the entry's id (aliases stay valid)."""
        now = _now()
        with self.transaction() as con:
            row = con.execute(
                "SELECT id FROM entries WHERE project = ? AND request_fp = ?",
                [new.project, new.request_fp],
            ).fetchone()
            if row:
                con.execute(_UPDATE_SQL, [*written_values(new), now, row[0]])
                return int(row[0])
            row = con.execute(_INSERT_SQL, [*written_values(new, KEY + WRITTEN), now, now]).fetchone()
            return int(row[0])

    def upsert_entries(self, news: list[NewEntry]) -> list[int]:
        """Many recordings at once, ids in `news` order; a transaction per BULK_CHUNK_BYTES (DuckDB's memory limit)."""
        ids: dict[tuple[str, str], int] = {}
        for rows in bulk.encoded_chunks(news, BULK_CHUNK_BYTES):
            with self.transaction() as con:
                ids.update(bulk.upsert_rows(con, rows, _now()))
        return [ids[(n.project, n.request_fp)] for n in news]

    def get_entry(self, entry_id: int) -> Entry | None:
        with self._errors():
            row = self.con.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", [entry_id]).fetchone()
        return _entry(row) if row else None

    def memory_bytes(self) -> int | None:  # DuckDB's buffer pool and working memory (SEMULA_DUCKDB_MEMORY)
        with self._errors():
            return int(self.con.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()").fetchone()[0])

    def recent_entries(self, max_bytes: int) -> list[Entry]:
        """The newest entries within `max_bytes` as the answer cache counts them, oldest first (`duckdb_recent`)."""
        with self._errors():
            cursor = self.con.cursor()
            try:
                return duckdb_recent.recent_entries(cursor, max_bytes)
            finally:
                cursor.close()

    def delete_entry(self, entry_id: int) -> bool:
        with self.transaction() as con:
            found = con.execute("SELECT count(*) FROM entries WHERE id = ?", [entry_id]).fetchone()[0]
            con.execute("DELETE FROM aliases WHERE entry_id = ?", [entry_id])
            con.execute(
                "UPDATE review_candidates SET status = 'closed', decided_at = ? WHERE entry_id = ? AND status = 'open'",
                [_now(), entry_id],
            )
            delete_vectors(con, entry_id)  # as on Postgres: no vector outlives its recording
            con.execute("DELETE FROM entries WHERE id = ?", [entry_id])
        return bool(found)

    def list_entries(self, project: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        where, params = _filters(project=project)
        sql = ("SELECT id, project, provider, model, endpoint, streamed, status, octet_length(body) AS size, "
               f"created_at, updated_at, last_text FROM entries WHERE {where} ORDER BY id DESC LIMIT ?")
        params.append(limit)
        with self._errors():
            cursor = self.con.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def index_rows(self) -> list[tuple[int, str, str, str]]:
        """(id, project, request_fp, normalised_fp) of every entry: the in-memory index's source."""
        with self._errors():
            return self.con.execute("SELECT id, project, request_fp, normalised_fp FROM entries").fetchall()

    def alias_rows(self) -> list[tuple[str, str, int]]:
        with self._errors():
            return self.con.execute("SELECT project, normalised_fp, entry_id FROM aliases").fetchall()

    def project_canonicals(self, project: str, provider: str | None = None, limit: int = 2000,
                           endpoint: str | None = None) -> list[tuple[int, dict[str, Any]]]:
        where, params = _filters(project=project, provider=provider, endpoint=endpoint)
        sql = f"SELECT id, canonical FROM entries WHERE {where} ORDER BY id DESC LIMIT ?"
        params.append(limit)
        with self._errors():
            return [(int(i), json.loads(c)) for i, c in self.con.execute(sql, params).fetchall()]

    def set_normalised_fps(self, updates: list[tuple[int, str]]) -> None:
        with self.transaction() as con:
            for entry_id, fp in updates:
                con.execute("UPDATE entries SET normalised_fp = ? WHERE id = ?", [fp, entry_id])

    def set_fingerprints(self, entries: list[tuple[int, str, str]], candidates: list[tuple[int, str, str]]) -> None:
        """(id, request_fp, normalised_fp) of entries and review candidates, in one transaction."""
        with self.transaction() as con:
            for entry_id, request_fp, normalised_fp in entries:
                con.execute("UPDATE entries SET request_fp = ?, normalised_fp = ? WHERE id = ?",
                            [request_fp, normalised_fp, entry_id])
            for candidate_id, request_fp, normalised_fp in candidates:
                con.execute("UPDATE review_candidates SET request_fp = ?, request_normalised_fp = ? WHERE id = ?",
                            [request_fp, normalised_fp, candidate_id])
    def canonicals_after(self, after_id: int, limit: int = 1000) -> list[tuple[int, str, dict[str, Any]]]:
        """(id, project, canonical) of the entries after `after_id`, in id order: a batch of a full pass."""
        with self._errors():
            rows = self.con.execute("SELECT id, project, canonical FROM entries WHERE id > ? ORDER BY id LIMIT ?",
                                    [after_id, limit]).fetchall()
        return [(int(i), p, json.loads(c)) for i, p, c in rows]

    def set_last_texts(self, updates: list[tuple[int, str]]) -> None:
        with self.transaction() as con:
            for entry_id, text in updates:
                con.execute("UPDATE entries SET last_text = ? WHERE id = ?", [text, entry_id])

    def projects(self) -> list[str]:
        with self._errors():
            rows = self.con.execute(
                "SELECT project FROM entries UNION SELECT project FROM project_settings ORDER BY 1"
            ).fetchall()
        return [r[0] for r in rows]

    # --- aliases -------------------------------------------------------------------------

    def alias_requests(self, project: str) -> list[tuple[str, int, dict[str, Any] | None]]:
        with self._errors():
            rows = self.con.execute(
                "SELECT normalised_fp, entry_id, request_canonical FROM aliases WHERE project = ?", [project]
            ).fetchall()
        return [(fp, int(e), json.loads(c) if c else None) for fp, e, c in rows]

    def replace_aliases(self, project: str, aliases: list[tuple[str, int, dict[str, Any] | None]]) -> None:
        with self.transaction() as con:
            con.execute("DELETE FROM aliases WHERE project = ?", [project])
            for fp, entry_id, request in aliases:
                con.execute(
                    "INSERT OR REPLACE INTO aliases (project, normalised_fp, entry_id, created_at, request_canonical) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [project, fp, entry_id, _now(), json.dumps(request) if request is not None else None],
                )

    # --- review queue --------------------------------------------------------------------

    def paired_entries(self, project: str, request_normalised_fp: str) -> dict[int, str]:
        """entry id -> status of every candidate ever made for this request (never pair twice)."""
        with self._errors():
            rows = self.con.execute("SELECT entry_id, status FROM review_candidates WHERE project = ? "
                                    "AND request_normalised_fp = ?", [project, request_normalised_fp]).fetchall()
        return {int(e): s for e, s in rows}

    def add_candidates(self, project: str, request_fp: str, request_normalised_fp: str,
                       request_canonical: dict[str, Any], request_text: str,
                       candidates: list[tuple[str, float, str | None, str | None, int]]) -> list[dict[str, Any]]:
        """Queue (tier, score, guard_reason, reason, entry_id) candidates of one request, in one transaction."""
        request_json = json.dumps(request_canonical, ensure_ascii=False)
        rows = []
        with self.transaction() as con:
            for tier, score, guard_reason, reason, entry_id in candidates:
                rows.append(con.execute(
                    f"""INSERT INTO review_candidates (project, tier, score, guard_reason, reason, request_fp,
                        request_normalised_fp, request_canonical, request_text, entry_id, status, created_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?) RETURNING {CANDIDATE_COLUMNS}""",
                    [project, tier, score, guard_reason, reason, request_fp, request_normalised_fp,
                     request_json, request_text, entry_id, _now()],
                ).fetchone())
        return [_candidate(row) for row in rows]

    def candidates(self, project: str | None = None, status: str | None = "open", limit: int = 200,
                   entry_id: int | None = None) -> list[dict[str, Any]]:
        where, params = _filters(project=project, status=status, entry_id=entry_id)
        sql = f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE {where} ORDER BY id LIMIT ?"
        params.append(limit)
        with self._errors():
            return [_candidate(r) for r in self.con.execute(sql, params).fetchall()]

    def candidate(self, candidate_id: int) -> dict[str, Any] | None:
        with self._errors():
            row = self.con.execute(
                f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE id = ?", [candidate_id]
            ).fetchone()
        return _candidate(row) if row else None

    def set_candidate_status(self, candidate_ids: list[int], status: str) -> None:
        if not candidate_ids:
            return
        with self.transaction() as con:
            for candidate_id in candidate_ids:
                con.execute(
                    "UPDATE review_candidates SET status = ?, decided_at = ? WHERE id = ?", [status, _now(), candidate_id]
                )

    def open_candidates_for(self, project: str, request_normalised_fp: str,
                            created_before: datetime | None = None) -> list[dict[str, Any]]:
        sql = (f"SELECT {CANDIDATE_COLUMNS} FROM review_candidates WHERE project = ? AND request_normalised_fp = ? "
               "AND status = 'open'")
        params: list[Any] = [project, request_normalised_fp]
        if created_before is not None:
            sql += " AND created_at < ?"
            params.append(created_before)
        with self._errors():
            return [_candidate(r) for r in self.con.execute(sql, params).fetchall()]

    def open_request_keys(self) -> set[tuple[str, str]]:
        with self._errors():
            rows = self.con.execute(
                "SELECT DISTINCT project, request_normalised_fp FROM review_candidates WHERE status = 'open'"
            ).fetchall()
        return {(p, fp) for p, fp in rows}

    def canonicals_by_ids(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        if not ids:
            return {}
        with self._errors():
            rows = self.con.execute(
                "SELECT id, canonical FROM entries WHERE id IN (SELECT unnest(?::BIGINT[]))", [ids]
            ).fetchall()
        return {int(i): json.loads(c) for i, c in rows}

    def entries_with_normalised_fp(self, project: str, normalised_fp: str) -> list[int]:
        with self._errors():
            rows = self.con.execute(
                "SELECT id FROM entries WHERE project = ? AND normalised_fp = ?", [project, normalised_fp]
            ).fetchall()
        return [int(r[0]) for r in rows]

    # --- settings ------------------------------------------------------------------------

    def project_settings(self, project: str) -> dict[str, Any]:
        with self._errors():
            rows = self.con.execute(
                "SELECT key, value FROM project_settings WHERE project = ?", [project]
            ).fetchall()
        return {key: json.loads(value) for key, value in rows}

    def all_project_settings(self) -> dict[str, dict[str, Any]]:
        with self._errors():
            rows = self.con.execute("SELECT project, key, value FROM project_settings").fetchall()
        out: dict[str, dict[str, Any]] = {}
        for project, key, value in rows:
            out.setdefault(project, {})[key] = json.loads(value)
        return out

    def set_project_setting(self, project: str, key: str, value: Any) -> None:
        with self.transaction() as con:
            con.execute("DELETE FROM project_settings WHERE project = ? AND key = ?", [project, key])
            con.execute(
                "INSERT INTO project_settings VALUES (?, ?, ?)", [project, key, json.dumps(value)]
            )
