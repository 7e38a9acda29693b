"""Which store: the embedded DuckDB file in the data dir (the default), or a Postgres server.

`--store postgresql://…` (every command that opens a store) or `SEMULA_STORE` selects the server;
anything else, or nothing, keeps the DuckDB file. The engine never learns which one it has.
A password is best kept out of the URL (`PGPASSWORD`, `~/.pgpass`): libpq reads those itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from semula.store.base import STORE_FILE, RecordingStore
from semula.store.pg_connect import is_server_store, masked

__all__ = ["STORE_FILE", "describe_store", "masked", "open_store", "store_spec"]

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
    """Open (and migrate) the chosen store: the one place a backend is picked, so nothing outside
    `semula.store` imports a backend module. StoreError says why it cannot.

    `follow`: an engine on a server store follows the other writers' changes (a proxy does; a
    one-shot CLI command need not). `read_only` and `copy` (a private working copy of a file that
    cannot be written) are the DuckDB file's; a server store ignores them."""
    if spec:
        from semula.store.pg_store import PgStore

        store = PgStore.open(spec, schema=schema, listen=listen_enabled())
        store.follows = follow
        return store
    from semula.store.duckdb_store import Store

    return Store.open_copy(data_dir) if copy else Store.open(data_dir, read_only=read_only)
