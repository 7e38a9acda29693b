"""Lexical retrieval: DuckDB's full-text-search index proposes up to 10 recordings.

Retrieval only: BM25 depends on corpus size and cannot carry a threshold, so the proposals
are scored by `nearmatch` (word-overlap Dice) and only that score meets thresholds.

DuckDB's FTS index is a snapshot: it does not see rows written after it was built. So the
index is rebuilt on a background thread (its own cursor, in a transaction: readers keep the
old snapshot until the new one commits) when stale, and until then entries written since
the last build are found by a direct scan of an in-memory list. No request waits for a
rebuild. Ranking uses the index's own tokenizer, stemmer and term tables with the BM25
formula of the extension's `match_bm25`, computed set-wise (one join instead of one
scalar sub-query per row, which cost ~100 ms at 100k entries) over the rarest query terms.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from semula.core.nearmatch import lexical_words
from semula.core.text import dice

log = logging.getLogger("semula")

PROPOSALS = 10
MAX_QUERY_CHARS = 4000  # a 1 MB prompt must not become a 1 MB query
REBUILD_MIN_SECONDS = 1.0
# A build re-indexes the whole table (~9 s at 100k entries): leave the machine at least twice
# that long between builds; the fresh-entry scan keeps new recordings findable meanwhile.
REBUILD_IDLE_FACTOR = 2.0
SCAN_LIMIT = 5000
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


@dataclass(frozen=True)
class Fresh:
    entry_id: int
    project: str
    words: tuple[str, ...]


class LexicalIndex:
    """Owns the FTS index of `entries.last_text`. `propose` runs on the store thread."""

    def __init__(self, con: duckdb.DuckDBPyConnection, on_error: Callable[[Exception], None] | None = None,
                 read_only: bool = False):
        self.con = con
        self._cursor = con.cursor()  # the rebuild thread's own connection handle
        self._lock = threading.Lock()
        self._fresh: dict[int, Fresh] = {}
        self._built = False
        self._building = False
        self._stale = True
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
            self._use_stored_index()

    def _use_stored_index(self) -> None:
        """A read-only store cannot rebuild: query the index it was stopped with, scan what it lacks."""
        self._stale = False
        try:
            rows = self.con.execute(
                "SELECT id, project, last_text FROM entries WHERE id NOT IN (SELECT name FROM fts_main_entries.docs)"
            ).fetchall()
            self._built = True
        except duckdb.Error:  # never indexed: every entry is scanned
            rows = self.con.execute("SELECT id, project, last_text FROM entries").fetchall()
        for entry_id, project, text in rows:
            self._fresh[int(entry_id)] = Fresh(int(entry_id), project, tuple(lexical_words(text or "")))

    def close(self) -> None:
        """Stop rebuilding (the store is about to close): no build runs once this returns."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        with self._build_lock:  # waits for a build in progress
            pass

    def written(self, entry_id: int, project: str, text: str) -> None:
        """A recording was (re)written: findable at once by scan, by the index after a rebuild."""
        with self._lock:
            self._fresh[entry_id] = Fresh(entry_id, project, tuple(lexical_words(text)))
            self._stale = True
        self.maybe_rebuild()

    def deleted(self, entry_id: int) -> None:
        with self._lock:
            self._fresh.pop(entry_id, None)
            self._stale = True

    def maybe_rebuild(self, wait: bool = False) -> None:
        with self._lock:
            if self._closed or self.read_only:
                return
            interval = max(REBUILD_MIN_SECONDS, REBUILD_IDLE_FACTOR * (self.last_build_seconds or 0.0))
            wait_left = interval - (time.monotonic() - self._last_build)
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
        with self._lock:
            snapshot = set(self._fresh)
            self._stale = False
        cursor = self._cursor
        try:
            cursor.execute("BEGIN")
            cursor.execute("PRAGMA create_fts_index('entries', 'id', 'last_text', overwrite=1)")
            cursor.execute("COMMIT")
            with self._lock:
                for entry_id in snapshot:
                    self._fresh.pop(entry_id, None)
                self._built = True
                self.last_build_seconds = time.monotonic() - started
        except duckdb.Error as e:
            try:
                cursor.execute("ROLLBACK")
            except duckdb.Error:
                pass
            with self._lock:
                self._stale = True
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

    def propose(self, project: str, text: str, limit: int = PROPOSALS) -> list[int]:
        """Up to `limit` entry ids whose text looks like `text`: index hits plus fresh entries."""
        query = text[:MAX_QUERY_CHARS]
        words = lexical_words(query)
        if not words:
            return []
        found: list[int] = []
        if self._built:
            try:
                found = [int(r[0]) for r in self.con.execute(BM25_SQL, [query, QUERY_TERMS, project, limit]).fetchall()]
            except duckdb.Error as e:  # e.g. the index was dropped under us: the scans still work
                log.warning("semula: full-text query failed: %s", e)
        with self._lock:
            fresh = [f for f in self._fresh.values() if f.project == project]
        scored = sorted(((dice(words, list(f.words)), f.entry_id) for f in fresh), reverse=True)
        found += [entry_id for score, entry_id in scored[:limit] if score > 0 and entry_id not in found]
        if not found and (not self._built or not any(w.isascii() for w in words)):
            # The first build after start is still running, or the index cannot tokenise this text.
            found = self._scan(project, words, limit)
        return found[: limit * 2]

    def _scan(self, project: str, words: list[str], limit: int) -> list[int]:
        """Word overlap over the project's recent entries, when the index cannot answer."""
        rows = self.con.execute(
            "SELECT id, last_text FROM entries WHERE project = ? ORDER BY id DESC LIMIT ?", [project, SCAN_LIMIT]
        ).fetchall()
        scored = sorted(((dice(words, lexical_words(t)), int(i)) for i, t in rows), reverse=True)
        return [entry_id for score, entry_id in scored[:limit] if score > 0]
