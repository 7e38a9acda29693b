"""Writing many recordings at once: one Arrow-backed UPDATE and INSERT instead of a transaction per row.

Per row, `DuckDBStore.upsert_entry` costs milliseconds; this costs about as much for ten thousand rows
(loading a recordings folder into an empty data dir).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import duckdb

from semula.store.rows import KEY, WRITTEN, column_value
from semula.store.types import NewEntry

_ENTRY_COLUMNS = (*KEY, *WRITTEN)
_ARROW_TYPES = {"status": "int32", "body": "binary", "streamed": "bool_", "prompt_tokens": "int64",
                "completion_tokens": "int64", "upstream_ms": "float64"}  # pyarrow's type factories, by name

Row = tuple[object, ...]


def encoded_chunks(news: list[NewEntry], max_bytes: int) -> Iterator[list[Row]]:
    """`news` encoded as rows (the last one for a request wins), in chunks of at most `max_bytes` of
    text and bodies (a single bigger row is a chunk of its own): one transaction per chunk keeps what
    DuckDB must hold uncommitted within its memory limit, whatever the recordings weigh."""
    latest = {(n.project, n.request_fp): n for n in news}
    chunk: list[Row] = []
    held = 0
    for new in latest.values():
        row = tuple(column_value(new, column) for column in _ENTRY_COLUMNS)
        size = sum(len(v) for v in row if isinstance(v, (str, bytes)))
        if chunk and held + size > max_bytes:
            yield chunk
            chunk, held = [], 0
        chunk.append(row)
        held += size
    if chunk:
        yield chunk


def upsert_rows(con: duckdb.DuckDBPyConnection, rows: list[Row], now: datetime) -> dict[tuple[str, str], int]:
    """Insert or update `rows` (from `encoded_chunks`) inside the caller's transaction; their entry ids
    by (project, request_fp)."""
    import pyarrow as pa  # here, not at import: pyarrow and numpy are ~0.2 s of a proxy's start-up

    table = pa.table({column: pa.array([row[i] for row in rows], getattr(pa, _ARROW_TYPES.get(column, "string"))())
                      for i, column in enumerate(_ENTRY_COLUMNS)})
    assignments = ", ".join(f"{c} = s.{c}" for c in _ENTRY_COLUMNS if c not in KEY)
    con.register("semula_incoming", table)
    try:
        con.execute(f"UPDATE entries SET {assignments}, updated_at = ? FROM semula_incoming s "
                    "WHERE entries.project = s.project AND entries.request_fp = s.request_fp", [now])
        con.execute(
            f"INSERT INTO entries ({', '.join(_ENTRY_COLUMNS)}, created_at, updated_at) "
            f"SELECT {', '.join('s.' + c for c in _ENTRY_COLUMNS)}, ?, ? FROM semula_incoming s "
            "WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.project = s.project AND e.request_fp = s.request_fp)",
            [now, now])
        return {(p, fp): i for i, p, fp in con.execute(
            "SELECT e.id, e.project, e.request_fp FROM entries e JOIN semula_incoming s "
            "ON e.project = s.project AND e.request_fp = s.request_fp").fetchall()}
    finally:
        con.unregister("semula_incoming")
