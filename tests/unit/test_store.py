from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import entries
from semula.store.duckdb.store import DuckDBStore
from semula.store.types import NewEntry, StoreError

HELLO = entries.chat("hello")


def new_entry(fp: str = "fp1:a", body: bytes = b"{}", project: str = "p") -> NewEntry:
    """A recording with the given (opaque) fingerprint."""
    return entries.new_entry(HELLO, project, body=body, request_fp=fp, normalised_fp="nfp1:" + fp)



# --- both backends (the `engine` fixture runs each test on DuckDB and on Postgres) ------------------


def test_deleting_an_entry_deletes_its_vectors(engine):
    store = engine.store
    kept, gone = store.upsert_entry(new_entry("fp1:kept")), store.upsert_entry(new_entry("fp1:gone"))
    store.vectors.ensure_table()
    vector = np.ones(8, dtype=np.float32)
    assert store.vectors.put("m", [(kept, vector), (gone, vector)]) == 2
    assert store.delete_entry(gone) and not store.delete_entry(gone)
    assert store.vectors.counts() == {"m": 1}
    ids, _ = store.vectors.load("m", "p")
    assert ids.tolist() == [kept]


def test_shared_sql_overwrites_settings_and_meta_and_closes_candidates_by_id(engine):
    store = engine.store
    store.set_project_setting("p", "mode", "a")
    store.set_project_setting("p", "mode", {"b": 1})
    assert store.project_settings("p") == {"mode": {"b": 1}} and store.all_project_settings() == {"p": {"mode": {"b": 1}}}
    store.set_meta("k", "1")
    store.set_meta("k", "2")
    assert store.meta("k") == "2" and store.meta("nothing") is None
    entry = store.upsert_entry(new_entry())
    made = store.add_candidates("p", "fp1:x", "nfp1:x", {"q": 1}, "x", [("lexical", 0.9, None, None, entry)] * 3)
    store.set_candidate_status([made[0].id, made[2].id], "rejected")
    assert [c.status for c in store.candidates("p", status=None)] == ["rejected", "open", "rejected"]
    assert store.canonicals_by_ids([entry, 10**9]) == {entry: store.get_entry(entry).canonical}


def test_capabilities_are_declared(engine):
    store = engine.store
    server = store.shared
    assert store.reconnects is server and store.follows_changes is server
    assert (store.file is None) is server

def test_migrations_are_recorded_and_run_once(tmp_path):
    store = DuckDBStore.open(tmp_path)
    assert store.migrate() == []
    names = [r[0] for r in store.con.execute("SELECT name FROM schema_migrations").fetchall()]
    assert names[0] == "001_core"
    store.close()
    assert DuckDBStore.open(tmp_path).migrate() == []


def test_a_new_store_file_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        DuckDBStore.open(tmp_path).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "semula.duckdb").stat().st_mode) == 0o600


def test_rerecording_keeps_the_id(tmp_path):
    store = DuckDBStore.open(tmp_path)
    first = store.upsert_entry(new_entry(body=b"one"))
    again = store.upsert_entry(new_entry(body=b"two"))
    other = store.upsert_entry(new_entry(fp="fp1:b"))
    assert first == again != other
    assert store.get_entry(first).body == b"two"
    assert store.delete_entry(first) and store.get_entry(first) is None


def test_fts_extension_is_loaded(tmp_path):
    store = DuckDBStore.open(tmp_path)
    assert store.con.execute("SELECT loaded FROM duckdb_extensions() WHERE extension_name='fts'").fetchone()[0]


def test_locked_store_gives_a_clear_error(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(tmp_path / 'semula.duckdb')!r})
            print('held', flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match="locked by another process"):
            DuckDBStore.open(tmp_path)
    finally:
        holder.kill()
        holder.wait()


def test_corrupt_store_gives_a_store_error(tmp_path):
    (tmp_path / "semula.duckdb").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError):
        DuckDBStore.open(tmp_path)


@pytest.mark.slow
def test_kill_9_mid_write_leaves_no_half_entry(tmp_path):
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            sys.path[:0] = {sys.path!r}
            sys.path.insert(0, {os.path.dirname(__file__)!r})
            from test_store import new_entry
            from semula.store.duckdb.store import DuckDBStore
            store = DuckDBStore.open({str(tmp_path)!r})
            i = 0
            print('writing', flush=True)
            while True:
                i += 1
                store.upsert_entry(new_entry(fp=f'fp1:{{i}}', body=b'x' * 200_000))
        """)], stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert writer.stdout.readline().strip() == "writing"
    time.sleep(1.5)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    store = DuckDBStore.open(tmp_path)
    rows = store.con.execute("SELECT count(*), min(octet_length(body)), max(octet_length(body)) FROM entries").fetchone()
    assert rows[0] > 0
    assert rows[1] == rows[2] == 200_000
