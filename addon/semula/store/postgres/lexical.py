"""Near-match retrieval on the Postgres store: full text inside Postgres, vectors as bytes.

Lexical: `entries.last_tsv` is a generated tsvector over the scrubbed last text (english's
stems with no stopword list, like DuckDB's FTS) with a GIN index. It is
always current, so nothing is rebuilt: `written`/`deleted`/`maybe_rebuild` have nothing to do.
A query is the text's lexemes OR-ed together, ranked by `ts_rank`; these are proposals only,
which the core scores, guards and decides exactly as with DuckDB. The english parser does not
split CJK runs, so a text with no proposal and non-ASCII words falls back to a word-overlap
scan of the project's newest entries (as the DuckDB index does).

Vectors: float32 bytes in `entry_vector`, loaded and searched in-process (pgvector is not
packaged on the machines we test on).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from semula.core.nearmatch import lexical_words
from semula.core.text import dice
from semula.store.postgres.migrations import TEXT_SEARCH_CONFIG
from semula.store.rows import vector_matrix

PgStore = Any  # the store these read through (postgres.store imports this module: no import back)

PROPOSALS = 10
MAX_QUERY_CHARS = 4000
SCAN_LIMIT = 5000
# Only the longest lexemes go to the query (long words are the rare ones; Postgres keeps no per-word
# document frequency to pick the rarest as DuckDB's index does): common words match most rows, and
# every matching row is ranked (benchmark/results/pg-lexical.md). The core re-scores the proposals.
QUERY_LEXEMES = 8

# The text's own lexemes (stemmed, stopwords kept), each quoted and OR-ed: built from its tsvector,
# so a lexeme holding query syntax (a URL with `&`, a quote, a backslash) stays one literal lexeme.
PROPOSE_SQL = f"""
WITH q AS (SELECT string_agg(quote_lexeme, ' | ')::tsquery AS query
           FROM (SELECT '''' || replace(replace(lexeme, E'\\\\', E'\\\\\\\\'), '''', '''''') || '''' AS quote_lexeme
                 FROM unnest(to_tsvector('{TEXT_SEARCH_CONFIG}', %s))
                 ORDER BY length(lexeme) DESC, lexeme LIMIT %s) lexemes)
SELECT e.id FROM entries e, q
WHERE q.query IS NOT NULL AND e.project = %s AND e.last_tsv @@ q.query
ORDER BY ts_rank(e.last_tsv, q.query) DESC, e.id DESC LIMIT %s
"""


class PgLexical:
    """`LexicalProposer` over Postgres full-text search."""

    last_build_seconds: float | None = None

    def __init__(self, store: PgStore, query_lexemes: int = QUERY_LEXEMES) -> None:
        self.store = store
        self.query_lexemes = query_lexemes

    def written(self, entry_id: int, project: str, text: str) -> None:
        pass  # the generated column is current at commit

    def deleted(self, entry_id: int) -> None:
        pass

    def maybe_rebuild(self, wait: bool = False) -> None:
        pass

    def nbytes(self) -> int:
        return 0  # the index lives in the server

    def close(self) -> None:
        pass

    def propose(self, project: str, text: str, limit: int = PROPOSALS) -> list[int]:
        query = text[:MAX_QUERY_CHARS]
        words = lexical_words(query)
        if not words:
            return []
        found = [int(r[0]) for r in self.store._all(PROPOSE_SQL, [query, self.query_lexemes, project, limit])]
        if not found and not all(w.isascii() for w in words):
            found = self._scan(project, words, limit)
        return found

    def _scan(self, project: str, words: list[str], limit: int) -> list[int]:
        rows = self.store._all("SELECT id, last_text FROM entries WHERE project = %s ORDER BY id DESC LIMIT %s",
                               [project, SCAN_LIMIT])
        scored = sorted(((dice(words, lexical_words(t)), int(i)) for i, t in rows), reverse=True)
        return [entry_id for score, entry_id in scored[:limit] if score > 0]


class PgVectors:
    """`VectorStore` on Postgres: thread-safe (pooled), so `for_thread` is itself."""

    def __init__(self, store: PgStore) -> None:
        self.store = store

    def for_thread(self) -> PgVectors:
        return self

    def close(self) -> None:
        pass

    def ensure_table(self) -> None:
        pass  # made by the first migration

    def put(self, model: str, rows: Iterable[tuple[int, np.ndarray]]) -> int:
        now = datetime.now(UTC).replace(tzinfo=None)
        params = []
        for entry_id, vector in rows:
            v = np.ascontiguousarray(vector, dtype=np.float32).ravel()
            params.append((int(entry_id), model, int(v.shape[0]), v.tobytes(), now))
        if params:
            with self.store.connection() as con, con.cursor() as cur:
                cur.executemany(
                    "INSERT INTO entry_vector (entry_id, model, dim, vector, created_at) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (entry_id, model) DO UPDATE SET dim = EXCLUDED.dim, vector = EXCLUDED.vector, "
                    "created_at = EXCLUDED.created_at", params)
        return len(params)

    def load(self, model: str, project: str) -> tuple[np.ndarray, np.ndarray]:
        rows = self.store._all(
            "SELECT v.entry_id, v.dim, v.vector FROM entry_vector v JOIN entries e ON e.id = v.entry_id "
            "WHERE v.model = %s AND e.project = %s ORDER BY v.entry_id", [model, project])
        return vector_matrix([(int(i), int(d), bytes(b)) for i, d, b in rows])

    def entries_without(self, model: str, limit: int = 1000) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self.store._all(
            "SELECT e.id, e.project, e.canonical FROM entries e WHERE e.kind = 'http' AND NOT EXISTS "
            "(SELECT 1 FROM entry_vector v WHERE v.entry_id = e.id AND v.model = %s) ORDER BY e.id LIMIT %s",
            [model, int(limit)])
        return [(int(i), p, json.loads(c)) for i, p, c in rows]

    def count_without(self, model: str) -> int:
        row = self.store._one("SELECT count(*) FROM entries e WHERE e.kind = 'http' AND NOT EXISTS "
                              "(SELECT 1 FROM entry_vector v WHERE v.entry_id = e.id AND v.model = %s)", [model])
        return int(row[0]) if row else 0

    def counts(self) -> dict[str, int]:
        return {m: int(n) for m, n in self.store._all(
            "SELECT model, count(*) FROM entry_vector GROUP BY model ORDER BY model")}
