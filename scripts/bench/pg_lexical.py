"""Lexical proposals on Postgres: tsvector + GIN (shipped) vs pg_trgm, DuckDB's FTS beside them.

The shipped tsvector + GIN query against pg_trgm, with DuckDB's FTS index beside them, on the same
synthetic recordings and paraphrased queries, in one run.

    .venv/bin/python scripts/bench.py pg_lexical            # 10,000 recordings: benchmark/results/pg-lexical.md
    .venv/bin/python scripts/bench.py pg_lexical --quick    # 2,000, to /tmp/semula-bench/

Per query: milliseconds to propose 10 recordings, and whether the paraphrased recording is among
them (what matters: the core scores only what is proposed).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from bench import common
from bench.common import PROJECT, RESULTS, canonical_for, machine, pct

import pg_helpers  # noqa: I001  (tests/support: on the path once bench.common is imported)

TRGM_SQL = """SELECT id FROM entries WHERE project = %s AND last_text %% %s
ORDER BY similarity(last_text, %s) DESC, id DESC LIMIT 10"""


def measure(name: str, propose, queries: list[tuple[int, str]]) -> dict:
    ms, found = [], 0
    for source, text in queries:
        t0 = time.perf_counter()
        ids = propose(text)
        ms.append(common.ms_since(t0))
        found += source in ids
    return {"name": name, "p50": pct(ms, 50), "p90": pct(ms, 90), "p99": pct(ms, 99), "found": found / len(queries)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 recordings, 100 queries, to /tmp/semula-bench/")
    args = parser.parse_args(argv)
    size, n_queries = (2_000, 100) if args.quick else (10_000, 200)
    trgm_queries = 30  # pg_trgm costs seconds a query at this size: a sample is enough to rank it
    from semula.store.postgres.store import PgStore

    vocab, prompts, entries = common.workload(size)
    rng = random.Random(7)
    picks = rng.sample(range(size), n_queries)
    server = pg_helpers.start_postgres()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            duck, duck_ids, duck_seconds = common.seeded_store(tmp, entries)
            lexical = duck.lexical_index()
            lexical.maybe_rebuild(wait=True)
            pg = PgStore.open(server.new_database())
            t0 = time.perf_counter()
            pg_ids: list[int] = []
            for start in range(0, size, 2000):
                pg_ids += pg.upsert_entries(entries[start:start + 2000])
            pg_seconds = time.perf_counter() - t0
            with pg.connection() as con:
                con.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                t0 = time.perf_counter()
                con.execute("CREATE INDEX entries_trgm ON entries USING GIN (last_text gin_trgm_ops)")
                trgm_build = time.perf_counter() - t0
                con.execute("ANALYZE entries")
            texts = {i: canonical_for(vocab.paraphrase(prompts[i], rng), i).last_user_text() for i in picks}
            duck_by_fp = {e.request_fp: duck_ids[e.request_fp] for e in entries}
            duck_q = [(duck_by_fp[entries[i].request_fp], texts[i]) for i in picks]
            pg_q = [(pg_ids[i], texts[i]) for i in picks]
            from semula.store.postgres.lexical import QUERY_LEXEMES, PgLexical

            pg_lexical, pg_all_lexemes = pg.lexical_index(), PgLexical(pg, query_lexemes=10_000)

            def trgm(text: str) -> list[int]:
                with pg.connection() as con:
                    con.execute("SET pg_trgm.similarity_threshold = 0.2")
                    return [int(r[0]) for r in con.execute(TRGM_SQL, [PROJECT, text, text]).fetchall()]

            rows.append(measure("DuckDB FTS (BM25, rarest 6 terms)", lambda t: lexical.propose(PROJECT, t), duck_q))
            rows.append(measure("Postgres tsvector + GIN, every lexeme", lambda t: pg_all_lexemes.propose(PROJECT, t),
                                pg_q))
            rows.append(measure(f"Postgres tsvector + GIN, {QUERY_LEXEMES} longest lexemes (shipped)",
                                lambda t: pg_lexical.propose(PROJECT, t), pg_q))
            rows.append(measure(f"Postgres pg_trgm + GIN (similarity >= 0.2; first {trgm_queries} queries)", trgm,
                                pg_q[:trgm_queries]))
            lexical.close()
            duck.close()
            pg.close()
    finally:
        pg_helpers.discard(server)
    lines = ["# Lexical proposals on Postgres: tsvector vs pg_trgm (DuckDB FTS beside them)", "",
             f"`scripts/bench.py pg_lexical{' --quick' if args.quick else ''}`: {size:,} synthetic recordings, "
             f"{n_queries} paraphrased queries, one run; proposals only (the core scores them).", "",
             "| machine | |", "|---|---|", *[f"| {k} | {v} |" for k, v in machine().items()], "",
             f"Loading: DuckDB {duck_seconds:.1f} s; Postgres {pg_seconds:.1f} s (one transaction per 2,000, "
             f"triggers and tsvector included); pg_trgm index build {trgm_build:.1f} s.", "",
             "| proposer | p50 ms | p90 ms | p99 ms | paraphrased source among the 10 |", "|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['p50']:.1f} | {r['p90']:.1f} | {r['p99']:.1f} | {r['found']:.0%} |" for r in rows]
    lines += ["", "The machine is shared (2 cores, other jobs running): compare the rows, not the absolutes."]
    out = (Path(tempfile.gettempdir()) / "semula-bench" if args.quick else RESULTS) / "pg-lexical.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0
