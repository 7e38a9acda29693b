"""The Postgres store against a real server (tests/support/pg_helpers.py): the same behaviour as the DuckDB
store, plus what only a shared store needs (concurrent migrations and recordings, the change log)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

import entries
from semula.store.postgres.connect import masked
from semula.store.postgres.store import PgStore
from semula.store.selection import StoreKind, StoreSpec, open_store, server_url, store_spec
from semula.store.types import StoreError

HELLO = entries.chat("hello there, how is the weather in Lisbon today")


def new_entry(fp: str = "fp1:a", body: bytes = b"{}", project: str = "p", request=HELLO):
    return entries.new_entry(request, project, body=body, request_fp=fp, normalised_fp="nfp1:" + fp)


@pytest.fixture
def store(pg_url):
    store = PgStore.open(pg_url)
    try:
        yield store
    finally:
        store.close()


def test_migrations_are_recorded_and_two_stores_opening_at_once_do_not_race(pg_url):
    opened: list[PgStore] = []
    errors: list[Exception] = []

    def open_one():
        try:
            opened.append(PgStore.open(pg_url))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(pg_url) as con:
        names = [r[0] for r in con.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()]
        salts = con.execute("SELECT count(*) FROM meta WHERE key = 'fingerprint_salt'").fetchone()[0]
    from semula.store.postgres.migrations import MIGRATIONS

    assert names == sorted(name for name, _ in MIGRATIONS) and names[:3] == ["001_core", "002_lexical", "003_changes"]
    assert salts == 1
    assert len({s.fingerprint_salt() for s in opened}) == 1
    for s in opened:
        s.close()


def test_rerecording_keeps_the_id(store):
    first = store.upsert_entry(new_entry(body=b"one"))
    again = store.upsert_entry(new_entry(body=b"two"))
    other = store.upsert_entry(new_entry(fp="fp1:b"))
    assert first == again != other
    assert store.get_entry(first).body == b"two"
    assert store.delete_entry(first) and store.get_entry(first) is None
    assert not store.delete_entry(first)


def test_the_same_request_recorded_by_many_at_once_is_one_entry(pg_url):
    stores = [PgStore.open(pg_url) for _ in range(4)]
    ids: list[int] = []
    barrier = threading.Barrier(8)

    def record(s: PgStore, n: int):
        barrier.wait()
        ids.append(s.upsert_entry(new_entry(body=b"answer %d" % n)))

    threads = [threading.Thread(target=record, args=(stores[i % 4], i)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 8
    assert len(stores[0].index_rows()) == 1
    for s in stores:
        s.close()


def test_bulk_upsert_returns_ids_in_order_and_the_last_wins(store):
    a, b = new_entry("fp1:a", b"1"), new_entry("fp1:b", b"2")
    ids = store.upsert_entries([a, b, new_entry("fp1:a", b"3")])
    assert ids[0] == ids[2] != ids[1]
    assert store.get_entry(ids[0]).body == b"3"
    assert store.upsert_entries([new_entry("fp1:b", b"4")]) == [ids[1]]


def test_review_aliases_and_settings_round_trip(store):
    entry_id = store.upsert_entry(new_entry())
    [cand] = store.add_candidates("p", "fp1:q", "nfp1:q", {"x": 1}, "text", [("lexical", 0.9, None, "r", entry_id)])
    assert store.candidate(cand.id).request_canonical == {"x": 1}
    assert store.open_request_keys() == {("p", "nfp1:q")}
    store.set_candidate_status([cand.id], "approved")
    assert store.candidates() == [] and store.paired_entries("p", "nfp1:q") == {entry_id: "approved"}
    store.replace_aliases("p", [("nfp1:q", entry_id, {"x": 1})])
    assert store.alias_rows() == [("p", "nfp1:q", entry_id)]
    assert store.alias_requests("p") == [("nfp1:q", entry_id, {"x": 1})]
    store.set_project_setting("p", "scrub_patterns", ["a+"])
    store.set_project_setting("p", "scrub_patterns", ["b+"])
    assert store.all_project_settings() == {"p": {"scrub_patterns": ["b+"]}}
    assert store.projects() == ["p"]


def test_lexical_proposals_come_from_postgres_full_text(store):
    lisbon = store.upsert_entry(new_entry("fp1:l"))
    store.upsert_entry(new_entry("fp1:c", request=entries.chat("write a haiku about cats and autumn leaves")))
    lexical = store.lexical_index()
    assert lexical.propose("p", "what is the weather like in Lisbon") == [lisbon]
    assert lexical.propose("other", "what is the weather like in Lisbon") == []
    cjk = store.upsert_entry(new_entry("fp1:z", request=entries.chat("今天天气怎么样")))
    assert cjk in lexical.propose("p", "今天天气好吗")  # the english parser does not split CJK: the scan does


def test_vectors_are_bytes_searched_in_process(store):
    import numpy as np

    entry_id = store.upsert_entry(new_entry())
    assert store.vectors.put("m", [(entry_id, np.array([1.0, 0.0], dtype=np.float32))]) == 1
    ids, matrix = store.vectors.load("m", "p")
    assert list(ids) == [entry_id] and matrix.shape == (1, 2)
    assert store.vectors.counts() == {"m": 1} and store.vectors.count_without("m") == 0


def test_other_stores_writes_are_followed(pg_url):
    reader, writer = PgStore.open(pg_url), PgStore.open(pg_url, listen=False)
    seen: list = []
    got = threading.Event()

    def apply(changes):
        seen.extend(changes)
        got.set()

    reader.follow(reader.change_position(), apply)
    try:
        entry_id = writer.upsert_entry(new_entry())
        assert got.wait(10)
        while not any(c.kind == "entry" and c.ref == entry_id for c in seen):
            got.clear()
            assert got.wait(10)
    finally:
        reader.close()
        writer.close()


def test_an_unreachable_server_is_a_clear_error_without_the_password(postgres_server):
    url = f"postgresql://postgres:hunter2secret@127.0.0.1:{_closed_port()}/x"
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        PgStore.open(url)
    assert "unreachable" in str(raised.value) and "hunter2secret" not in str(raised.value)
    assert "***" in str(raised.value)
    assert time.monotonic() - started < 60  # fails instead of hanging (not a speed assertion)


def test_masking_and_selection(monkeypatch):
    assert masked("postgresql://u:p%40ss@h:5/db") == "postgresql://u:***@h:5/db"
    assert masked("host=h password=abc user=u") == "host=h password=*** user=u"
    monkeypatch.setenv("SEMULA_STORE", "postgresql://h/db")
    assert server_url() == "postgresql://h/db"
    assert server_url("") is None
    assert store_spec("data") == StoreSpec(StoreKind.POSTGRES, "postgresql://h/db", None)
    monkeypatch.setenv("SEMULA_STORE", "")
    assert server_url() is None
    assert store_spec("data", read_only=True) == StoreSpec(StoreKind.DUCKDB, None, Path("data/semula.duckdb"), True)


def test_open_store_defaults_to_duckdb(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMULA_STORE", raising=False)
    store = open_store(store_spec(tmp_path))
    try:
        assert (tmp_path / "semula.duckdb").is_file()
    finally:
        store.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("listen", [True, False], ids=["listen", "poll"])
def test_an_engine_learns_other_engines_recordings_aliases_and_settings(pg_url, monkeypatch, listen):
    from semula.engine.engine import Engine

    monkeypatch.setenv("SEMULA_STORE_LISTEN", "on" if listen else "off")
    a, b = Engine.open(open_store(StoreSpec.parse(pg_url, "."))), Engine.open(open_store(StoreSpec.parse(pg_url, ".")))
    try:
        request = entries.chat("which trains leave Lyon before noon")
        new = entries.new_entry(request, "p")
        entry_id = a.record(new)
        _eventually(lambda: b.match("p", new.request_fp, new.normalised_fp) is not None)
        assert b.cached_entry(entry_id) is not None  # the answer came too: served from memory
        a.store.replace_aliases("p", [("nfp:other", entry_id, None)])
        _eventually(lambda: (m := b.match("p", "fp:none", "nfp:other")) is not None and m.tier == "alias")
        a.recordings.config_set("p", "bypass_temperature", "0.9")
        _eventually(lambda: b.settings_for("p").bypass_temperature == 0.9)
        a.recordings.delete_entry(entry_id)
        _eventually(lambda: b.match("p", new.request_fp, new.normalised_fp) is None)
    finally:
        a.close()
        b.close()


def _eventually(check, patience: float = 30.0) -> None:
    """Poll `check` (a safety net against a stuck follower; freshness is measured by the benchmark)."""
    deadline = time.monotonic() + patience
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)


def test_texts_with_query_syntax_are_proposed_not_errors(store):
    odd = "fetch https://example.com/a?x=1&y=2 it's O'Brien's \\back|slash (a & b) !not <-> 'quoted'"
    entry_id = store.upsert_entry(new_entry("fp1:odd", request=entries.chat(odd)))
    lexical = store.lexical_index()
    assert entry_id in lexical.propose("p", odd)
    assert entry_id in lexical.propose("p", "https://example.com/a?x=1&y=2")  # one lexeme holding `&`
    assert lexical.propose("p", "the and of") == []  # stopwords only: nothing to ask


def test_a_change_committed_after_a_later_one_is_not_missed(pg_url):
    """Ids are handed out at insert, visible at commit: a lower id that commits late is still applied."""
    reader, writer = PgStore.open(pg_url), PgStore.open(pg_url)
    seen: set[int] = set()
    lock = threading.Lock()

    def apply(changes):
        with lock:
            seen.update(c.ref for c in changes if c.kind == "entry")

    reader.follow(reader.change_position(), apply)
    slow = psycopg.connect(pg_url)
    try:
        slow.execute("SELECT 1")  # a transaction is open from here
        late = entries.new_entry(entries.chat("the late one"), "p")
        from semula.store.postgres.store import UPSERT_SQL, _upsert_params
        from semula.store.sql import now

        late_id = slow.execute(UPSERT_SQL, _upsert_params(late, now())).fetchone()[0]  # its change id is taken
        early_id = writer.upsert_entry(new_entry("fp1:early"))  # a higher change id, committed first
        _eventually(lambda: early_id in seen)
        slow.commit()
        _eventually(lambda: late_id in seen)
    finally:
        slow.close()
        reader.close()
        writer.close()


def test_a_second_engine_on_the_store_takes_the_follower_over(pg_url):
    """Two engines on one store (a restart in a test) leave one follower, and closing stops it: an orphan
    would outlive the pool and print "lost the Postgres store" into whatever runs next."""
    def followers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "semula-pg-changes" and t.is_alive()]

    before = set(followers())
    store = PgStore.open(pg_url)
    store.follow(store.change_position(), lambda changes: None)
    first = set(followers()) - before
    store.follow(store.change_position(), lambda changes: None)
    assert len(set(followers()) - before) == 1 and not (first & set(followers()))
    store.close()
    assert not set(followers()) - before


def test_a_throwaway_store_gets_its_own_schema_and_drops_it(pg_url, tmp_path):
    """`semula eval --store URL` records its pairs in a schema of its own, gone afterwards."""
    from semula.store.selection import throwaway_store

    with throwaway_store(StoreSpec.parse(pg_url, tmp_path)) as store:
        store.upsert_entry(entries.new_entry(entries.chat("only here")))
        schema = store.schema
        assert schema and schema.startswith("semula_eval_")
        store.close()
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()[0] == 0
        assert con.execute("SELECT to_regclass('public.entries')").fetchone()[0] is None
    assert not list(tmp_path.iterdir())  # nothing of a file store in the data dir
