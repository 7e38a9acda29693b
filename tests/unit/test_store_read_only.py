"""A read-only store: opened without writing; one that needs migrations from a temporary copy."""

from __future__ import annotations

import hashlib
from pathlib import Path

from semula.store.duckdb.store import STORE_FILE, DuckDBStore


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_read_only_store_opens_without_writing(tmp_path: Path) -> None:
    DuckDBStore.open(tmp_path).close()
    before = _digest(tmp_path / STORE_FILE)
    store = DuckDBStore.open(tmp_path, read_only=True)
    assert store.read_only and store.copied_from is None
    assert store.projects() == []
    store.close()
    assert _digest(tmp_path / STORE_FILE) == before


def test_a_read_only_store_that_needs_migrations_is_opened_from_a_copy(tmp_path: Path) -> None:
    store = DuckDBStore.open(tmp_path)
    store.con.execute("DROP TABLE meta")
    store.con.execute("DELETE FROM schema_migrations WHERE name = '004_meta'")
    store.close()
    before = _digest(tmp_path / STORE_FILE)
    store = DuckDBStore.open(tmp_path, read_only=True)
    work = store.path.parent
    assert store.copied_from == tmp_path / STORE_FILE and work != tmp_path
    store.close()
    assert not work.exists(), "the working copy is removed at close"
    assert _digest(tmp_path / STORE_FILE) == before
