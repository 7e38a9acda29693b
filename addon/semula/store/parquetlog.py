"""Append-only Parquet logs (calls, reviews) written in batches by a background thread.

Rows go into `<dir>/date=YYYY-MM-DD/part-<time>-<id>.parquet`. Each flush writes new files
under a temporary name and renames them, so readers (DuckDB, pandas, polars, notebooks)
never see a half-written file while the proxy runs. Nothing here blocks the caller:
`append` puts a row on a queue.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger("semula")


class ParquetLog:
    def __init__(self, directory: Path | str, schema: pa.Schema, schema_version: int,
                 flush_seconds: float = 1.0, max_rows: int = 5000):
        self.directory = Path(directory)
        self.schema = schema
        self.schema_version = schema_version
        self.flush_seconds = flush_seconds
        self.max_rows = max_rows
        # A deque, not a queue: appending must not wake the writer (and contend for the GIL
        # with the proxy's event loop) on every row; the writer drains it on its timer.
        self._rows: deque[dict[str, Any]] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"semula-log-{self.directory.name}", daemon=True)
        self._closed = False
        self._thread.start()

    def append(self, row: dict[str, Any]) -> None:
        if self._closed:
            return
        row.setdefault("ts", datetime.now(UTC))
        row.setdefault("schema_version", self.schema_version)
        self._rows.append(row)

    def close(self, timeout: float = 10.0) -> None:
        """Flush what is queued and stop the writer (shutdown, end of `semula exec`)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            stopping = self._stop.wait(self.flush_seconds)
            while self._rows:
                batch = []
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
            except Exception as e:  # a full disk must not kill the proxy; say so and go on
                log.error("semula: could not write %d log rows to %s: %s", len(day_rows), self.directory, e)

    def _write(self, date: str, rows: list[dict[str, Any]]) -> None:
        folder = self.directory / f"date={date}"
        folder.mkdir(parents=True, exist_ok=True)
        columns = {name: [row.get(name) for row in rows] for name in self.schema.names}
        table = pa.Table.from_pydict(columns, schema=self.schema)
        stamp = datetime.now(UTC).strftime("%H%M%S%f")
        final = folder / f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
        temp = folder / f".{final.name}.tmp"
        pq.write_table(table, temp)
        os.replace(temp, final)
