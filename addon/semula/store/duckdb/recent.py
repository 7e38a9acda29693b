"""The newest entries of a DuckDB store within a byte budget, read so that DuckDB's memory stays within its
limit: the preload that warms the answer cache at start."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from semula.store.rows import ENTRY_COLUMNS, ENTRY_NAMES, entry_from_row
from semula.store.types import Entry

PAGE_ROWS, PAGE_BYTES = 64, 4 * 1024 * 1024  # one read: DuckDB holds one page of bodies at a time
_CANONICAL, _LAST_TEXT, _BODY = (ENTRY_NAMES.index(c) for c in ("canonical", "last_text", "body"))


def recent_entries(cursor: duckdb.DuckDBPyConnection, max_bytes: int,
                   stopping: Callable[[], bool] = lambda: False) -> list[Entry]:
    """The newest entries whose bodies, requests and texts fit in max_bytes, oldest first. Estimated as
    `index.entry_bytes` counts them parsed (about twice the request's JSON, plus ~3 KB of objects); the
    caller counts exactly and stops at the budget. Read in pages of ids newest first (a window over every
    body went beyond DuckDB's memory limit), each page smaller when entries are big."""
    ids = sorted((i for (i,) in cursor.execute("SELECT id FROM entries WHERE kind = 'http'").fetchall()), reverse=True)
    newest_first: list[Entry] = []
    held, page, start = 0, PAGE_ROWS, 0
    while start < len(ids) and held <= max_bytes and not stopping():
        chunk, start = ids[start:start + page], start + page
        rows = sorted(_page_rows(cursor, chunk), key=lambda r: r[0], reverse=True)  # id first (ENTRY_COLUMNS)
        sizes = [_estimated_bytes(row) for row in rows]
        for row, size in zip(rows, sizes):
            held += size
            if held > max_bytes:
                break
            newest_first.append(entry_from_row(row))
        if rows:
            page = max(1, min(PAGE_ROWS, PAGE_BYTES * len(rows) // sum(sizes)))
    return newest_first[::-1]


def _page_rows(cursor: duckdb.DuckDBPyConnection, ids: list[int]) -> list[tuple]:
    """The rows of `ids` (newest first): one range scan, or one index lookup each when DuckDB has no memory
    for the range's vectors of bodies."""
    try:
        rows = cursor.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id BETWEEN ? AND ? AND kind = 'http'",
                              [ids[-1], ids[0]]).fetchall()
    except duckdb.OutOfMemoryException:
        one_each = (cursor.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", [i]).fetchone() for i in ids)
        rows = [row for row in one_each if row is not None]
    return rows


def _estimated_bytes(row: tuple) -> int:
    return len(row[_BODY] or b"") + 2 * len(row[_CANONICAL]) + len(row[_LAST_TEXT] or "") + 3000
