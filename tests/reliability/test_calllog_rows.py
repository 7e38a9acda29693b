"""The call log keeps every row it can (reliability items 3 and 4).

One unencodable value used to make pyarrow reject a whole batch; a full disk or a read-only
data dir used to drop the rows written meanwhile.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from semula.calllog import writer as parquetlog
from semula.calllog.schema import CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION
from semula.calllog.writer import ParquetLog, clean_row


def rows_in(directory: Path) -> list[dict]:
    rows: list[dict] = []
    for path in sorted(directory.glob("**/*.parquet")):
        if not path.name.startswith("."):
            rows += pq.read_table(path).to_pylist()
    return rows


def test_one_bad_row_does_not_lose_its_batch(tmp_path: Path) -> None:
    writer = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=60)
    for i in range(5):
        writer.append({"project": f"good{i}", "decision": "miss", "status": 200})
    writer.append({"project": "\udcff\udcfe", "model": "\ud800", "status": 2**40, "entry_id": "x",
                   "score": "high", "streamed": "yes"})
    assert writer.close() == 0
    rows = rows_in(tmp_path / "calls")
    assert len(rows) == 6, rows
    bad = [r for r in rows if not r["project"].startswith("good")][0]
    assert bad["project"] == "\\udcff\\udcfe" and bad["model"] == "\\ud800"
    assert bad["status"] is None and bad["entry_id"] is None and bad["score"] is None and bad["streamed"] is None


def test_clean_row_keeps_good_values() -> None:
    row = {"project": "p", "status": 200, "score": 1, "streamed": True, "error": ValueError("boom")}
    clean = clean_row(row, CALL_LOG_SCHEMA)
    assert clean["project"] == "p" and clean["status"] == 200 and clean["score"] == 1.0
    assert clean["streamed"] is True and clean["error"] == "boom"


def test_values_arrow_refuses_are_cleaned_not_lost(tmp_path: Path) -> None:
    writer = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=60)
    writer.append({"project": "ok", "status": 200})
    writer.append({"project": "bad\ud800", "status": "200", "streamed": 1})  # a surrogate, a str, an int
    assert writer.close() == 0
    rows = sorted(rows_in(tmp_path / "calls"), key=lambda r: r["project"])
    assert [r["project"] for r in rows] == ["bad\\ud800", "ok"]
    assert rows[0]["status"] is None and rows[0]["streamed"] is None and rows[1]["status"] == 200


def test_a_batch_the_writer_still_rejects_is_written_row_by_row(tmp_path: Path, monkeypatch) -> None:
    real = parquetlog._table

    def picky(rows, schema):
        if any(row.get("project") == "poison" for row in rows):
            raise ValueError("cannot convert")
        return real(rows, schema)

    monkeypatch.setattr(parquetlog, "_table", picky)
    writer = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=60)
    for name in ("a", "poison", "b"):
        writer.append({"project": name})
    assert writer.close() == 1
    assert sorted(r["project"] for r in rows_in(tmp_path / "calls")) == ["a", "b"]


def _refuse_writes(target: Path) -> None:
    if os.geteuid() != 0:
        target.mkdir(parents=True, exist_ok=True)
        target.chmod(0o500)
    else:  # root ignores the mode bits: a file where the folder should be refuses writes too
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("in the way")


def _allow_writes(target: Path) -> None:
    if target.is_file():
        target.unlink()
    else:
        target.chmod(0o700)


def test_rows_held_while_the_dir_refuses_writes_are_written_later(tmp_path: Path) -> None:
    directory = tmp_path / "calls"
    writer = ParquetLog(directory, CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=0.05)
    _refuse_writes(directory)
    try:
        writer.append({"project": "while-read-only"})
        writer.append({"project": "also"})
        import time

        deadline = time.monotonic() + 5
        while not writer.last_error and time.monotonic() < deadline:
            time.sleep(0.05)
        assert writer.last_error, "the write should have failed"
    finally:
        _allow_writes(directory)
    writer.append({"project": "after"})
    assert writer.close() == 0
    assert sorted(r["project"] for r in rows_in(directory)) == ["after", "also", "while-read-only"]


def test_rows_still_refused_at_close_are_counted_and_bounded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(parquetlog, "MAX_HELD_ROWS", 3)
    directory = tmp_path / "calls"
    _refuse_writes(directory)
    writer = ParquetLog(directory, CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=60)
    for i in range(5):
        writer.append({"project": f"p{i}"})
    try:
        assert writer.close() == 5
    finally:
        _allow_writes(directory)
        shutil.rmtree(directory, ignore_errors=True)
