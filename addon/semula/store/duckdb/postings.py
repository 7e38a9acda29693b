"""DuckDB's full-text index, read into memory: BM25 over posting lists without a query per miss.

The fts extension builds the index (its tokenizer, stopwords, Porter stemmer and tables); after
each build `Postings.load` reads those tables once into numpy arrays (a CSR of term -> documents
and term frequencies). A query then touches only its rarest terms' postings: ~1 ms at 100k
entries where the SQL over `fts_main_entries.terms` scanned the whole table (~38 ms).

Scoring is the extension's BM25 (`match_bm25`, k=1.2, b=0.75), term by term as `fts.BM25_SQL`
computes it, so proposals stay what the SQL proposed. Query words go through the extension's own
tokenize macro (reproduced by `fts_tokens`, checked against it in the tests) and its `stem()`
(asked once per new word, then remembered).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from semula.store.types import one_row

# fts_main_<table>.tokenize: strip accents, lower, these characters -> space, split on whitespace
_SEPARATORS = re.compile(r"""[0-9!@#$%^&*()_+={}\[\]:;<>,.?~\\/|'"`-]+""")
_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")
STEM_CACHE_WORDS = 200_000  # word -> stem; ~100 bytes a word, so at most ~20 MB
K1, B = 1.2, 0.75
_UNKNOWN: Any = object()


def fts_tokens(text: str) -> list[str]:
    """The extension's tokenize macro in Python (`strip_accents`, `lower`, separators, whitespace)."""
    stripped = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return [t for t in _WHITESPACE.split(_SEPARATORS.sub(" ", stripped.lower())) if t]


class Stemmer:
    """The extension's `stem(word, 'porter')`, asked once per word and remembered (bounded)."""

    def __init__(self) -> None:
        self._stems: dict[str, str] = {}
        self._lock = threading.Lock()

    def stems(self, words: Iterable[str], ask: Callable[[list[str]], list[tuple[str, str]]]) -> list[str]:
        """Each word's stem, in order. A remembered stem is the one asked before, whatever else the query
        asks: the empty stem of "s" (from "What's") once came back as "s" when a word beside it was new,
        so the same query proposed other recordings the first time than after."""
        words = list(dict.fromkeys(words))
        known = self._stems
        stems = {w: s for w in words if (s := known.get(w, _UNKNOWN)) is not _UNKNOWN}
        unknown = [w for w in words if w not in stems]
        if unknown:
            found = dict(ask(unknown))
            stems.update(found)
            with self._lock:
                if len(known) + len(found) > STEM_CACHE_WORDS:
                    known.clear()
                known.update(found)
        return [stems.get(w, w) for w in words]

    def nbytes(self) -> int:
        return sum(len(w) + len(s) + 120 for w, s in list(self._stems.items()))


STEM_SQL = "SELECT w, stem(w, 'porter') FROM unnest(?::VARCHAR[]) AS t(w)"


@dataclass(frozen=True)
class Postings:
    """One build of the index, immutable: safe to read from any thread while the next one loads."""

    term_ids: dict[str, int]      # stemmed term -> termid
    df: np.ndarray                # termid -> document frequency
    offsets: np.ndarray           # termid -> first posting (CSR, len = terms + 1)
    docs: np.ndarray              # postings: docid, grouped by termid
    tfs: np.ndarray               # postings: term frequency
    entry_ids: np.ndarray         # docid -> entry id
    lengths: np.ndarray           # docid -> document length (float64)
    doc_projects: np.ndarray      # docid -> project code (-1: entry gone)
    projects: dict[str, int]
    num_docs: int
    avgdl: float

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection, schema: str = "fts_main_entries") -> Postings:
        """Read the index tables (raises duckdb.Error when there is no index)."""
        dict_rows = con.execute(f"SELECT termid, term, df FROM {schema}.dict ORDER BY termid").fetchnumpy()
        n_terms = int(dict_rows["termid"][-1]) + 1 if len(dict_rows["termid"]) else 0
        df = np.zeros(n_terms, dtype=np.float64)
        df[dict_rows["termid"]] = dict_rows["df"]
        term_ids = dict(zip(dict_rows["term"].tolist(), dict_rows["termid"].tolist()))
        del dict_rows
        post = con.execute(f"SELECT termid, docid, count(*) AS tf FROM {schema}.terms GROUP BY ALL "
                           "ORDER BY termid, docid").fetchnumpy()
        offsets = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(post["termid"], minlength=n_terms), out=offsets[1:])
        docs, tfs = post["docid"].astype(np.int32), post["tf"].astype(np.float32)
        del post
        doc_rows = con.execute(f"SELECT d.docid, d.name, d.len, e.project FROM {schema}.docs d "
                               "LEFT JOIN entries e ON e.id = d.name ORDER BY d.docid").fetchall()
        n_docs = int(doc_rows[-1][0]) + 1 if doc_rows else 0
        entry_ids = np.zeros(n_docs, dtype=np.int64)
        lengths = np.zeros(n_docs, dtype=np.float64)
        doc_projects = np.full(n_docs, -1, dtype=np.int32)
        projects: dict[str, int] = {}
        for docid, name, length, project in doc_rows:
            entry_ids[docid], lengths[docid] = name, length
            if project is not None:
                doc_projects[docid] = projects.setdefault(project, len(projects))
        num_docs, avgdl = one_row(con.execute(f"SELECT num_docs, avgdl FROM {schema}.stats").fetchone())
        return cls(term_ids, df, offsets, docs, tfs, entry_ids, lengths, doc_projects, projects,
                   int(num_docs or 0), float(avgdl or 1.0))

    def nbytes(self) -> int:
        arrays = (self.df, self.offsets, self.docs, self.tfs, self.entry_ids, self.lengths, self.doc_projects)
        return sum(a.nbytes for a in arrays) + sum(len(t) + 90 for t in self.term_ids)

    def entry_set(self) -> set[int]:
        return set(self.entry_ids.tolist())

    def propose(self, project: str, terms: list[str], max_terms: int, limit: int,
                gone: frozenset[int] | set[int] = frozenset()) -> list[int]:
        """Entry ids by BM25 over the `max_terms` rarest of `terms`: `fts.BM25_SQL`'s ranking."""
        code = self.projects.get(project)
        termids = {self.term_ids[t] for t in terms if t in self.term_ids}
        if code is None or not termids:
            return []
        rarest = sorted(termids, key=lambda t: (self.df[t], t))[:max_terms]
        doc_parts, score_parts = [], []
        for termid in rarest:
            postings = slice(self.offsets[termid], self.offsets[termid + 1])
            docs = self.docs[postings]
            in_project = self.doc_projects[docs] == code
            docs = docs[in_project]
            if not len(docs):
                continue
            df = self.df[termid]
            tf = self.tfs[postings][in_project].astype(np.float64)
            idf = np.log((self.num_docs - df + 0.5) / (df + 0.5) + 1)
            score_parts.append(idf * tf * (K1 + 1) / (tf + K1 * ((1 - B) + B * self.lengths[docs] / self.avgdl)))
            doc_parts.append(docs)
        if not doc_parts:
            return []
        docs = np.concatenate(doc_parts)
        unique, inverse = np.unique(docs, return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(score_parts))
        ids = self.entry_ids[unique]
        if gone:
            keep = ~np.isin(ids, np.fromiter(gone, dtype=np.int64, count=len(gone)))
            ids, scores = ids[keep], scores[keep]
        order = np.lexsort((-ids, -scores))[:limit]  # bm25 DESC, id DESC
        return ids[order].tolist()
