"""Where recordings, aliases, review candidates and per-project settings live: DuckDB (embedded) or Postgres (shared).

The engine programs against `base.RecordingStore`; `sql.SqlStore` holds the SQL both backends share, and
each backend folder (`duckdb/`, `postgres/`) supplies its dialect, connection, migrations and lexical index.
`selection.open_store` is the one place a backend is chosen: nothing outside this package imports a backend
folder. A third backend is one folder plus one line in `open_store`. May import `core` only.
"""
