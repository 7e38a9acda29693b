"""Moving between stores through the recordings folder (`semula export` / `semula import`, `--store URL`),
and a folder sync on a shared store that never removes what other runners recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import clean_env, run_semula
from entries import chat, new_entry
from semula.core.settings import ProjectSettings
from semula.recordings.folder import RecordingsFolder
from semula.store.duckdb.store import DuckDBStore
from semula.store.postgres.store import PgStore

pytestmark = pytest.mark.e2e


def _bodies(store) -> set[bytes]:
    return {store.get_entry(i).body for i, *_ in store.index_rows()}


def test_export_import_moves_recordings_from_the_file_to_postgres_and_back(tmp_path: Path, pg_url: str) -> None:
    duck = DuckDBStore.open(tmp_path / "a")
    for n in range(3):
        duck.upsert_entry(new_entry(chat(f"question number {n}"), body=b'{"n": %d}' % n))
    expected = _bodies(duck)
    duck.close()
    env = clean_env(SEMULA_STORE="")
    assert run_semula("export", str(tmp_path / "f"), "--data-dir", str(tmp_path / "a"), env=env).returncode == 0
    moved = run_semula("import", str(tmp_path / "f"), "--data-dir", str(tmp_path / "b"), "--store", pg_url, env=env)
    assert moved.returncode == 0, moved.stderr
    pg = PgStore.open(pg_url)
    try:
        assert _bodies(pg) == expected
    finally:
        pg.close()
    back = run_semula("export", str(tmp_path / "g"), "--data-dir", str(tmp_path / "b"), env=clean_env(SEMULA_STORE=pg_url))
    assert back.returncode == 0, back.stderr
    assert run_semula("import", str(tmp_path / "g"), "--data-dir", str(tmp_path / "c"), env=env).returncode == 0
    again = DuckDBStore.open(tmp_path / "c")
    try:
        assert _bodies(again) == expected
    finally:
        again.close()


def test_a_folder_sync_never_removes_other_runners_recordings(tmp_path: Path, pg_url: str) -> None:
    store = PgStore.open(pg_url)
    try:
        folder = RecordingsFolder(tmp_path / "rec", tmp_path / "data")
        mine = store.upsert_entry(new_entry(chat("recorded here and committed"), body=b"mine"))
        folder.export(store)
        theirs = store.upsert_entry(new_entry(chat("recorded by another runner"), body=b"theirs"))
        report = folder.sync(store, lambda p: ProjectSettings())
        assert report is not None and store.get_entry(theirs) is not None
        for path in (tmp_path / "rec").rglob("*.json"):
            if "committed" in path.name:
                path.unlink()
        folder.sync(store, lambda p: ProjectSettings())
        assert store.get_entry(theirs) is not None, "another runner's recording was removed"
        assert store.get_entry(mine) is None  # its file was deleted here: that deletion is ours
    finally:
        store.close()
