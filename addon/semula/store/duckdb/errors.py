"""DuckDB errors turned into `StoreError`s that say what to do: the one place that wording lives,
shared by the store and the tables it hands out (vectors)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from semula.store.types import StoreError


def describe_duckdb_error(e: Exception, path: Path) -> str:
    text = str(e)
    if isinstance(e, duckdb.OutOfMemoryException) or text.startswith("Out of Memory Error"):
        return (
            f"the store {path} ran out of DuckDB's memory limit ({text.splitlines()[0]}); "
            "raise it with SEMULA_DUCKDB_MEMORY (e.g. SEMULA_DUCKDB_MEMORY=2GB)"
        )
    if "lock" in text.lower():
        return (
            f"the store {path} is locked by another process ({text.splitlines()[0]}); "
            "stop that process, or use the running proxy's admin endpoint (semula CLI does this itself)"
        )
    if "read-only" in text.lower() or "permission" in text.lower():
        return f"the store {path} is not writable ({text.splitlines()[0]}); check the data dir's permissions"
    return f"the store {path} failed: {text.splitlines()[0] if text else type(e).__name__}"


@contextmanager
def store_errors(describe: Callable[[Exception], str]) -> Iterator[None]:
    """Raise any DuckDB error inside the block as a StoreError worded by `describe`."""
    try:
        yield
    except duckdb.Error as e:
        raise StoreError(describe(e)) from e
