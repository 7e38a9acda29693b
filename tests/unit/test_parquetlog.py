from __future__ import annotations

import os
import stat
from datetime import UTC, datetime

import duckdb

from semula.calllog.schema import CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION
from semula.calllog.writer import ParquetLog


def test_rows_are_flushed_partitioned_and_readable(tmp_path):
    writer = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=0.1)
    writer.append({"project": "a", "decision": "hit", "tier": "exact", "ts": datetime(2026, 1, 2, tzinfo=UTC)})
    writer.append({"project": "b", "decision": "miss", "tier": "none"})
    writer.close()
    files = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "calls").glob("**/*.parquet"))
    assert files[0].startswith("calls/date=2026-01-02/part-")
    assert not list((tmp_path / "calls").glob("**/.*.tmp"))
    rows = duckdb.sql(
        f"SELECT project, decision, schema_version FROM read_parquet('{tmp_path}/calls/**/*.parquet', "
        "hive_partitioning=true) ORDER BY project"
    ).fetchall()
    assert rows == [("a", "hit", CALL_LOG_SCHEMA_VERSION), ("b", "miss", CALL_LOG_SCHEMA_VERSION)]


def test_append_after_close_is_ignored(tmp_path):
    writer = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION)
    writer.close()
    writer.append({"project": "a"})
    assert not list((tmp_path / "calls").glob("**/*.parquet"))


def test_log_files_and_folders_are_private_whatever_the_umask(tmp_path):
    """The modes are the writer's own (0600 files, 0700 folders), not the process umask's."""
    old = os.umask(0)
    try:
        writer = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION)
        writer.append({"project": "a", "decision": "hit", "ts": datetime(2026, 1, 2, tzinfo=UTC)})
        writer.close()
    finally:
        os.umask(old)
    made = [tmp_path / "calls", *(tmp_path / "calls").rglob("*")]
    modes = {p.relative_to(tmp_path).as_posix(): oct(stat.S_IMODE(p.stat().st_mode)) for p in made}
    assert modes and all(mode == ("0o700" if (tmp_path / p).is_dir() else "0o600") for p, mode in modes.items()), modes
