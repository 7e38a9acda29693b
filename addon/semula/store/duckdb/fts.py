"""Lexical retrieval: DuckDB's full-text-search index proposes up to 10 recordings.

Retrieval only: BM25 depends on corpus size and cannot carry a threshold, so the proposals
are scored by `nearmatch` (word-overlap Dice) and only that score meets thresholds.

DuckDB's FTS index is a snapshot: it does not see rows written after it was built. So the
index is rebuilt on a background thread (its own cursor, in a transaction) when stale, and
each build is read into memory (`postings.Postings`: BM25 over the rarest query terms' posting
lists, the extension's tokenizer and stemmer, no query per miss). Entries written since the
last build are found by a direct scan of an in-memory list. No request waits for a rebuild,
and `propose` may run on several threads at once. `BM25_SQL` is the same ranking in SQL, kept
as the reference the in-memory one is tested against.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from semula.core.nearmatch import lexical_words
from semula.core.text import dice, dice_counts
from semula.store.duckdb.postings import STEM_SQL, Postings, Stemmer, fts_tokens
from semula.store.types import one_row

log = logging.getLogger("semula")

PROPOSALS = 10
MAX_QUERY_CHARS = 4000  # a 1 MB prompt must not become a 1 MB query
REBUILD_MIN_SECONDS = 1.0
# A build re-indexes the whole table (~9 s at 100k entries): leave the machine at least twice
# that long between builds; the fresh-entry scan keeps new recordings findable meanwhile.
REBUILD_IDLE_FACTOR = 2.0
# Nor at every write: a build's working memory grows with the table and, under load, much of it stays
# resident (the soak's RSS rose a step with each build, 20k -> 34k recordings: ~550 -> ~650 MB building
# every few seconds, ~400 -> ~530 MB once a minute). So a build waits until the fresh entries cost each
# miss's scan real time (FRESH_WORDS_REBUILD words: ~10 ms of Dice) or the oldest is FRESH_MAX_SECONDS
# old; until then the fresh scan finds them, as it does during a build.
FRESH_WORDS_REBUILD = 50_000
FRESH_MAX_SECONDS = 30.0
# Before the first index is loaded (a few seconds after start), a miss scans this many of the
# project's newest entries, each cut to MAX_QUERY_CHARS: bounded, never the whole project.
SCAN_LIMIT = 1000
# Only the rarest query terms go to the index: the postings of common words dominate the cost
# (benchmark/results/lexical.md, 100k entries: all terms p50 415 ms, rarest 12 78 ms, rarest 4
# 38 ms, the paraphrased source still among the 10 proposals in every case), and the
# proposals are re-scored by word overlap anyway.
QUERY_TERMS = 6  # the fallback scan for texts the index cannot tokenise (CJK, Arabic)

BM25_SQL = """
WITH qterms AS (SELECT DISTINCT stem(unnest(fts_main_entries.tokenize(?)), 'porter') AS term),
qt AS (SELECT d.termid, d.df FROM fts_main_entries.dict d JOIN qterms q ON d.term = q.term
       ORDER BY d.df, d.termid LIMIT ?),
tf AS (SELECT t.docid, t.termid, count(*) AS tf FROM fts_main_entries.terms t JOIN qt USING (termid) GROUP BY ALL),
st AS (SELECT num_docs, avgdl FROM fts_main_entries.stats)
SELECT docs.name AS id,
       sum(ln((st.num_docs - qt.df + 0.5) / (qt.df + 0.5) + 1) * tf.tf * 2.2
           / (tf.tf + 1.2 * (0.25 + 0.75 * docs.len / st.avgdl))) AS bm25
FROM tf JOIN qt USING (termid) JOIN fts_main_entries.docs docs USING (docid)
     JOIN entries e ON e.id = docs.name, st
WHERE e.project = ?
GROUP BY 1 ORDER BY bm25 DESC, id DESC LIMIT ?
"""


# What the last build indexed, so that a restart can tell whether the stored index is current:
# an order-independent hash of every (id, text), kept in `meta` by each build.
# v2: built with no stopword list (was DuckDB's English one, which dropped "say", "hi", "three", "not"…),
# so an index stored under the old key is rebuilt.
TEXTS_HASH_KEY = "fts_texts_hash_v2"
TEXTS_HASH_SQL = "SELECT coalesce(bit_xor(hash(id, last_text)), 0)::VARCHAR FROM entries"


@dataclass(frozen=True)
class Fresh:
    """A recording written since the last build: its last text's words, counted once (every miss until the
    next build scores them: counting them again each time was most of a burst's fresh scan)."""

    entry_id: int
    project: str
    counts: Counter[str]
    size: int  # words, repeats counted

    @classmethod
    def of(cls, entry_id: int, project: str, text: str) -> Fresh:
        # as a query is cut, so is a fresh text: a 20 MB prompt must not stay as 3M words
        words = lexical_words(text[:MAX_QUERY_CHARS])
        return cls(entry_id, project, Counter(words), len(words))


class LexicalIndex:
    """Owns the FTS index of `entries.last_text`. `propose` is safe on any thread (one cursor each)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, on_error: Callable[[Exception], None] | None = None,
                 read_only: bool = False):
        self.con = con
        self._cursor = con.cursor()  # the rebuild thread's own connection handle
        self._lock = threading.Lock()
        self._fresh: dict[int, Fresh] = {}
        self._postings: Postings | None = None  # the last build, in memory
        self._gone: set[int] = set()  # deleted since that build
        self._stemmer = Stemmer()
        self._local = threading.local()  # each reading thread's cursor
        self._readers: list[duckdb.DuckDBPyConnection] = []
        self._building = False
        self._stale = True
        self._stale_since: float | None = None  # when the index first lacked a write since its last build
        self._fresh_words = 0  # words in `_fresh`: what each miss's scan costs
        self._last_build = 0.0
        self.last_build_seconds: float | None = None
        self.on_error = on_error
        self._closed = False
        # Held for a whole build: close() takes it, so the connection is never closed under a build
        # and a build that starts after close() sees `_closed` before it touches the connection.
        self._build_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.read_only = read_only
        if read_only:
            self._stale = False
            self._load_stored()

    @property
    def _built(self) -> bool:
        return self._postings is not None

    def _load_stored(self) -> bool:
        """The index the store was stopped with, plus the entries it lacks (as fresh), if there is one.

        Returns whether it indexes exactly the texts stored now (then there is nothing to rebuild)."""
        try:
            current = one_row(self._cursor.execute(f"SELECT ({TEXTS_HASH_SQL}) = (SELECT value FROM meta WHERE key = ?)",
                                                   [TEXTS_HASH_KEY]).fetchone())[0]
            postings = Postings.load(self._cursor)
            rows = self._cursor.execute(
                "SELECT id, project, substr(last_text, 1, ?) FROM entries "
                "WHERE id NOT IN (SELECT name FROM fts_main_entries.docs)", [MAX_QUERY_CHARS]).fetchall()
        except duckdb.Error:  # never indexed: a read-only store scans, a writable one builds
            if not self.read_only:
                return False
            current = False
            postings, rows = None, self._cursor.execute("SELECT id, project, substr(last_text, 1, ?) FROM entries",
                                                        [MAX_QUERY_CHARS]).fetchall()
        lacking = {int(i): Fresh.of(int(i), p, t or "") for i, p, t in rows}
        with self._lock:
            self._postings = postings
            self._fresh = {**lacking, **self._fresh}
            self._fresh_words = sum(f.size for f in self._fresh.values())
        return bool(current) and not lacking

    def nbytes(self) -> int:
        """What the index holds in memory: postings, stems, fresh word tuples."""
        postings = self._postings
        with self._lock:
            fresh = list(self._fresh.values())
        fresh_bytes = sum(250 + sum(len(w) + 110 for w in f.counts) for f in fresh)  # a Counter's slot ~60 B
        return (postings.nbytes() if postings else 0) + self._stemmer.nbytes() + fresh_bytes

    def close(self) -> None:
        """Stop rebuilding (the store is about to close): no build runs once this returns."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
            building = self._building
        if timer is not None:
            timer.cancel()
        if building:  # a build of thousands of texts takes seconds: it stops, rolled back (the next start builds)
            try:
                self._cursor.interrupt()
            except duckdb.Error:
                pass
        with self._build_lock:  # waits for a build in progress; none starts after this
            pass
        with self._lock:
            readers, self._readers = self._readers, []
        for cursor in [*readers, self._cursor]:
            try:
                cursor.close()
            except duckdb.Error:
                pass

    def written(self, entry_id: int, project: str, text: str) -> None:
        """A recording was (re)written: findable at once by scan, by the index after a rebuild."""
        fresh = Fresh.of(entry_id, project, text)
        with self._lock:
            self._drop_fresh(entry_id)
            self._fresh[entry_id] = fresh
            self._fresh_words += fresh.size
            self._mark_stale()
        self.maybe_rebuild()

    def deleted(self, entry_id: int) -> None:
        with self._lock:
            self._drop_fresh(entry_id)
            self._gone.add(entry_id)
            self._mark_stale()

    def _drop_fresh(self, entry_id: int) -> None:  # under `_lock`
        if (old := self._fresh.pop(entry_id, None)) is not None:
            self._fresh_words -= old.size

    def _mark_stale(self) -> None:  # under `_lock`
        self._stale = True
        if self._stale_since is None:
            self._stale_since = time.monotonic()

    def _due_in(self, now: float) -> float:
        """Seconds until a build is due (<= 0: now), under `_lock`. The first build is due at once; later
        ones after REBUILD_IDLE_FACTOR times the last build and once the fresh entries are many or old."""
        interval = max(REBUILD_MIN_SECONDS, REBUILD_IDLE_FACTOR * (self.last_build_seconds or 0.0))
        idle_left = interval - (now - self._last_build)
        if self._postings is None or self._fresh_words >= FRESH_WORDS_REBUILD:
            return idle_left
        return max(idle_left, FRESH_MAX_SECONDS - (now - (self._stale_since or now)))

    def maybe_rebuild(self, wait: bool = False) -> None:
        with self._lock:
            if self._closed or self.read_only:
                return
            wait_left = self._due_in(time.monotonic())
            due = self._stale and not self._building and wait_left <= 0
            if not due and not (wait and self._stale and not self._building):
                if self._stale and not self._building and not self._timer:
                    # too soon after the last build: come back when it is due, not at the next write
                    self._timer = threading.Timer(max(wait_left, 0.05), self._timer_fired)
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._building = True
        if wait:
            self._rebuild()
        else:
            threading.Thread(target=self._rebuild, name="semula-fts-rebuild", daemon=True).start()

    def _timer_fired(self) -> None:
        with self._lock:
            self._timer = None
        self.maybe_rebuild()

    def _rebuild(self) -> None:
        with self._build_lock:
            if self._closed:  # closed between scheduling and starting: the connection may be gone
                with self._lock:
                    self._building = False
                return
            self._build()

    def _build(self) -> None:
        started = time.monotonic()
        cursor = self._cursor
        stale_since = None
        try:
            if self._postings is None and self._load_stored() and self._first_build_only():
                return  # the index the store was stopped with is current: nothing to build
            with self._lock:
                snapshot = set(self._fresh)
                self._stale, stale_since, self._stale_since = False, self._stale_since, None
            cursor.execute("BEGIN")
            cursor.execute("PRAGMA create_fts_index('entries', 'id', 'last_text', stopwords='none', overwrite=1)")
            cursor.execute(f"INSERT OR REPLACE INTO meta SELECT ?, ({TEXTS_HASH_SQL})::VARCHAR", [TEXTS_HASH_KEY])
            cursor.execute("COMMIT")
            postings = Postings.load(cursor)
            indexed = postings.entry_set()
            with self._lock:
                self._postings = postings
                for entry_id in snapshot:
                    self._drop_fresh(entry_id)
                self._gone = {i for i in self._gone if i in indexed}
                self.last_build_seconds = time.monotonic() - started
        except Exception as e:  # a duckdb.Error, or a build the loader cannot read
            try:
                cursor.execute("ROLLBACK")
            except duckdb.Error:
                pass
            with self._lock:
                self._stale, self._stale_since = True, stale_since or started
            if not self._closed:
                log.warning("semula: full-text index rebuild failed (%s); the scan keeps new entries findable", e)
                if self.on_error:
                    self.on_error(e)
        finally:
            with self._lock:
                self._building = False
                self._last_build = time.monotonic()
                again = self._stale
        if again and not self._closed:
            self.maybe_rebuild()  # schedules itself when due

    def _first_build_only(self) -> bool:
        """After a current stored index was loaded: whether nothing was written or deleted since."""
        with self._lock:
            if self._fresh or self._gone:
                return False
            self._stale, self._stale_since = False, None
            self.last_build_seconds = 0.0
            return True

    def _reader(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (a DuckDB connection is not shared between threads)."""
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._local.cursor = self.con.cursor()
            with self._lock:
                self._readers.append(cursor)
        return cursor

    def _ask_stems(self, words: list[str]) -> list[tuple[str, str]]:
        return self._reader().execute(STEM_SQL, [words]).fetchall()

    def propose(self, project: str, text: str, limit: int = PROPOSALS) -> list[int]:
        """Up to `limit` entry ids whose text looks like `text`: index hits plus fresh entries."""
        query = text[:MAX_QUERY_CHARS]
        words = lexical_words(query)
        if not words:
            return []
        found: list[int] = []
        with self._lock:  # one consistent view: a build swaps the postings and the fresh list together
            postings = self._postings
            gone = frozenset(self._gone)
            fresh = [f for f in self._fresh.values() if f.project == project]
        if postings is not None:
            try:
                terms = self._stemmer.stems(fts_tokens(query), self._ask_stems)
                found = postings.propose(project, terms, QUERY_TERMS, limit, gone)
            except duckdb.Error as e:  # the store is closing under us: the fresh list still works
                log.warning("semula: full-text query failed: %s", e)
        counts, size = Counter(words), len(words)
        scored = sorted(((dice_counts(counts, size, f.counts, f.size), f.entry_id) for f in fresh), reverse=True)
        found += [entry_id for score, entry_id in scored[:limit] if score > 0 and entry_id not in found]
        if not found and (postings is None or not any(w.isascii() for w in words)):
            # The first index is still loading, or the index cannot tokenise this text.
            found = self._scan(project, words, limit)
        return found[: limit * 2]

    def _scan(self, project: str, words: list[str], limit: int) -> list[int]:
        """Word overlap over the project's newest entries, when the index cannot answer."""
        rows = self._reader().execute(
            "SELECT id, substr(last_text, 1, ?) FROM entries WHERE project = ? ORDER BY id DESC LIMIT ?",
            [MAX_QUERY_CHARS, project, SCAN_LIMIT],
        ).fetchall()
        scored = sorted(((dice(words, lexical_words(t or "")), int(i)) for i, t in rows), reverse=True)
        return [entry_id for score, entry_id in scored[:limit] if score > 0]
