"""Which store: the embedded DuckDB file in the data dir (the default), or a Postgres server.

`--store postgresql://…` (every command that opens a store) or `SEMULA_STORE` selects the server;
anything else, or nothing, keeps the DuckDB file. The choice is parsed once into a `StoreSpec`, and
this is the one place a backend is picked: nothing outside `semula.store` imports `store.duckdb` or
`store.postgres` or knows the file's name, and the engine never learns which one it has (it reads the
store's declared capabilities). "Is this a local file a proxy may hold?" is `spec.file is not None`.
A password is best kept out of the URL (`PGPASSWORD`, `~/.pgpass`): libpq reads those itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from semula.core.settings import SWITCH_OFF
from semula.store.base import RecordingStore
from semula.store.duckdb import STORE_FILE
from semula.store.postgres.spec import is_server_store, masked
from semula.store.types import StoreError, VectorStatus

__all__ = ["StoreKind", "StoreSpec", "masked", "open_store", "open_store_with", "server_url", "store_spec",
           "throwaway_store", "vector_status"]

T = TypeVar("T")

log = logging.getLogger("semula")

STORE_ENV = "SEMULA_STORE"
LISTEN_ENV = "SEMULA_STORE_LISTEN"  # "off": poll the change log (PgBouncer in transaction pooling mode)


class StoreKind(StrEnum):
    DUCKDB = "duckdb"  # the embedded file in the data dir
    POSTGRES = "postgres"  # a server many proxies share


@dataclass(frozen=True)
class StoreSpec:
    """A parsed store choice. `url` is set for a server, `file` for the DuckDB file (one of the two).

    `read_only`: the file is never written (a read-only data dir); `working_copy`: open a private,
    writable temporary copy of the file instead (what a read-only file that needs writes to open uses).
    A server has neither."""

    kind: StoreKind
    url: str | None
    file: Path | None
    read_only: bool = False
    working_copy: bool = False

    @classmethod
    def parse(cls, given: str | None, data_dir: Path | str, *, read_only: bool = False) -> StoreSpec:
        """`given` a server URL: that server; anything else (None, empty): the file in `data_dir`."""
        if given and is_server_store(given):
            return cls(StoreKind.POSTGRES, given.strip(), None)
        return cls(StoreKind.DUCKDB, None, Path(data_dir) / STORE_FILE, read_only=read_only)

    def reading_only(self, read_only: bool = True) -> StoreSpec:
        """The same store, its file never written when `read_only` (a server has no such mode)."""
        return replace(self, read_only=read_only and self.file is not None)

    def copied(self) -> StoreSpec:
        """The same file, opened as a private working copy (writes are lost at close)."""
        return replace(self, working_copy=True)

    def describe(self) -> str:
        """What messages call the store (a server's password masked)."""
        return masked(self.url) if self.url else str(self.file)


def server_url(given: str | None = None) -> str | None:
    """The server URL chosen by `given` or $SEMULA_STORE, or None for the DuckDB file."""
    spec = (given if given is not None else os.environ.get(STORE_ENV, "")).strip()
    return spec if is_server_store(spec) else None


def store_spec(data_dir: Path | str, given: str | None = None, *, read_only: bool = False) -> StoreSpec:
    """The store chosen by `given` or $SEMULA_STORE for `data_dir`."""
    return StoreSpec.parse(server_url(given), data_dir, read_only=read_only)


def listen_enabled() -> bool:
    value = os.environ.get(LISTEN_ENV, "").strip().lower()
    return not value or value not in SWITCH_OFF | {"poll"}  # unset or empty: on


def open_store(spec: StoreSpec, schema: str | None = None, follow: bool = True) -> RecordingStore:
    """Open (and migrate) the chosen store; StoreError says why it cannot. A third backend is one
    folder under `store/` plus one `StoreKind` and one branch here.

    `follow`: an engine on a server store follows the other writers' changes (a proxy does; a
    one-shot CLI command need not). `schema`: a server store's own schema (`throwaway_store`)."""
    if spec.kind is StoreKind.POSTGRES:
        from semula.store.postgres.store import PgStore

        assert spec.url is not None
        return PgStore.open(spec.url, schema=schema, listen=listen_enabled(), follow=follow)
    from semula.store.duckdb.store import DuckDBStore

    assert spec.file is not None
    data_dir = spec.file.parent
    return DuckDBStore.open_copy(data_dir) if spec.working_copy else DuckDBStore.open(data_dir,
                                                                                     read_only=spec.read_only)


def open_store_with(spec: StoreSpec, use: Callable[[RecordingStore], T]) -> T:
    """Open the chosen store and hand it to `use` (an engine opening on it); the store is closed if `use` fails.

    A read-only file whose opening needs a write (an upgrade of its fingerprints, the recordings folder's
    sync) is opened again as a private working copy, so a read-only data dir still serves what it holds."""
    try:
        return _opened(open_store(spec), use)
    except StoreError as e:
        if not spec.read_only or spec.file is None or not spec.file.is_file():
            raise
        log.info("semula: the read-only store needs writes to open (%s): using a temporary copy", e)
        return _opened(open_store(spec.copied()), use)


def _opened(store: RecordingStore, use: Callable[[RecordingStore], T]) -> T:
    try:
        return use(store)
    except BaseException:
        store.close()
        raise


@contextmanager
def throwaway_store(spec: StoreSpec) -> Iterator[RecordingStore]:
    """A store used once and thrown away (`semula eval`): DuckDB in memory (named after the file it stands
    for), a server a new schema of its own, dropped at the end. The caller closes the store."""
    if spec.kind is not StoreKind.POSTGRES:
        from semula.store.duckdb.store import DuckDBStore

        assert spec.file is not None
        yield DuckDBStore.in_memory(spec.file)
        return
    import uuid

    from semula.store.postgres.store import PgStore

    store = open_store(spec, schema=f"semula_eval_{uuid.uuid4().hex[:12]}", follow=False)
    try:
        yield store
    finally:
        assert isinstance(store, PgStore)
        store.drop_schema()


def vector_status(spec: StoreSpec, model: str) -> VectorStatus:
    """The vectors stored per model, for `semula embeddings status`: a server store read directly, a
    file that no process holds read-only (no migration)."""
    if spec.file is not None:
        from semula.store.duckdb.vectors import read_vector_status

        return read_vector_status(spec.file, model)
    store = open_store(spec, follow=False)
    try:
        counts = store.vectors.counts()
        entries = len(store.index_rows())
        missing = store.vectors.count_without(model) if counts.get(model, 0) < entries else None
        return VectorStatus(entries, counts, missing)
    finally:
        store.close()
