"""The embedded store: one DuckDB file in the data dir (`store.DuckDBStore`), with its migrations, its
full-text index (`fts`, `postings`), its vector table, bulk writes and paged preload.

Imported only by `semula.store` (its `selection.open_store`); may import `core` and `semula.store`'s shared modules.
"""
