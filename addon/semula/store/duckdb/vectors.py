"""The embedding tier's vectors in DuckDB (`entry_vector`), behind a small class bound to one handle.

The embeddings package computes vectors and searches them in memory; reading and writing them is
the store's business, so no module outside `semula.store` touches a DuckDB connection. Vectors are
float32 blobs keyed by (entry, model): a vector from one model means nothing for another.
DuckDB errors come out as `StoreError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from semula.store.duckdb.errors import describe_duckdb_error, store_errors
from semula.store.duckdb.migrations import create_vector_table
from semula.store.rows import vector_matrix
from semula.store.types import StoreError, VectorStatus, one_row


def delete_vectors(con: duckdb.DuckDBPyConnection, entry_id: int) -> None:
    """Delete an entry's vectors, in the caller's transaction (the table exists once a vector was stored)."""
    if one_row(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'entry_vector'").fetchone())[0]:
        con.execute("DELETE FROM entry_vector WHERE entry_id = ?", [entry_id])


class VectorTable:
    """`entry_vector` on one DuckDB handle. A handle belongs to one thread: `for_thread` gives another."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path,
                 describe: Callable[[Exception], str] | None = None):
        self._con = con
        self._path = path
        self._describe = describe or (lambda e: describe_duckdb_error(e, path))

    def for_thread(self) -> VectorTable:
        """The same table on a new cursor of the same database, for another thread; close it when done."""
        with store_errors(self._describe):
            return VectorTable(self._con.cursor(), self._path, self._describe)

    def close(self) -> None:
        try:
            self._con.close()
        except duckdb.Error:
            pass

    def ensure_table(self) -> None:
        """Create the table if a migration has not (idempotent)."""
        with store_errors(self._describe):
            create_vector_table(self._con)

    def has_table(self) -> bool:
        with store_errors(self._describe):
            return bool(one_row(self._con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'entry_vector'").fetchone())[0])

    def put(self, model: str, rows: Iterable[tuple[int, np.ndarray]]) -> int:
        """Store (entry_id, vector) rows for `model`, replacing earlier ones; returns how many."""
        now = datetime.now(UTC).replace(tzinfo=None)
        params = []
        for entry_id, vector in rows:
            v = np.ascontiguousarray(vector, dtype=np.float32).ravel()
            params.append([int(entry_id), model, int(v.shape[0]), v.tobytes(), now])
        if params:
            with store_errors(self._describe):
                self._con.executemany(
                    "INSERT OR REPLACE INTO entry_vector (entry_id, model, dim, vector, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    params,
                )
        return len(params)

    def load(self, model: str, project: str) -> tuple[np.ndarray, np.ndarray]:
        """(ids, matrix) of the project's live entries that have a vector from `model`, by entry id."""
        with store_errors(self._describe):
            rows = self._con.execute(
                "SELECT v.entry_id, v.dim, v.vector FROM entry_vector v JOIN entries e ON e.id = v.entry_id "
                "WHERE v.model = ? AND e.project = ? ORDER BY v.entry_id",
                [model, project],
            ).fetchall()
        return vector_matrix(rows)

    def entries_without(self, model: str, limit: int = 1000) -> list[tuple[int, str, dict[str, Any]]]:
        """(id, project, canonical) of entries with no vector from `model`, oldest first."""
        with store_errors(self._describe):
            rows = self._con.execute(
                "SELECT e.id, e.project, e.canonical FROM entries e WHERE e.kind = 'http' AND NOT EXISTS "
                "(SELECT 1 FROM entry_vector v WHERE v.entry_id = e.id AND v.model = ?) ORDER BY e.id LIMIT ?",
                [model, int(limit)],
            ).fetchall()
        return [(int(i), p, json.loads(c)) for i, p, c in rows]

    def count_without(self, model: str) -> int:
        with store_errors(self._describe):
            return int(one_row(self._con.execute(
                "SELECT count(*) FROM entries e WHERE e.kind = 'http' AND NOT EXISTS "
                "(SELECT 1 FROM entry_vector v WHERE v.entry_id = e.id AND v.model = ?)",
                [model],
            ).fetchone())[0])

    def counts(self) -> dict[str, int]:
        """Vectors stored per model."""
        with store_errors(self._describe):
            return {m: int(n) for m, n in self._con.execute(
                "SELECT model, count(*) FROM entry_vector GROUP BY model ORDER BY model").fetchall()}

    def entry_count(self) -> int:
        with store_errors(self._describe):
            return int(one_row(self._con.execute("SELECT count(*) FROM entries").fetchone())[0])


def read_vector_status(store_path: Path, model: str) -> VectorStatus:
    """Look at a store no process holds, read-only (no migration, no extension); StoreError says
    `cannot open …` or `cannot read …`."""

    def first_line(e: Exception) -> str:
        return (str(e).splitlines() or [type(e).__name__])[0]

    try:
        con = duckdb.connect(str(store_path), read_only=True)
    except duckdb.Error as e:
        raise StoreError(f"cannot open {store_path}: {first_line(e)}") from e
    table = VectorTable(con, store_path, describe=lambda e: f"cannot read {store_path}: {first_line(e)}")
    try:
        has_table = table.has_table()
        entries = table.entry_count()
        if not has_table:
            return VectorStatus(entries, None, None)
        counts = table.counts()
        missing = table.count_without(model) if model not in counts or counts[model] < entries else None
        return VectorStatus(entries, counts, missing)
    finally:
        table.close()
