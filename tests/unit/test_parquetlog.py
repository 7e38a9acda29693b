from __future__ import annotations

import os
import stat
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from semula.calllog.schema import (
    CALL_LOG_SCHEMA,
    CALL_LOG_SCHEMA_VERSION,
    REVIEW_LOG_SCHEMA,
    REVIEW_LOG_SCHEMA_VERSION,
    CallRow,
    ReviewEvent,
)
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


# The logs' column contract, as notebooks and users read it: names, types and order. The schemas are
# derived from `CallRow`'s and `ReviewEvent`'s fields; changing a field changes this, and the version.
CALL_COLUMNS = [
    ("ts", pa.timestamp("us", tz="UTC")), ("project", pa.string()), ("provider", pa.string()),
    ("host", pa.string()), ("method", pa.string()), ("path", pa.string()), ("model", pa.string()),
    ("mode", pa.string()), ("decision", pa.string()), ("tier", pa.string()), ("score", pa.float64()),
    ("entry_id", pa.int64()), ("bypass_reason", pa.string()), ("streamed", pa.bool_()), ("status", pa.int32()),
    ("decision_ms", pa.float64()), ("upstream_ms", pa.float64()), ("recorded_upstream_ms", pa.float64()),
    ("recorded_prompt_tokens", pa.int64()), ("recorded_completion_tokens", pa.int64()),
    ("request_fp", pa.string()), ("normalised_fp", pa.string()), ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()), ("candidate_tier", pa.string()), ("candidate_score", pa.float64()),
    ("candidate_entry_id", pa.int64()), ("guard_reason", pa.string()), ("recorded", pa.bool_()),
    ("error", pa.string()), ("run_id", pa.string()), ("fast", pa.bool_()), ("mcp_server", pa.string()),
    ("mcp_tool", pa.string()), ("schema_version", pa.int32()),
]
REVIEW_COLUMNS = [
    ("ts", pa.timestamp("us", tz="UTC")), ("event", pa.string()), ("candidate_id", pa.int64()),
    ("project", pa.string()), ("tier", pa.string()), ("score", pa.float64()), ("guard_reason", pa.string()),
    ("request_fp", pa.string()), ("entry_id", pa.int64()), ("stratum", pa.string()), ("calibrates", pa.bool_()),
    ("schema_version", pa.int32()),
]


def test_the_log_schemas_are_the_published_columns() -> None:
    assert CALL_LOG_SCHEMA.equals(pa.schema(CALL_COLUMNS), check_metadata=True)
    assert REVIEW_LOG_SCHEMA.equals(pa.schema(REVIEW_COLUMNS), check_metadata=True)
    assert (CALL_LOG_SCHEMA_VERSION, REVIEW_LOG_SCHEMA_VERSION) == (4, 2)


def test_typed_rows_are_written_as_their_columns(tmp_path):
    at = datetime(2026, 1, 2, tzinfo=UTC)
    calls = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=60)
    calls.append(CallRow(ts=at, project="p", decision="hit", tier="exact", entry_id=7, status=200, fast=True))
    reviews = ParquetLog(tmp_path / "reviews", REVIEW_LOG_SCHEMA, REVIEW_LOG_SCHEMA_VERSION, flush_seconds=60)
    reviews.append(ReviewEvent(ts=at, event="queued", candidate_id=1, project="p", tier="lexical", score=0.8,
                               guard_reason=None, request_fp="nfp2:x", entry_id=7, calibrates=True))
    assert calls.close() == 0 and reviews.close() == 0
    (call_file,) = (tmp_path / "calls").glob("**/*.parquet")
    (review_file,) = (tmp_path / "reviews").glob("**/*.parquet")
    assert pq.read_schema(call_file).equals(pa.schema(CALL_COLUMNS))
    assert pq.read_schema(review_file).equals(pa.schema(REVIEW_COLUMNS))
    (call,) = pq.read_table(call_file).to_pylist()
    assert call == {**{name: None for name, _ in CALL_COLUMNS}, "ts": at, "project": "p", "decision": "hit",
                    "tier": "exact", "entry_id": 7, "status": 200, "fast": True, "schema_version": 4}
    (review,) = pq.read_table(review_file).to_pylist()
    assert review == {"ts": at, "event": "queued", "candidate_id": 1, "project": "p", "tier": "lexical",
                      "score": 0.8, "guard_reason": None, "request_fp": "nfp2:x", "entry_id": 7, "stratum": None,
                      "calibrates": True, "schema_version": 2}


def test_a_log_of_an_older_schema_still_reads_with_the_new_columns_null(tmp_path):
    """Files written before `mcp_server`/`mcp_tool` (version 3) load beside new ones; theirs are null."""
    import duckdb

    from semula.calllog.reader import load_log

    at = datetime(2026, 1, 2, tzinfo=UTC)
    old_columns = [c for c in CALL_COLUMNS if c[0] not in ("mcp_server", "mcp_tool")]
    old = {**{name: None for name, _ in old_columns}, "ts": at, "project": "p", "decision": "hit", "schema_version": 3}
    folder = tmp_path / "calls" / "date=2026-01-02"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([old], schema=pa.schema(old_columns)), folder / "part-old.parquet")
    calls = ParquetLog(tmp_path / "calls", CALL_LOG_SCHEMA, CALL_LOG_SCHEMA_VERSION, flush_seconds=60)
    calls.append(CallRow(ts=at, project="p", decision="miss", mcp_server="mcp.example.com/mcp", mcp_tool="add"))
    assert calls.close() == 0
    con = duckdb.connect()
    assert load_log(con, "calls", tmp_path / "calls", CALL_LOG_SCHEMA) == 2
    rows = con.execute("SELECT schema_version, decision, mcp_server, mcp_tool FROM calls ORDER BY schema_version").fetchall()
    assert rows == [(3, "hit", None, None), (4, "miss", "mcp.example.com/mcp", "add")]


def test_a_review_log_of_version_1_still_reads_without_stratum_or_calibrates(tmp_path):
    """Review events written before `stratum`/`calibrates` (version 2) load beside new ones, theirs null,
    in the reader the notebooks and `semula report` use."""
    from semula.calllog.reader import load_log

    at = datetime(2026, 1, 2, tzinfo=UTC)
    v1_columns = [c for c in REVIEW_COLUMNS if c[0] not in ("stratum", "calibrates")]
    old = {"ts": at, "event": "approved", "candidate_id": 1, "project": "p", "tier": "lexical", "score": 0.9,
           "guard_reason": None, "request_fp": "nfp2:a", "entry_id": 7, "schema_version": 1}
    folder = tmp_path / "reviews" / "date=2026-01-02"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([old], schema=pa.schema(v1_columns)), folder / "part-old.parquet")
    con = duckdb.connect()
    assert load_log(con, "reviews", tmp_path / "reviews", REVIEW_LOG_SCHEMA) == 1
    assert con.execute("SELECT schema_version, event, stratum, calibrates FROM reviews").fetchall() == [
        (1, "approved", None, None)]
    reviews = ParquetLog(tmp_path / "reviews", REVIEW_LOG_SCHEMA, REVIEW_LOG_SCHEMA_VERSION, flush_seconds=60)
    reviews.append(ReviewEvent(ts=at, event="rejected", candidate_id=2, project="p", tier="lexical", score=0.8,
                               request_fp="nfp2:b", entry_id=7, stratum="en", calibrates=True))
    assert reviews.close() == 0
    assert load_log(con, "reviews", tmp_path / "reviews", REVIEW_LOG_SCHEMA) == 2
    assert con.execute("SELECT schema_version, event, stratum, calibrates FROM reviews ORDER BY schema_version").fetchall() == [
        (1, "approved", None, None), (2, "rejected", "en", True)]


def test_the_readers_reason_prefixes_are_the_proxys() -> None:
    """The call log's reader (which imports no other semula package) spells the proxy's bypass-reason openings."""
    from semula.calllog.schema import NOT_A_CALL_PREFIX, SIDE_CALL_PREFIX
    from semula.core.decision import NOT_A_CALL, SIDE_CALL

    assert (SIDE_CALL.strip(), NOT_A_CALL.strip()) == (SIDE_CALL_PREFIX, NOT_A_CALL_PREFIX)
