"""Which store: the embedded DuckDB file in the data dir (the default), or a Postgres server.

`--store postgresql://…` (every command that opens a store) or `SEMULA_STORE` selects the server;
anything else, or nothing, keeps the DuckDB file. This is the one place a backend is picked: nothing
outside `semula.store` imports `store.duckdb` or `store.postgres`, and the engine never learns which
one it has (it reads the store's declared capabilities). A password is best kept out of the URL
(`PGPASSWORD`, `~/.pgpass`): libpq reads those itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from semula.store.base import STORE_FILE, RecordingStore
from semula.store.postgres.connect import is_server_store, masked
from semula.store.types import VectorStatus

__all__ = ["STORE_FILE", "describe_store", "masked", "open_store", "store_spec", "vector_status"]

STORE_ENV = "SEMULA_STORE"
LISTEN_ENV = "SEMULA_STORE_LISTEN"  # "off": poll the change log (PgBouncer in transaction pooling mode)


def store_spec(given: str | None = None) -> str | None:
    """The server URL chosen by `given` or $SEMULA_STORE, or None for the DuckDB file."""
    spec = (given if given is not None else os.environ.get(STORE_ENV, "")).strip()
    return spec if is_server_store(spec) else None


def describe_store(spec: str | None, data_dir: Path | str) -> str:
    return masked(spec) if spec else str(Path(data_dir) / STORE_FILE)


def listen_enabled() -> bool:
    return os.environ.get(LISTEN_ENV, "on").strip().lower() not in ("off", "0", "false", "no", "poll")


def open_store(spec: str | None, data_dir: Path | str, schema: str | None = None,
               follow: bool = True, *, read_only: bool = False, copy: bool = False) -> RecordingStore:
    """Open (and migrate) the chosen store; StoreError says why it cannot. A third backend is one
    folder under `store/` plus one line here.

    `follow`: an engine on a server store follows the other writers' changes (a proxy does; a
    one-shot CLI command need not). `read_only` and `copy` (a private working copy of a file that
    cannot be written) are the DuckDB file's; a server store ignores them."""
    if spec:
        from semula.store.postgres.store import PgStore

        return PgStore.open(spec, schema=schema, listen=listen_enabled(), follow=follow)
    from semula.store.duckdb.store import DuckDBStore

    return DuckDBStore.open_copy(data_dir) if copy else DuckDBStore.open(data_dir, read_only=read_only)


def vector_status(spec: str | None, data_dir: Path | str, model: str) -> VectorStatus:
    """The vectors stored per model, for `semula embeddings status`: a server store read directly, a
    file that no process holds read-only (no migration)."""
    if not spec:
        from semula.store.duckdb.vectors import read_vector_status

        return read_vector_status(Path(data_dir) / STORE_FILE, model)
    store = open_store(spec, data_dir, follow=False)
    try:
        counts = store.vectors.counts()
        entries = len(store.index_rows())
        missing = store.vectors.count_without(model) if counts.get(model, 0) < entries else None
        return VectorStatus(entries, counts, missing)
    finally:
        store.close()
