"""The in-memory full-text index: the extension's tokenizer and ranking, without a query per miss."""

from __future__ import annotations

import random
import time

import pytest
from entries import chat, new_entry

from semula.engine.engine import Engine
from semula.store.duckdb.store import DuckDBStore
from semula.store.duckdb.fts import BM25_SQL, PROPOSALS, QUERY_TERMS
from semula.store.duckdb.postings import Postings, Stemmer, fts_tokens

WORDS = ("budget report meeting running runs ran dogs dog café naïve résumé straße ÆON don't x2y 3rd "
         "customer invoice invoices shipped shipping email emails Lyon Paris trains before noon the of a "
         "quarterly quarter board bullet points summarise summarize translate translation").split()
TEXTS = [
    "Hello the running Dogs, café naïve x2y don't 3rd ÆON straße",
    "E-mail: a.b@c.d (urgent!) -- 50% off; [draft] {v2} <tag> `code` ~home/x|y \\ path/to \"quoted\" 'single'",
    "tabs\tand\nnewlines\r\nand  double  spaces",
    "Ünïcödé àccents, Ångström, Øresund, façade, coöperate",
    "",
    "   ",
]


def settle(engine) -> None:
    """Wait for the background build and fold the fresh entries in."""
    deadline = time.monotonic() + 30
    lexical = engine.lexical
    if not hasattr(lexical, "_fresh"):  # Postgres: its full-text index is current at commit
        return
    while (lexical._fresh or not lexical._built or lexical.last_build_seconds is None) and time.monotonic() < deadline:
        engine.lexical.maybe_rebuild(wait=True)
        time.sleep(0.05)
    assert engine.lexical._built and not engine.lexical._fresh


@pytest.fixture
def store(tmp_path):
    s = DuckDBStore.open(tmp_path)
    yield s
    s.close()


def test_the_python_tokenizer_is_the_extensions_macro(store):
    store.upsert_entry(new_entry(chat("anything at all"), "p"))
    store.con.execute("PRAGMA create_fts_index('entries', 'id', 'last_text', overwrite=1)")
    rng = random.Random(3)
    texts = TEXTS + [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(50)]
    for text in texts:
        expected = [t for t in store.con.execute("SELECT fts_main_entries.tokenize(?)", [text]).fetchone()[0] if t]
        assert fts_tokens(text) == expected, text


def test_stems_are_asked_once_per_word():
    asked: list[list[str]] = []

    def ask(words):
        asked.append(words)
        return [(w, w.rstrip("s")) for w in words]

    stemmer = Stemmer()
    assert stemmer.stems(["dogs", "cats", "dogs"], ask) == ["dog", "cat"]
    assert stemmer.stems(["cats", "birds"], ask) == ["cat", "bird"]
    assert asked == [["dogs", "cats"], ["birds"]]


def test_a_remembered_empty_stem_stays_empty_beside_a_new_word():
    """Porter stems "s" (from "What's") to "": the same query's terms must not depend on what was asked before."""
    stemmer = Stemmer()
    ask = lambda words: [(w, "" if w == "s" else w) for w in words]  # noqa: E731
    assert stemmer.stems(["what", "s", "http"], ask) == ["what", "", "http"]
    assert stemmer.stems(["what", "s", "new"], ask) == ["what", "", "new"]  # "new" asked, "s" remembered
    assert stemmer.stems(["what", "s"], ask) == ["what", ""]


@pytest.mark.slow
def test_in_memory_ranking_is_the_sql_ranking(store):
    rng = random.Random(7)
    for i in range(600):
        project = "p" if i % 5 else "other"
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 30)))
        store.upsert_entry(new_entry(chat(f"{text} {i}"), project))
    store.con.execute("PRAGMA create_fts_index('entries', 'id', 'last_text', overwrite=1)")
    postings = Postings.load(store.con)
    stem = "SELECT DISTINCT stem(unnest(fts_main_entries.tokenize(?)), 'porter')"
    for _ in range(80):
        query = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 25)))
        for project in ("p", "other", "nobody"):
            expected = [int(r[0]) for r in store.con.execute(BM25_SQL, [query, QUERY_TERMS, project, PROPOSALS]).fetchall()]
            terms = [r[0] for r in store.con.execute(stem, [query]).fetchall()]
            assert postings.propose(project, terms, QUERY_TERMS, PROPOSALS) == expected, (query, project)


def test_deleted_entries_are_never_proposed(engine):
    kept = engine.record(new_entry(chat("Which trains leave Lyon for Paris before noon"), "p"))
    gone = engine.record(new_entry(chat("Which trains leave Lyon for Paris before noon today"), "p"))
    settle(engine)
    assert set(engine.lexical.propose("p", "trains Lyon Paris noon")) == {kept, gone}
    engine.store.delete_entry(gone)
    engine.lexical.deleted(gone)
    assert engine.lexical.propose("p", "trains Lyon Paris noon") == [kept]


def test_the_index_is_counted_in_bytes(duckdb_engine):
    engine = duckdb_engine
    before = engine.lexical.nbytes()
    engine.record(new_entry(chat("a prompt about the quarterly budget " * 50), "p"))
    assert engine.lexical.nbytes() > before


def test_a_restart_on_a_current_index_loads_it_and_builds_nothing(tmp_path):
    engine = Engine.open(DuckDBStore.open(tmp_path))
    kept = engine.record(new_entry(chat("Which trains leave Lyon for Paris before noon"), "p"))
    settle(engine)
    engine.close()
    engine = Engine.open(DuckDBStore.open(tmp_path))
    try:
        deadline = time.monotonic() + 30
        while not engine.lexical._built and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.lexical.propose("p", "trains Lyon Paris noon") == [kept]
        assert engine.lexical.last_build_seconds == 0.0  # loaded, not rebuilt
    finally:
        engine.close()


def test_a_restart_after_texts_changed_rebuilds(tmp_path):
    engine = Engine.open(DuckDBStore.open(tmp_path))
    entry = engine.record(new_entry(chat("Which trains leave Lyon for Paris before noon"), "p"))
    settle(engine)
    engine.store.set_last_texts([(entry, "a recipe for onion soup")])
    engine.close()
    engine = Engine.open(DuckDBStore.open(tmp_path))
    try:
        settle(engine)
        assert engine.lexical.last_build_seconds > 0.0
        assert engine.lexical.propose("p", "onion soup recipe") == [entry]
    finally:
        engine.close()
