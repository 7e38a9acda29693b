"""A read-only store: opened without writing; one that needs migrations or writes to open, from a temporary copy."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from semula.store.base import RecordingStore
from semula.store.duckdb.store import STORE_FILE, DuckDBStore
from semula.store.selection import StoreSpec, open_store_with
from semula.store.types import StoreError


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


def test_a_read_only_store_whose_opening_writes_is_opened_again_from_a_copy(tmp_path: Path) -> None:
    """`open_store_with`: what opens on the store (an engine syncing the recordings folder) may need a
    write; on a read-only file that is a StoreError, and the factory retries on a private copy."""
    DuckDBStore.open(tmp_path).close()
    before = _digest(tmp_path / STORE_FILE)
    seen: list[DuckDBStore] = []

    def writes(store: RecordingStore) -> str:
        assert isinstance(store, DuckDBStore)
        seen.append(store)
        store.set_meta("opened_by", "test")
        return "opened"

    assert open_store_with(StoreSpec.parse(None, tmp_path, read_only=True), writes) == "opened"
    assert [s.copied_from for s in seen] == [None, tmp_path / STORE_FILE]
    assert _closed(seen[0]), "the read-only store is closed before the copy opens"
    seen[1].close()
    assert _digest(tmp_path / STORE_FILE) == before


def test_a_writable_store_is_not_copied_and_closed_when_its_use_fails(tmp_path: Path) -> None:
    seen: list[RecordingStore] = []

    def fails(store: RecordingStore) -> None:
        seen.append(store)
        raise StoreError("the engine could not open")

    with pytest.raises(StoreError, match="could not open"):
        open_store_with(StoreSpec.parse(None, tmp_path), fails)
    assert len(seen) == 1 and isinstance(seen[0], DuckDBStore) and _closed(seen[0])


def _closed(store: DuckDBStore) -> bool:
    try:
        store.con.execute("SELECT 1")
    except duckdb.Error:
        return True
    return False
