"""Opening a DuckDB store file: the connection with the fts extension loaded, and the temporary
working copy a read-only store is opened from when it needs writes (migrations, upgrades)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import duckdb

from semula.store.duckdb.errors import describe_duckdb_error
from semula.store.types import StoreError


def fts_extension_path() -> Path:
    """Where the PyPI package `duckdb-extension-fts` keeps the extension for our duckdb."""
    try:
        import duckdb_extension_fts
    except ImportError as e:
        raise StoreError(
            "DuckDB's full-text-search extension is not installed: "
            f"run `pip install duckdb-extension-fts=={duckdb.__version__}` (INSTALL fts needs internet)"
        ) from e
    path = Path(duckdb_extension_fts.__file__).parent / "extensions" / f"v{duckdb.__version__}" / "fts.duckdb_extension"
    if not path.is_file():
        raise StoreError(
            f"DuckDB's full-text-search extension for duckdb {duckdb.__version__} is missing at {path}: "
            f"install the matching package, `pip install duckdb-extension-fts=={duckdb.__version__}`"
        )
    return path


# DuckDB's own memory: its buffer pool is a cache of the store file (evicted beyond the limit, and
# operators spill to `<store>.tmp`), and its allocator hands freed memory back once a task has peaked
# above the flush threshold. Without a limit DuckDB keeps up to 80 % of RAM, so a long-running proxy
# grew with its store (issue 12: ~10 KB resident per recording).
MEMORY_LIMIT = "512MB"
ALLOCATOR_FLUSH = "16MB"
MEMORY_ENV = "SEMULA_DUCKDB_MEMORY"


def connect_config() -> dict[str, str | bool | int | float | list[str]]:
    """Nothing installed or loaded on its own; the one extension `connect` loads is the pinned package's
    file, whose signature DuckDB would check on every open by hashing its 11.6 MB (23 ms a store
    opened, in each CLI command and proxy start; 71 CPU-s of the test suite's 680). Whoever can replace
    that file in the virtualenv can replace duckdb itself, so the check guards nothing the venv does not;
    no SQL text comes from a file or a user (parameters only), so no other extension is ever loaded."""
    return {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
            "allow_unsigned_extensions": True,
            "memory_limit": os.environ.get(MEMORY_ENV) or MEMORY_LIMIT, "allocator_flush_threshold": ALLOCATOR_FLUSH}


def connect(path: Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to the store file at `path` with the full-text-search extension loaded."""
    extension = fts_extension_path()
    try:
        con = duckdb.connect(str(path), read_only=read_only, config=connect_config())
    except duckdb.Error as e:
        raise StoreError(describe_duckdb_error(e, path)) from e
    try:
        con.execute(f"LOAD '{extension}'")
        loaded = con.execute("SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'fts'").fetchone()
        if not loaded or not loaded[0]:
            raise StoreError(f"DuckDB's fts extension did not load from {extension}")
    except duckdb.Error as e:
        con.close()
        raise StoreError(
            f"DuckDB's full-text-search extension failed to load from {extension}: {e}; "
            f"reinstall duckdb-extension-fts=={duckdb.__version__}"
        ) from e
    return con


def working_copy(source: Path) -> Path:
    """Copy the store file `source` (and its WAL) into a new temporary directory; returns that directory."""
    work = Path(tempfile.mkdtemp(prefix="semula-store-"))
    try:
        for suffix in ("", ".wal"):
            if (source.parent / (source.name + suffix)).is_file():
                shutil.copyfile(source.parent / (source.name + suffix), work / (source.name + suffix))
    except OSError as e:
        shutil.rmtree(work, ignore_errors=True)
        raise StoreError(f"cannot copy the read-only store {source} to {work}: {e}") from e
    return work
