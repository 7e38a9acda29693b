"""The shared store: a Postgres server many proxies use (`store.PgStore`), with its pool and watchdog
(`connect`), migrations, full text and vectors (`lexical`), NUL-safe text and the change log (`changes`).

Imported only by `semula.store` (its `selection.open_store`); may import `core` and `semula.store`'s shared modules.
"""
