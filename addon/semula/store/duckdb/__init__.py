"""The embedded store: one DuckDB file in the data dir (`store.DuckDBStore`), with its migrations, its
full-text index (`fts`, `postings`), its vector table, bulk writes and paged preload.

Imported only by `semula.store` (its `selection.open_store`); may import `core` and `semula.store`'s shared modules.
"""

STORE_FILE = "semula.duckdb"  # the embedded store's file in the data dir; named nowhere outside `semula.store`
