"""Append-only Parquet logs (calls, reviews) written in batches by a background thread.

Rows go into `<dir>/date=YYYY-MM-DD/part-<time>-<id>.parquet`. Each flush writes new files
under a temporary name and renames them, so readers (DuckDB, pandas, polars, notebooks)
never see a half-written file while the proxy runs. Nothing here blocks the caller:
`append` puts a row on a queue.

A row is cleaned against the schema before it is written (a lone surrogate becomes a visible
escape, a number out of its column's range becomes null), and a batch the writer still rejects
is written row by row, so one bad row never takes the others with it. Rows that cannot be
written because of the disk (full, read-only) are held back, up to `MAX_HELD_ROWS`, and
retried on the next flush; `close` returns how many were finally lost.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from functools import lru_cache
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semula.calllog.schema import LogRow, arrow_schema
from semula.store.datadir import make_data_dir

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("semula")

MAX_HELD_ROWS = 10_000  # rows kept for a retry while the disk refuses them


class ParquetLog:
    """`schema`: the Arrow schema, or the row type whose schema it is (pyarrow then loads with the first
    write, on the writer's thread: the proxy does not wait for it before it is ready)."""

    def __init__(self, directory: Path | str, schema: pa.Schema | type[LogRow], schema_version: int,
                 flush_seconds: float = 1.0, max_rows: int = 5000):
        self.directory = Path(directory)
        self._schema = schema
        self.schema_version = schema_version
        self.flush_seconds = flush_seconds
        self.max_rows = max_rows
        # A deque, not a queue: appending must not wake the writer (and contend for the GIL
        # with the proxy's event loop) on every row; the writer drains it on its timer.
        self._rows: deque[dict[str, Any]] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"semula-log-{self.directory.name}", daemon=True)
        self._closed = False
        self._held: deque[dict[str, Any]] = deque()  # rows the disk refused, retried on the next flush
        self.lost = 0
        self.last_error: str | None = None
        self._thread.start()

    @property
    def schema(self) -> pa.Schema:
        if isinstance(self._schema, type):
            self._schema = arrow_schema(self._schema)
        return self._schema

    def append(self, row: LogRow | dict[str, Any]) -> None:
        """Queue a row: a typed one (`CallRow`, `ReviewEvent`), or by column name (missing columns are null)."""
        if self._closed:
            return
        row = row.as_dict() if isinstance(row, LogRow) else row
        row.setdefault("ts", datetime.now(UTC))
        row.setdefault("schema_version", self.schema_version)
        self._rows.append(row)

    def close(self, timeout: float = 10.0) -> int:
        """Flush what is queued and stop the writer (shutdown, end of `semula exec`).

        Returns how many rows were lost: held back by a refusing disk until the end, or dropped."""
        if self._closed:
            return self.lost
        self._closed = True
        self._stop.set()
        self._thread.join(timeout)
        self.lost += len(self._held) + len(self._rows)
        self._held.clear()
        return self.lost

    def _run(self) -> None:
        while True:
            stopping = self._stop.wait(self.flush_seconds)
            if self._held:
                retry = list(self._held)
                self._held.clear()
                self._flush(retry)
            while self._rows:
                batch: list[dict[str, Any]] = []
                while self._rows and len(batch) < self.max_rows:
                    batch.append(self._rows.popleft())
                self._flush(batch)
            if stopping:
                return

    def _flush(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        by_date: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_date.setdefault(row["ts"].strftime("%Y-%m-%d"), []).append(row)
        for date, day_rows in by_date.items():
            try:
                self._write(date, day_rows)
            except OSError as e:  # a full disk or a read-only dir: hold the rows and retry
                self._hold(day_rows, e)
            except Exception:  # the writer rejected some value: write row by row
                self._write_one_by_one(date, day_rows)

    def _write_one_by_one(self, date: str, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            try:
                self._write(date, [row])
            except OSError as e:
                self._hold([row], e)
            except Exception as e:
                self.lost += 1
                log.error("semula: could not write a log row to %s: %s", self.directory, e)

    def _hold(self, rows: list[dict[str, Any]], error: OSError) -> None:
        if self.last_error is None:
            log.error("semula: could not write %d log rows to %s (%s); holding up to %d rows to retry",
                      len(rows), self.directory, error, MAX_HELD_ROWS)
        self.last_error = str(error)
        self._held.extend(rows)
        while len(self._held) > MAX_HELD_ROWS:
            self._held.popleft()
            self.lost += 1

    def _write(self, date: str, rows: list[dict[str, Any]]) -> None:
        import pyarrow.parquet as pq  # with the first write, on this thread (see the class)

        folder = self.directory / f"date={date}"
        make_data_dir(self.directory.parent)  # the data dir (or the temporary log dir) removed meanwhile
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        table = _table(rows, self.schema)
        stamp = datetime.now(UTC).strftime("%H%M%S%f")
        final = folder / f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
        temp = folder / f".{final.name}.tmp"
        try:
            # 0600 from the start: the log holds prompts' metadata and errors (docs/security.md: file modes).
            with os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                pq.write_table(table, out)
            os.replace(temp, final)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        if self.last_error is not None and not self._held:
            log.warning("semula: %s is writable again", self.directory)
            self.last_error = None


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """The rows as a table: converted by Arrow in one go, and cleaned value by value (in Python, holding the
    interpreter lock the event loop needs) only when Arrow refuses one."""
    import pyarrow as pa  # with the first write (see `ParquetLog`)

    # What Arrow raises for a value its column does not take (a string in an integer column, an integer
    # out of range, a lone surrogate): the rows are then cleaned one value at a time.
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowException, UnicodeError, OverflowError, TypeError, ValueError):
        clean = [clean_row(row, schema) for row in rows]
        return pa.Table.from_pydict({name: [row[name] for row in clean] for name in schema.names}, schema=schema)


def clean_row(row: dict[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """The row with every value made acceptable to its column, or null."""
    return {name: None if (value := row.get(name)) is None else clean(value) for name, clean in _cleaners(schema)}


@lru_cache(maxsize=8)
def _cleaners(schema: pa.Schema) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """One cleaner per column, chosen once per schema (not per value: the writer runs beside the event loop)."""
    return tuple((field.name, _cleaner(field.type)) for field in schema)


def _cleaner(kind: pa.DataType) -> Callable[[Any], Any]:
    import pyarrow as pa  # with the first write (see `ParquetLog`)

    if pa.types.is_string(kind):
        return _clean_text
    if pa.types.is_boolean(kind):
        return lambda value: value if isinstance(value, bool) else None
    if pa.types.is_integer(kind):
        low, high = _int_range(kind)
        return lambda value: value if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high \
            else None
    if pa.types.is_floating(kind):
        return lambda value: float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return lambda value: value


def _clean_text(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON "\\ud800", a raw header byte)
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _int_range(kind: pa.DataType) -> tuple[int, int]:
    from pyarrow import types  # with the first write (see `ParquetLog`)

    bits = kind.bit_width
    if types.is_signed_integer(kind):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1
