"""The lexical near-match tier: miss-path cost, FTS build, write -> findable, sweep + `semula eval`.

In full: the miss-path cost and where it goes, FTS build time, write -> findable, exact hits, and the
serve-threshold sweep + `semula eval` on the request-pair corpora.

    .venv/bin/python scripts/bench.py lexical            # full run: writes benchmark/results/lexical.md (+ .json)
    .venv/bin/python scripts/bench.py lexical --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

The results file is rendered by scripts/bench/render.py.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.common import PROJECT, canonical_for, log, miss_decision, pct, summary

STEPS = ("propose", "canonicals_by_ids", "paired_entries", "near_match", "add_candidates")
POSTINGS_SQL = """WITH q AS (SELECT DISTINCT stem(unnest(fts_main_entries.tokenize(?)), 'porter') AS term)
SELECT coalesce(sum(df), 0), count(*) FROM fts_main_entries.dict d JOIN q USING (term)"""


def timers_for(cache: Any) -> common.Timers:
    """Timers on the public steps of `engine.near` (NearSearcher.search); its tiers judge in `engine.tiers.base`."""
    import semula.engine.tiers.base as near

    t = common.Timers().wrap(cache.lexical, "propose")
    for name in ("canonicals_by_ids", "paired_entries", "add_candidates"):
        t.wrap(cache.store, name)
    return t.wrap(near, "near_match")


def rebuilding() -> bool:
    return any("rebuild" in t.name for t in threading.enumerate())


def retrieval(cache: Any, queries: list[tuple[int, str]]) -> dict[str, Any]:
    """Retrieval alone on paraphrase texts: the in-memory postings (shipped) against `fts.BM25_SQL`."""
    from semula.store.duckdb.fts import BM25_SQL, MAX_QUERY_CHARS, PROPOSALS, QUERY_TERMS

    con = cache.store.con
    postings = [con.execute(POSTINGS_SQL, [t[:MAX_QUERY_CHARS]]).fetchone() for _, t in queries]
    rows, same = [], 0
    for how in ("memory", "sql"):
        ms, found = [], 0
        for source, text in queries:
            t0 = time.perf_counter()
            if how == "memory":
                ids = cache.lexical.propose(PROJECT, text)
            else:
                ids = [int(r[0]) for r in con.execute(BM25_SQL, [text[:MAX_QUERY_CHARS], QUERY_TERMS, PROJECT,
                                                                 PROPOSALS]).fetchall()]
                same += ids == cache.lexical.propose(PROJECT, text)
            ms.append(common.ms_since(t0))
            found += source in ids
        rows.append({"terms": f"{how}, rarest {QUERY_TERMS}", "shipped": how == "memory", "p50": pct(ms, 50),
                     "p90": pct(ms, 90), "source_at_10": found / len(queries)})
    rows.append({"terms": "memory = SQL proposals", "shipped": False, "p50": None, "p90": None,
                 "source_at_10": same / len(queries)})
    return {"rows": rows, "postings": statistics.median(p[0] for p in postings),
            "query_terms": statistics.median(p[1] for p in postings)}


def fresh_trials(cache: Any, vocab: Any, rng: random.Random, size: int, trials: int,
                 fps: list[tuple[str, str]]) -> dict[str, Any]:
    """Write a new entry, then query paraphrases of it at once; time misses and hits during the rebuild."""
    from semula.store.duckdb.fts import REBUILD_IDLE_FACTOR, REBUILD_MIN_SECONDS

    timers, out, busy_near, busy_exact = timers_for(cache), [], [], []
    try:
        for trial in range(trials):
            common.settle_index(cache)
            time.sleep(max(REBUILD_MIN_SECONDS, REBUILD_IDLE_FACTOR * (cache.lexical.last_build_seconds or 0)) + 0.1)
            k = 50_000_000 + size + trial
            prompt = vocab.prompt(random.Random(k))
            t0 = time.perf_counter()
            entry_id = cache.record(common.new_entry(canonical_for(prompt, k), k))
            written, polls = time.perf_counter(), 0
            record_ms = (written - t0) * 1000
            while polls < 200:
                polls += 1
                outcome = miss_decision(cache, canonical_for(vocab.paraphrase(prompt, rng), k))[1]
                if entry_id in timers.last["propose"]:
                    break
            found_ms, running = common.ms_since(written), rebuilding()
            while rebuilding():
                busy_near.append(miss_decision(cache, canonical_for(vocab.prompt(rng), rng.randrange(10**9)))[0])
                for rfp, nfp in rng.sample(fps, 20):
                    t1 = time.perf_counter()
                    cache.match(PROJECT, rfp, nfp)
                    busy_exact.append(common.ms_since(t1) * 1000)
            common.join_rebuilds()
            indexed_s = time.perf_counter() - written
            miss_decision(cache, canonical_for(vocab.paraphrase(prompt, rng), k))
            out.append({"record_ms": record_ms, "polls": polls, "found_ms": found_ms, "first_outcome": outcome,
                        "rebuild_running": running, "indexed_after_s": indexed_s,
                        "proposed_after_rebuild": entry_id in timers.last["propose"]})
            log(f"  {size}: fresh trial {trial + 1}: found after {polls} poll(s), index current after {indexed_s:.1f} s")
    finally:
        timers.undo()
    return {"trials": out, "busy_near_ms": summary(busy_near), "busy_exact_us": summary(busy_exact)}


def run_size(size: int, prompts: list[str], entries: list[Any], vocab: Any, n_queries: int,
             trials: int) -> dict[str, Any]:
    from semula.engine.engine import Engine as Cache

    r: dict[str, Any] = {"size": size, "load_before": common.loadavg()}
    rng = random.Random(1000 + size)
    with tempfile.TemporaryDirectory(prefix=f"semula-bench-lex-{size}-") as tmp:
        store, id_of, r["seed_s"] = common.seeded_store(tmp, entries[:size])
        t0 = time.perf_counter()
        cache = Cache.open(store)  # starts the first FTS build on a background thread
        r["cache_open_s"] = time.perf_counter() - t0
        try:
            common.settle_index(cache)
            r["build_s"] = cache.lexical.last_build_seconds
            r["fts_terms"], r["fts_dict"] = (store.con.execute(f"SELECT count(*) FROM fts_main_entries.{t}").fetchone()[0]
                                             for t in ("terms", "dict"))
            n_para = round(n_queries * 2 / 3)
            para = [(i, canonical_for(vocab.paraphrase(prompts[i], rng), i)) for i in rng.sample(range(size), n_para + 10)]
            unrelated = [(None, canonical_for(vocab.prompt(random.Random(10_000_000 + size * 1000 + k)), k))
                         for k in range(n_queries - n_para + 5)]
            for _, q in para[:10] + unrelated[:5]:  # warm-up
                miss_decision(cache, q)
            order = [("paraphrase", x) for x in para[10:]] + [("unrelated", x) for x in unrelated[5:]]
            random.Random(size).shuffle(order)
            timers = timers_for(cache)
            ms: dict[str, list[float]] = {"paraphrase": [], "unrelated": []}
            steps: dict[str, dict[str, float]] = {"paraphrase": {}, "unrelated": {}}
            outcomes: dict[str, dict[str, int]] = {"paraphrase": {}, "unrelated": {}}
            proposed = 0
            for kind, (source, q) in order:
                took, outcome, _ = miss_decision(cache, q)
                ms[kind].append(took)
                outcomes[kind][outcome] = outcomes[kind].get(outcome, 0) + 1
                for step, v in timers.take().items():
                    steps[kind][step] = steps[kind].get(step, 0.0) + v
                proposed += source is not None and id_of[entries[source].request_fp] in timers.last["propose"]
            timers.undo()
            r["miss_ms"] = {k: {**summary(v), "mean": statistics.fmean(v)} for k, v in ms.items()}
            r["miss_ms"]["all"] = summary(ms["paraphrase"] + ms["unrelated"])
            r["steps_mean_ms"] = {k: {s: v.get(s, 0.0) / len(ms[k]) for s in STEPS} for k, v in steps.items()}
            r["outcomes"], r["source_proposed"] = outcomes, proposed / len(ms["paraphrase"])
            r["retrieval"] = retrieval(cache, [(id_of[entries[i].request_fp], q.last_user_text()) for i, q in para[10:40]])
            log(f"  {size}: miss p50 {r['miss_ms']['all']['p50']:.1f} ms; source proposed {r['source_proposed']:.3f}")
            fps = [(entries[i].request_fp, entries[i].normalised_fp) for i in rng.sample(range(size), min(size, 5000))]
            exact = []
            for rfp, nfp in fps:
                t0 = time.perf_counter()
                hit = cache.match(PROJECT, rfp, nfp)
                exact.append(common.ms_since(t0) * 1000)
                assert hit is not None and hit.tier == "exact"
            r["exact_us"] = summary(exact)
            if trials:
                r["fresh"] = fresh_trials(cache, vocab, rng, size, trials, fps)
            r["load_after"] = common.loadavg()
        finally:
            cache.close()
    return r


def corpus_figures(quick: bool) -> dict[str, Any]:
    """The sweep (guard on/off) and `semula eval` at two serve thresholds."""
    from bench import sweep
    from semula.engine.evaluate import evaluate

    paths = [common.corpus_file("dev-pairs.jsonl")] + ([] if quick else [common.corpus_file("public-paraphrase-pairs.jsonl")])
    t0 = time.perf_counter()
    rows = sweep.sweep(sweep.labelled(paths[0]), sweep.labelled(paths[1]) if len(paths) > 1 else ())
    evals = []
    for path in paths:
        for label, overrides in (("defaults", None), ("lexical_serve_threshold=0.9", {"lexical_serve_threshold": 0.9})):
            s = evaluate(path, overrides)
            evals.append({"corpus": path.name, "settings": label, **{k: s.get(k) for k in (
                "pairs", "hit_rate", "false_hit_rate", "review_recall", "different_queued", "by_id_parity",
                "by_category")}})
            log(f"eval {path.name} {label}: hit {s['hit_rate']}, false hit {s['false_hit_rate']}")
    return {"sweep": [r.__dict__ for r in rows], "evals": evals, "seconds": time.perf_counter() - t0,
            "public": not quick}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--fresh-trials", type=int, default=3)
    parser.add_argument("--clients", type=int, default=64, help="misses at once through a real proxy (0: skip)")
    parser.add_argument("--rounds", type=int, default=3, help="bursts of --clients misses")
    parser.add_argument("--quick", action="store_true", help="sizes ≤ 10k, ≤ 90 queries, 2 trials, dev pairs only")
    parser.add_argument("--no-corpus", action="store_true", help="skip the sweep and the eval summaries")
    parser.add_argument("--out", type=Path, default=None, help="results markdown (default benchmark/results/lexical.md)")
    parser.add_argument("--json", type=Path, default=None, help="figures (default: --out with .json)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    queries, trials = args.queries, args.fresh_trials
    if args.quick:
        sizes = [s for s in sizes if s <= 10_000] or [1000, 10_000]
        queries, trials = min(queries, 90), min(trials, 2)
    from semula.store.duckdb import fts

    info = common.machine(**{"fts.QUERY_TERMS": str(fts.QUERY_TERMS)})
    t0 = time.perf_counter()
    vocab, prompts, entries = common.workload(max(sizes))
    lengths = [len(p.split()) for p in prompts]
    workload = {"generate_s": time.perf_counter() - t0, "words_min": min(lengths), "words_max": max(lengths),
                "words_median": statistics.median(lengths),
                "distinct_words": len({w.lower().strip(".,;:?!") for p in prompts[:20000] for w in p.split()})}
    log(f"generated {len(entries)} requests in {workload['generate_s']:.1f} s")
    from bench import concurrent

    results = {}
    for s in sizes:
        r = run_size(s, prompts, entries, vocab, queries, trials if s >= 10_000 else 0)
        if args.clients:
            r["proxy"] = concurrent.run(s, prompts, entries, vocab, args.clients, args.rounds)
        # the figures a script checks first (issue 11): the miss decision, and the concurrent one from the call log
        results[str(s)] = {"near_p50_ms": r["miss_ms"]["all"]["p50"], "near_p99_ms": r["miss_ms"]["all"]["p99"],
                           "concurrent64_decision_p99_ms": r["proxy"]["decision_ms"]["p99"] if args.clients else None,
                           **r}
    corpus = None if args.no_corpus else corpus_figures(args.quick)
    common.finish("lexical", {"command": common.command("lexical", argv), "machine": info,
                              "params": {"sizes": sizes, "queries": queries, "quick": args.quick},
                              "workload": workload, "sizes": results, "corpus": corpus}, args.out, args.json, args.quick)
    return 0
