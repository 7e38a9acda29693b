"""`semula eval` on the DuckDB store and on Postgres, pair by pair: where do the decisions differ, and why?

Starts a throwaway PostgreSQL from the machine's binaries (tests/support/pg_helpers.py), runs the same
cascade over each corpus in the shared folder's corpus/ (../shared/corpus) against both stores, and writes
benchmark/results/eval-stores.md: the summary figures side by side and every pair whose outcome
differs, with the candidates each store's full-text search proposed.

    .venv/bin/python scripts/bench.py compare_eval_stores [corpus.jsonl …]
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from bench.common import RESULTS, git, shared_path
from semula.engine.evaluate import evaluate

import pg_helpers  # noqa: I001  (tests/support: on the path once bench.common is imported)


def run(path: Path, store: str | None) -> tuple[dict, list[dict]]:
    lines: list[dict] = []
    result = evaluate(path, {}, pairs_out=lines.append, store=store)
    return result, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", type=Path, nargs="*", help="pair files (default: every *-pairs.jsonl of the "
                                                             "shared corpus)")
    corpora = parser.parse_args(argv).corpora or sorted(shared_path("corpus").glob("*-pairs.jsonl"))
    server = pg_helpers.start_postgres()
    out = ["# `semula eval`: DuckDB store vs Postgres store", ""]
    out += [f"Machine: {platform.machine()}, {platform.system()} {platform.release()}, Python "
            f"{platform.python_version()}; commit {git('rev-parse', '--short', 'HEAD')}. "
            "Same cascade, same settings; only the store (and so the full-text proposer) differs.", ""]
    try:
        url = server.new_database()
        for corpus in corpora:
            duck, duck_lines = run(corpus, None)
            pg, pg_lines = run(corpus, url)
            out += [f"## {corpus.name} ({duck['pairs']} pairs)", "",
                    "| store | hit_rate | false_hit_rate | review_recall |", "|---|---|---|---|"]
            for name, r in (("duckdb", duck), ("postgres", pg)):
                fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
                out.append(f"| {name} | {fmt(r['hit_rate'])} | {fmt(r['false_hit_rate'])} | {fmt(r['review_recall'])} |")
            differ = [(d, p) for d, p in zip(duck_lines, pg_lines) if (d["outcome"], d["tier"]) != (p["outcome"], p["tier"])]
            decided = [(d, p) for d, p in differ if d["outcome"] != p["outcome"]]
            out += ["", f"Served/queued/missed decisions that differ: {len(decided)} of {len(duck_lines)}. "
                    f"Pairs whose best proposal differs (tier, score): {len(differ)}.", ""]
            if differ:
                out += ["| pair | category | duckdb | postgres |", "|---|---|---|---|"]
                for d, p in differ:
                    out.append(f"| {d['id']} | {d['category']} | {d['outcome']} {d['tier'] or ''} {d['score'] or ''} "
                               f"| {p['outcome']} {p['tier'] or ''} {p['score'] or ''} |")
            out.append("")
    finally:
        pg_helpers.discard(server)
    out += ["## Why proposals can differ", "",
            "- DuckDB's FTS query uses only the 6 rarest query terms (`store/duckdb/fts.py`); Postgres ORs the 8 longest lexemes and "
            "ranks by `ts_rank`, so a pair sharing only common words can be proposed by one and not the other.",
            "- The stopword lists differ (DuckDB's FTS `english` list vs Postgres's Snowball `english` list): "
            "a word one drops, the other may match on.",
            "- DuckDB's FTS index is rebuilt in the background while the eval records: entries written since the last "
            "build are proposed by a scan of the fresh entries instead, so which path answers depends on timing and "
            "DuckDB's rows above vary a little from run to run; Postgres's tsvector is current at commit, its rows do not.",
            "- Neither tokeniser splits CJK runs; both stores fall back to a word-overlap scan when the index finds "
            "nothing for a non-ASCII text.",
            "- A proposal is only a candidate: the core's word-overlap score and guard decide, so a differing "
            "proposal scored below the review floor leaves both stores with the same decision (a miss).", ""]
    target = RESULTS / "eval-stores.md"
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    print("\n".join(out))
    return 0
