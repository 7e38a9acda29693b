"""Reading the Parquet logs back: one forgiving loader and one hit rate for `semula stats` and the notebooks.

Files from an older schema_version lack columns, and a fresh install has no files at all:
`load_log` gives an in-memory table with every column of the current schema either way
(a column no file has yet is a typed NULL), plus a `day` column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from semula.calllog.schema import NOT_A_CALL_PREFIX, SIDE_CALL_PREFIX


def _duckdb_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMPTZ" if arrow_type.tz else "TIMESTAMP"
    mapping = {
        pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE",
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.bool_(): "BOOLEAN",
    }
    if arrow_type not in mapping:
        raise TypeError(f"no DuckDB type for {arrow_type}")
    return mapping[arrow_type]


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _column(field: pa.Field, present: set[str]) -> str:
    """Select a column cast to its current type, or a typed NULL if no file has it yet."""
    expression = f'"{field.name}"' if field.name in present else "NULL"
    cast = f"CAST({expression} AS {_duckdb_type(field.type)})"
    if pa.types.is_timestamp(field.type) and field.type.tz:
        # Naive UTC: fetching TIMESTAMPTZ into Python needs pytz, which semula does not depend on.
        cast = f"timezone('UTC', {cast})"
    return f'{cast} AS "{field.name}"'


def load_log(con: duckdb.DuckDBPyConnection, name: str, folder: Path, schema: pa.Schema) -> int:
    """Load `folder`'s Parquet files into in-memory table `name`; return its row count."""
    files = sorted(folder.glob("**/*.parquet")) if folder.is_dir() else []
    if files:
        source = (
            f"read_parquet({_sql_string(str(folder / '**' / '*.parquet'))}, "
            "hive_partitioning=true, union_by_name=true)"
        )
        present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    else:
        source, present = "(SELECT 1 AS _none) WHERE false", set()
    columns = [_column(field, present) for field in schema]
    # A table, not a view: notebooks run dozens of queries and re-reading every
    # Parquet file for each one is what made them slow. Outer select so `day` is
    # derived from the already-converted UTC `ts`.
    con.execute(
        f"CREATE OR REPLACE TABLE {name} AS SELECT *, CAST(ts AS DATE) AS day "
        f"FROM (SELECT {', '.join(columns)} FROM {source})"
    )
    row = con.execute(f"SELECT count(*) FROM {name}").fetchone()
    return row[0] if row is not None else 0


# Traffic semula answers itself in replay (side calls, MCP traffic that is not a call): never a refusal, so
# the run summary and the report's replay failures leave it out.
ANSWERED_LOCALLY = "(" + " OR ".join(f"coalesce(bypass_reason, '') LIKE '{prefix}%'"
                                     for prefix in (SIDE_CALL_PREFIX, NOT_A_CALL_PREFIX)) + ")"

# The hit rate, one definition for `semula stats`, the report and the notebooks: hits ÷ lookups,
# where a lookup is a call that asked the cache (a hit, a miss or an error) outside record mode.
# Bypass and passthrough calls never asked, and record mode misses on purpose: none of them are
# lookups, so a run full of `x-semula-no-cache` calls does not drag the rate down.
HIT_RATE_COLUMNS = """count(*) AS calls,
    count(*) FILTER (decision IN ('hit', 'miss', 'error') AND mode IS DISTINCT FROM 'record') AS lookups,
    count(*) FILTER (decision = 'hit') AS hits,
    round(hits / nullif(lookups, 0), 3) AS hit_rate"""


def hit_rates(con: duckdb.DuckDBPyConnection, table: str = "calls", by: str | None = "mode",
              project: str | None = None) -> list[dict[str, Any]]:
    """calls, lookups, hits and hit_rate (None without lookups) per value of `by` (None: one row)."""
    where, params = ("WHERE project = ?", [project]) if project else ("", [])
    group = f"coalesce(CAST({by} AS VARCHAR), '?') AS {by}, " if by else ""
    sql = f"SELECT {group}{HIT_RATE_COLUMNS} FROM {table} {where}" + (" GROUP BY ALL ORDER BY calls DESC" if by else "")
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row)) for row in cursor.fetchall()]
    for row in rows:  # exact, not the rounded column
        row["hit_rate"] = row["hits"] / row["lookups"] if row["lookups"] else None
    return rows
