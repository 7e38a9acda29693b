"""Where recordings, aliases, review candidates and the call log live: DuckDB (embedded) or Postgres (shared).

Backend modules are used only through `store.base`'s interface; may import `core` only.
"""
