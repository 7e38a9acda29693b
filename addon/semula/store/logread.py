"""Reading the Parquet logs back: one forgiving loader for `semula stats` and the notebooks.

Files from an older schema_version lack columns, and a fresh install has no files at all:
`load_log` gives an in-memory table with every column of the current schema either way
(a column no file has yet is a typed NULL), plus a `day` column.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa


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
    return con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
