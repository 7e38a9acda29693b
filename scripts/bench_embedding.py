#!/usr/bin/env python3
"""Benchmark the opt-in embedding tier: miss-path cost with the tier on vs off, hits and writes on vs
off, and the embedding_serve_threshold sweep on the request-pair corpora.

    .venv/bin/python scripts/bench_embedding.py [--sizes 1000,10000] [--queries 200]
                                                 [--out benchmark/results/embedding.md] [--quick]

1. Per store size (one project; the synthetic, varied chat requests of scripts/bench_lexical.py),
   vectors for every entry are embedded in batches and stored with `VectorTable.put` before any timing.
   Then ~`--queries` misses (half paraphrase-like: a stored prompt with 1-3 words changed; half
   unrelated prompts) go through the whole miss decision (`cache.match` + fuzzy bypass +
   `cache.near`), once with the tier on and once off (the same Cache with `cache.embeddings`
   detached, so the lexical tier and the store are identical), alternating which goes first.
   Inside the "on" decision the pieces are timed by wrapping them: `embedder.embed` (encode),
   `VectorIndex.search`, and the embedding-candidate step (`ReviewQueue._embedding_candidates`:
   encode + index search + canonicals_by_ids + near_match).
   Also: the cold index load (what the next miss pays after any vector write invalidates the
   project), a miss right after a write, a miss while the worker embeds a burst, exact hits
   (`cache.match`) and writes (`cache.record`) on vs off, and whether a hit ever calls the model.
2. The sweep: for every pair of dev-pairs.jsonl and public-paraphrase-pairs.jsonl, the cosine of the
   two embedding texts (batch-embedded once), the exact/normalised/lexical outcome of the default
   pipeline (`nearmatch.pipeline_outcome`), and per threshold `near_match(tier="embedding",
   score=cosine)`; guard off = also count a verdict whose only reason is the guard.
   Optionally (`--cross-check`, on in full runs) `semula eval` with SEMULA_EMBEDDINGS=on at the best
   threshold checks the in-memory sweep against the real pipeline on the dev pairs.

A script, not a test: it never asserts targets. `--quick` = 1k only, fewer queries, dev pairs only.
The model is the shared all-MiniLM-L6-v2 (ONNX), not the production default bge-small-en-v1.5:
thresholds are for that model.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "addon"))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_lexical as lex  # noqa: E402  (the sibling benchmark: workload, seeding, helpers)

from semula.core.bypass import fuzzy_bypass  # noqa: E402
from semula.engine.cache import Cache  # noqa: E402
from semula.core.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint  # noqa: E402
from semula.embeddings.model import Embedder, EmbeddingConfig, embedding_text  # noqa: E402
from semula.engine.evaluate import canonical_of, evaluate, load_pairs  # noqa: E402
from semula.core.nearmatch import near_match, pipeline_outcome  # noqa: E402
from semula.core.settings import ProjectSettings  # noqa: E402
from semula.store.duckdb_store import Store  # noqa: E402

PROJECT = lex.PROJECT
CORPUS = lex.CORPUS
SETTINGS = ProjectSettings()
MODEL_DIR = Path("/work/shared/models/all-MiniLM-L6-v2-onnx")
if not MODEL_DIR.is_dir():
    MODEL_DIR = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
THRESHOLDS = tuple(round(0.70 + 0.02 * i, 2) for i in range(15))  # 0.70 .. 0.98
pct, table, fmt = lex.pct, lex.table, lex.fmt


def load_embedder() -> tuple[Embedder, float]:
    t = time.perf_counter()
    embedder = Embedder.load(EmbeddingConfig(enabled=True, model_name=MODEL_NAME, model_path=str(MODEL_DIR),
                                             offline=True, cache_dir=MODEL_DIR))
    return embedder, time.perf_counter() - t


def embed_all(embedder: Embedder, texts: list[str], batch: int = 64) -> np.ndarray:
    out = [embedder.embed(texts[i:i + batch]) for i in range(0, len(texts), batch)]
    return np.vstack(out) if out else np.zeros((0, 384), dtype=np.float32)


class Timers:
    """Wraps bound methods of live objects with accumulating timers (instance attributes only)."""

    def __init__(self) -> None:
        self.acc: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._undo: list[Callable[[], None]] = []

    def wrap(self, obj: Any, attr: str, name: str) -> None:
        original = getattr(obj, attr)

        def timed(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                self.acc[name] += (time.perf_counter() - t) * 1000
                self.calls[name] += 1

        setattr(obj, attr, timed)
        self._undo.append(lambda: obj.__dict__.pop(attr, None))

    def take(self) -> dict[str, float]:
        out = dict(self.acc)
        self.acc.clear()
        return out

    def undo(self) -> None:
        for u in reversed(self._undo):
            u()
        self._undo.clear()


def decide(cache: Cache, canonical: CanonicalRequest) -> tuple[float, str]:
    """The whole miss decision as the addon takes it: (ms, outcome)."""
    fps = SETTINGS.fingerprint_inputs
    request_fp = request_fingerprint(canonical)
    normalised_fp = normalised_fingerprint(canonical, *fps)
    t0 = time.perf_counter()
    match = cache.match(PROJECT, request_fp, normalised_fp)
    if match is not None:
        return (time.perf_counter() - t0) * 1000, f"served ({match.tier})"
    bypass = fuzzy_bypass(canonical, SETTINGS)
    near = cache.near(PROJECT, canonical, request_fp, normalised_fp, SETTINGS, bypass.reason if bypass else None)
    ms = (time.perf_counter() - t0) * 1000
    if near.served is not None:
        return ms, f"served ({near.served.tier})"
    if near.queued:
        return ms, "review (" + "+".join(sorted({c.verdict.tier for c in near.queued})) + ")"
    return ms, "miss"


def settle_lexical(cache: Cache) -> None:
    """Bring the FTS index up to date. (A write within REBUILD_MIN_SECONDS of the last rebuild schedules
    no later rebuild, so the index stays stale until the next write; force one here.)"""
    lex.wait_for_index(cache) if cache.lexical._building else cache.lexical.maybe_rebuild(wait=True)
    lex.wait_for_index(cache)


def p(xs: list[float], q: float) -> float:
    return pct(xs, q) if xs else float("nan")


def run_size(size: int, prompts: list[str], entries: list[Any], vectors: np.ndarray, embedder: Embedder,
             vocab: Any, n_queries: int, log: Callable[[str], None], r_real: int) -> dict[str, Any]:
    r: dict[str, Any] = {"size": size, "load_before": os.getloadavg()[0], "real_vectors": min(size, r_real)}
    rng = random.Random(2000 + size)
    with tempfile.TemporaryDirectory(prefix=f"semula-bench-emb-{size}-") as tmp:
        store = Store.open(tmp)
        cache = None
        try:
            t = time.perf_counter()
            lex.bulk_insert(store, entries[:size])
            id_of = dict(store.con.execute("SELECT request_fp, id FROM entries").fetchall())
            cache = Cache(store, embedder=embedder)
            tier = cache.embeddings
            lex.wait_for_index(cache)
            store.vectors.put(embedder.name, [(id_of[e.request_fp], vectors[i]) for i, e in enumerate(entries[:size])])
            r["seed_s"] = time.perf_counter() - t
            tier.index.invalidate(PROJECT)
            t = time.perf_counter()
            r["index_rows"] = tier.index.size(PROJECT)
            r["cold_load_ms"] = (time.perf_counter() - t) * 1000
            loads = []
            for _ in range(5):
                tier.index.invalidate(PROJECT)
                t = time.perf_counter()
                tier.index.size(PROJECT)
                loads.append((time.perf_counter() - t) * 1000)
            r["cold_load_ms_p50"] = statistics.median(loads)
            log(f"  {size}: seeded + vectors stored in {r['seed_s']:.1f}s; index {r['index_rows']} rows, "
                f"cold load {r['cold_load_ms_p50']:.1f} ms")

            # Queries: paraphrase-like and unrelated, each a fresh miss.
            n_para = n_queries // 2
            sources = rng.sample(range(min(size, r_real)), n_para)
            queries = [("paraphrase", lex.canonical_for(lex.paraphrase(prompts[i], vocab, rng)[0], i)) for i in sources]
            queries += [("unrelated", lex.canonical_for(lex.make_prompt(vocab, random.Random(20_000_000 + size * 1000 + k)), k))
                        for k in range(n_queries - n_para)]
            rng.shuffle(queries)

            timers = Timers()
            timers.wrap(embedder, "embed", "encode")
            timers.wrap(tier.index, "search", "index_search")
            timers.wrap(cache.review, "_embedding_candidates", "emb_candidates")
            timers.wrap(tier, "search", "tier_search")
            # warm up both paths (tokenizer, lru caches, duckdb statements)
            for kind, q in queries[:3]:
                decide(cache, lex.canonical_for(lex.make_prompt(vocab, random.Random(99 + size)), 1))
            timers.take()
            rows: list[dict[str, Any]] = []
            for n, (kind, q) in enumerate(queries):
                row: dict[str, Any] = {"kind": kind}
                for mode in (("on", "off") if n % 2 == 0 else ("off", "on")):
                    cache.embeddings = tier if mode == "on" else None
                    ms, outcome = decide(cache, q)
                    parts = timers.take()
                    row[mode] = ms
                    row[mode + "_outcome"] = outcome
                    if mode == "on":
                        row.update({k: parts.get(k, 0.0) for k in ("encode", "index_search", "emb_candidates", "tier_search")})
                rows.append(row)
            cache.embeddings = tier
            r["rows"] = rows
            r["outcomes_on"] = Counter(x["on_outcome"] for x in rows)
            r["outcomes_off"] = Counter(x["off_outcome"] for x in rows)
            log(f"  {size}: misses on p50 {p([x['on'] for x in rows], 50):.1f} ms (encode "
                f"{p([x['encode'] for x in rows], 50):.1f}), off p50 {p([x['off'] for x in rows], 50):.1f} ms")

            # Encode pieces: tokenizer truncation vs the ONNX model, on the query texts.
            texts = [embedding_text(q, SETTINGS.scrub_patterns) for _, q in queries[:60]]
            trunc, model = [], []
            for text in texts:
                t = time.perf_counter()
                cut = embedder.truncate(text)
                t1 = time.perf_counter()
                list(embedder._model.embed([cut], batch_size=1))
                t2 = time.perf_counter()
                trunc.append((t1 - t) * 1000)
                model.append((t2 - t1) * 1000)
            r["truncate_ms"], r["onnx_ms"] = trunc, model

            # Exact hits: cache.match on stored fingerprints, on vs off, and the model must not be called.
            sample = rng.sample(range(size), min(size, 500))
            keys = [(entries[i].request_fp, entries[i].normalised_fp) for i in sample]
            hits: dict[str, list[float]] = {"on": [], "off": []}
            timers.take()
            calls_before = timers.calls["encode"]
            for rep in range(4):
                for mode in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                    cache.embeddings = tier if mode == "on" else None
                    for rfp, nfp in keys:
                        t = time.perf_counter()
                        m = cache.match(PROJECT, rfp, nfp)
                        hits[mode].append((time.perf_counter() - t) * 1_000_000)
                        assert m is not None and m.tier == "exact"
            cache.embeddings = tier
            r["hit_us"] = hits
            r["hit_encode_calls"] = timers.calls["encode"] - calls_before

            # Writes: cache.record of new requests, on vs off alternating (the worker embeds "on" writes
            # in the background meanwhile, as in the proxy).
            writes: dict[str, list[float]] = {"on": [], "off": []}
            n_writes = 60
            for k in range(n_writes):
                for mode in (("on", "off") if k % 2 == 0 else ("off", "on")):
                    cache.embeddings = tier if mode == "on" else None
                    idx = 30_000_000 + size * 10 + k * 2 + (mode == "on")
                    new = lex.new_entry(lex.canonical_for(lex.make_prompt(vocab, random.Random(idx)), idx), idx)
                    t = time.perf_counter()
                    cache.record(new)
                    writes[mode].append((time.perf_counter() - t) * 1000)
            cache.embeddings = tier
            t = time.perf_counter()
            tier.worker.drain(120)
            r["worker_drain_after_writes_s"] = time.perf_counter() - t
            r["write_ms"] = writes
            settle_lexical(cache)

            # A miss right after a write: the worker's vector write invalidated the project, so the
            # next search reloads every vector from DuckDB.
            after_write, after_write_parts = [], []
            for k in range(8):
                idx = 40_000_000 + size * 10 + k
                new = lex.new_entry(lex.canonical_for(lex.make_prompt(vocab, random.Random(idx)), idx), idx)
                cache.record(new)
                tier.worker.drain(30)
                settle_lexical(cache)
                q = lex.canonical_for(lex.make_prompt(vocab, random.Random(idx + 500_000)), k)
                timers.take()
                ms, _ = decide(cache, q)
                parts = timers.take()
                after_write.append(ms)
                after_write_parts.append(parts)
            r["after_write_ms"] = after_write
            r["after_write_index_ms"] = [x.get("index_search", 0.0) for x in after_write_parts]
            r["after_write_encode_ms"] = [x.get("encode", 0.0) for x in after_write_parts]

            # A miss while the worker embeds a burst of 64 writes (one Embedder, one lock).
            for k in range(64):
                idx = 50_000_000 + size * 100 + k
                new = lex.new_entry(lex.canonical_for(lex.make_prompt(vocab, random.Random(idx)), idx), idx)
                cache.record(new)
            busy = []
            for k in range(6):
                q = lex.canonical_for(lex.make_prompt(vocab, random.Random(60_000_000 + size + k)), k)
                ms, _ = decide(cache, q)
                busy.append(ms)
            timers.take()
            tier.worker.drain(120)
            r["busy_ms"] = busy
            timers.undo()
        finally:
            if cache is not None:
                cache.close()
            else:
                store.close()
    log(f"  {size}: done")
    return r


# --- the sweep ---------------------------------------------------------------------------------


def pair_data(path: Path, embedder: Embedder, limit: int | None = None) -> tuple[list[dict[str, Any]], float]:
    raw = load_pairs(path)[:limit]
    pairs = [(p.get("id", str(i)), p["expect"], p.get("category", "-"), canonical_of(p["stored"]), canonical_of(p["incoming"]))
             for i, p in enumerate(raw)]
    texts = sorted({embedding_text(c, SETTINGS.scrub_patterns) for _, _, _, s, i in pairs for c in (s, i)})
    t = time.perf_counter()
    vecs = embed_all(embedder, texts)
    embed_s = time.perf_counter() - t
    vec_of = {text: vecs[k] for k, text in enumerate(texts)}
    out = []
    for pid, expect, category, stored, incoming in pairs:
        a = embedding_text(stored, SETTINGS.scrub_patterns)
        b = embedding_text(incoming, SETTINGS.scrub_patterns)
        cosine = float(vec_of[a] @ vec_of[b]) if a.strip() and b.strip() else None
        base = pipeline_outcome(stored, incoming, SETTINGS)
        bypass = fuzzy_bypass(incoming, SETTINGS)
        served_on, served_off, reasons = {}, {}, {}
        for t_ in THRESHOLDS:
            if cosine is None:  # the tier embeds nothing for an empty text
                served_on[t_] = served_off[t_] = False
                continue
            # The pipeline only looks at neighbours >= the review threshold (0.75 by default), so a
            # serve threshold below it needs the review threshold lowered too; the sweep does that.
            settings = replace(SETTINGS, embedding_serve_threshold=t_,
                               embedding_review_threshold=min(SETTINGS.embedding_review_threshold, t_))
            v = near_match(incoming, stored, settings, tier="embedding", score=cosine,
                           fuzzy_bypass_reason=bypass.reason if bypass else None)
            served_on[t_] = v.serve
            served_off[t_] = v.serve or (v.reason or "").startswith("guard:")
            reasons[t_] = v.reason
        out.append({"id": pid, "expect": expect, "category": category, "cosine": cosine,
                    "base_on": base.action == "served", "base_off": base.served_without_guard,
                    "base_tier": base.tier, "emb_on": served_on, "emb_off": served_off, "reasons": reasons})
    return out, embed_s


def sweep_rows(dev: list[dict[str, Any]], public: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for t_ in THRESHOLDS:
        for guard in (True, False):
            key_b, key_e = ("base_on", "emb_on") if guard else ("base_off", "emb_off")
            def served(x: dict[str, Any]) -> bool:
                return x[key_b] or x[key_e][t_]
            same = [x for x in dev if x["expect"] == "same"]
            diff = [x for x in dev if x["expect"] == "different"]
            psame = [x for x in public if x["expect"] == "same"]
            rows.append({
                "t": t_, "guard": guard,
                "dev_hits": sum(map(served, same)), "dev_same": len(same),
                "dev_false": sum(map(served, diff)), "dev_diff": len(diff),
                "dev_emb_only": sum(1 for x in same if x[key_e][t_] and not x[key_b]),
                "pub_hits": sum(map(served, psame)), "pub_same": len(psame),
                "pub_emb_only": sum(1 for x in psame if x[key_e][t_] and not x[key_b]),
            })
    return rows


def rate(n: int, d: int) -> float:
    return n / d if d else float("nan")


def best_row(rows: list[dict[str, Any]], guard: bool, max_false: float = 0.01) -> dict[str, Any] | None:
    ok = [r for r in rows if r["guard"] == guard and rate(r["dev_false"], r["dev_diff"]) <= max_false]
    if not ok:
        return None
    return max(ok, key=lambda r: (rate(r["dev_hits"], r["dev_same"]), rate(r["pub_hits"], r["pub_same"]) if r["pub_same"] else 0, -r["t"]))


def cross_check(threshold: float, log: Callable[[str], None]) -> dict[str, Any]:
    """`semula eval` on the dev pairs with SEMULA_EMBEDDINGS=on (the real pipeline, worker and all)."""
    env = {"SEMULA_EMBEDDINGS": "on", "SEMULA_EMBEDDINGS_MODEL": MODEL_NAME,
           "SEMULA_EMBEDDINGS_MODEL_PATH": str(MODEL_DIR), "SEMULA_EMBEDDINGS_OFFLINE": "on"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        t = time.perf_counter()
        summary = evaluate(CORPUS / "dev-pairs.jsonl", {"embedding_serve_threshold": threshold})
        summary["seconds"] = time.perf_counter() - t
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    log(f"cross-check eval at {threshold}: hit {summary['hit_rate']:.3f}, false {summary['false_hit_rate']:.3f}")
    return summary


# --- report ------------------------------------------------------------------------------------


def machine(embedder_load_s: float) -> list[list[str]]:
    rows = lex.machine()
    import fastembed
    import onnxruntime
    rows += [["fastembed", fastembed.__version__], ["onnxruntime", onnxruntime.__version__],
             ["numpy", np.__version__],
             ["model", f"{MODEL_NAME} (ONNX, {MODEL_DIR}); fastembed threads=2; load {embedder_load_s:.1f}s"]]
    return rows


def render(args: argparse.Namespace, sizes: list[int], n_queries: int, machine_rows: list[list[str]],
           results: list[dict[str, Any]], backfill: dict[str, float], dev: list[dict[str, Any]],
           public: list[dict[str, Any]], sweep: list[dict[str, Any]], corpus_embed_s: float,
           check: dict[str, Any] | None, total_s: float, load_end: tuple[float, float, float]) -> str:
    L: list[str] = []
    L.append("# Embedding tier benchmark\n")
    L.append(f"Produced by `scripts/bench_embedding.py{' --quick' if args.quick else ''} --sizes {','.join(map(str, sizes))} "
             f"--queries {n_queries}` in {total_s:.0f} s. Numbers are wall-clock on a shared machine; other jobs were "
             "running (see the load averages), so treat p95s as noisy and compare on/off columns, which were "
             "measured interleaved in the same run.\n")
    L.append("## Machine\n")
    L.append(table(["", ""], machine_rows + [["load average at end", " ".join(f"{x:.2f}" for x in load_end)]]))
    L.append("")
    L.append("## Method\n")
    L.append(
        "- **Workload**: the synthetic chat requests of `scripts/bench_lexical.py` (one project, 20-60 word prompts, "
        "two system prompts/models), bulk-inserted exactly as `cache.record` would write them. Vectors for every entry "
        f"were stored with `VectorTable.put` before timing. The first {backfill['real']:,} entries were really embedded in "
        f"batches of 64 ({backfill['n']} texts in {backfill['s']:.1f} s = {backfill['n'] / backfill['s']:.0f} texts/s, "
        f"{1000 * backfill['s'] / backfill['n']:.1f} ms/text on this loaded machine); "
        + (f"to fit the run time, the other {backfill['total'] - backfill['real']:,} entries of the largest store got random "
           "unit vectors (the index search costs the same — one matrix-vector product over all rows — but they are never "
           "neighbours, so the candidate bookkeeping is that of the real part; paraphrase queries come from the really "
           "embedded entries). " if backfill['total'] > backfill['real'] else "")
        + "The 1k store uses the first 1k vectors.\n"
        f"- **Misses**: {n_queries} per size, half paraphrase-like (a stored prompt with 1-3 words replaced, dropped "
        "or inserted), half unrelated prompts. Each goes through the whole miss decision (`cache.match` + "
        "`fuzzy_bypass` + `cache.near`) twice: tier **on** and tier **off** (`cache.embeddings` detached from the same "
        "Cache, so store, FTS index and settings are identical), alternating which goes first. With the defaults "
        "nothing is served by a fuzzy tier (serve thresholds 1.0 / none); candidates ≥ the review thresholds are "
        "queued, as in the proxy.\n"
        "- **Pieces** (tier on) by wrapping the live objects: *encode* = `Embedder.embed` of the one query text "
        "(tokeniser truncation + ONNX + normalise); *index search* = `VectorIndex.search` (matrix @ vector, top-5); "
        "*embedding step* = `ReviewQueue._embedding_candidates` (embedding_text + encode + index search + "
        "`canonicals_by_ids` + `near_match` of the candidates ≥ review threshold); *all but encode* = whole "
        "decision − encode (the lexical tier, DuckDB look-ups, queueing included).\n"
        "- **Hits**: `cache.match` of 500 stored fingerprints × 4 rounds, on vs off interleaved; the model's call "
        "counter is read before and after. **Writes**: 60 `cache.record` of new requests per mode, interleaved "
        "(the worker embeds the 'on' writes in the background meanwhile).\n"
        "- **Sweep**: see below.\n")

    L.append("## 1. The miss path\n")
    rows = []
    for r in results:
        xs = r["rows"]
        on, off = [x["on"] for x in xs], [x["off"] for x in xs]
        enc = [x["encode"] for x in xs]
        rest = [x["on"] - x["encode"] for x in xs]
        idx = [x["index_search"] for x in xs]
        step = [x["emb_candidates"] - x["encode"] for x in xs]
        extra = [x["on"] - x["encode"] - x["off"] for x in xs]
        rows.append([f"{r['size']:,}", len(xs),
                     f"{fmt(p(on, 50))} / {fmt(p(on, 95))}", f"{fmt(p(off, 50))} / {fmt(p(off, 95))}",
                     f"{fmt(p(enc, 50))} / {fmt(p(enc, 95))}", f"{fmt(p(idx, 50), 3)} / {fmt(p(idx, 95), 3)}",
                     f"{fmt(p(step, 50))} / {fmt(p(step, 95))}", f"{fmt(p(rest, 50))} / {fmt(p(rest, 95))}",
                     f"{fmt(p(extra, 50))}"])
    L.append(table(["entries", "misses", "whole miss, tier ON p50 / p95 ms", "whole miss, tier OFF (lexical only) p50 / p95",
                    "encode p50 / p95", "index search p50 / p95", "embedding step − encode p50 / p95",
                    "all but encode (ON − encode) p50 / p95", "ON − encode − OFF p50 (paired)"], rows))
    L.append("")
    L.append("Targets: search and bookkeeping p50 ≤ 5 ms at 10k (columns *index search*, *embedding step − encode*; "
             "*all but encode* also contains the lexical tier, which runs with the tier off too); the whole miss p50 "
             "≤ 30 ms.\n")
    rows = []
    for r in results:
        for kind in ("paraphrase", "unrelated"):
            xs = [x for x in r["rows"] if x["kind"] == kind]
            rows.append([f"{r['size']:,}", kind, len(xs), fmt(p([x["on"] for x in xs], 50)), fmt(p([x["off"] for x in xs], 50)),
                         fmt(p([x["encode"] for x in xs], 50)), fmt(p([x["emb_candidates"] - x["encode"] for x in xs], 50))])
    L.append("By query kind (p50 ms):\n")
    L.append(table(["entries", "queries", "n", "whole ON", "whole OFF", "encode", "embedding step − encode"], rows))
    L.append("")
    rows = []
    for r in results:
        rows.append([f"{r['size']:,}", ", ".join(f"{k} {v}" for k, v in sorted(r["outcomes_on"].items())),
                     ", ".join(f"{k} {v}" for k, v in sorted(r["outcomes_off"].items()))])
    L.append("Outcomes (defaults: nothing served by a fuzzy tier):\n")
    L.append(table(["entries", "tier ON", "tier OFF"], rows))
    L.append("")
    rows = []
    for r in results:
        rows.append([f"{r['size']:,}", f"{fmt(p(r['truncate_ms'], 50))} / {fmt(p(r['truncate_ms'], 95))}",
                     f"{fmt(p(r['onnx_ms'], 50))} / {fmt(p(r['onnx_ms'], 95))}"])
    L.append("Inside encode (60 query texts, p50 / p95 ms): tokeniser truncation (`Embedder.truncate`) vs the ONNX "
             "model call (`TextEmbedding.embed` of one text):\n")
    L.append(table(["entries", "truncate", "ONNX embed"], rows))
    L.append("")

    L.append("### Index (re)load, misses after writes and during a write burst\n")
    rows = []
    for r in results:
        rows.append([f"{r['size']:,}", r["index_rows"], fmt(r["cold_load_ms_p50"], 1),
                     f"{fmt(p(r['after_write_ms'], 50))} / {fmt(max(r['after_write_ms']))}",
                     f"{fmt(p(r['after_write_index_ms'], 50))}", f"{fmt(p(r['after_write_encode_ms'], 50))}",
                     f"{fmt(p(r['busy_ms'], 50))} / {fmt(max(r['busy_ms']))}"])
    L.append(table(["entries", "vectors", "cold index load p50 ms (VectorTable.load + set)",
                    "miss right after a write p50 / max ms", "its index search (incl. reload) p50",
                    "its encode p50", "miss while the worker embeds 64 writes p50 / max ms"], rows))
    L.append("")
    L.append("New vectors are folded into a loaded project matrix (`VectorIndex.add`), so a miss right after a write "
             "does not reload the project from DuckDB (only a cold or invalidated project loads). A miss during a "
             "burst of writes still waits for the worker's current batch (8 texts; the one `Embedder` is serialised "
             "by a lock) before its own encode.\n")

    L.append("### Hits and writes, tier on vs off\n")
    rows = []
    for r in results:
        hon, hoff = r["hit_us"]["on"], r["hit_us"]["off"]
        won, woff = r["write_ms"]["on"], r["write_ms"]["off"]
        rows.append([f"{r['size']:,}", f"{fmt(p(hon, 50))} / {fmt(p(hon, 95))}", f"{fmt(p(hoff, 50))} / {fmt(p(hoff, 95))}",
                     fmt(p(hon, 50) / p(hoff, 50)), r["hit_encode_calls"],
                     f"{fmt(p(won, 50))} / {fmt(p(won, 95))}", f"{fmt(p(woff, 50))} / {fmt(p(woff, 95))}",
                     fmt(p(won, 50) / p(woff, 50)), fmt(r["worker_drain_after_writes_s"], 1)])
    L.append(table(["entries", "exact hit ON p50 / p95 µs", "exact hit OFF p50 / p95 µs", "hit ratio ON/OFF p50",
                    "model calls during hits", "write ON p50 / p95 ms", "write OFF p50 / p95 ms",
                    "write ratio ON/OFF p50", "worker drain after the writes s"], rows))
    L.append("")

    L.append("## 2. Serve-threshold sweep (all-MiniLM-L6-v2)\n")
    L.append(
        f"Pairs: dev-pairs.jsonl {len(dev)} ({sum(x['expect'] == 'same' for x in dev)} same, "
        f"{sum(x['expect'] == 'different' for x in dev)} different)"
        + (f", public-paraphrase-pairs.jsonl {len(public)} (all same)" if public else ", public pairs skipped (--quick)")
        + f". {corpus_embed_s:.1f} s to embed the distinct texts.\n")
    L.append(
        "Per pair: the cosine of the two `embedding_text`s (batch-embedded once); the default pipeline's outcome "
        "(`nearmatch.pipeline_outcome`: exact, normalised, lexical at its default serve threshold 1.0); and per "
        "threshold t `near_match(incoming, stored, settings(embedding_serve_threshold=t), tier=\"embedding\", "
        "score=cosine, fuzzy_bypass_reason=…)`. Served = pipeline served OR embedding verdict serves. Guard off = "
        "the same, also counting verdicts whose only reason is the guard (`reason` starts with `guard:`; the lexical "
        "tier likewise via `served_without_guard`). For t < 0.75 the review threshold is lowered to t, because "
        "`ReviewQueue._embedding_candidates` drops neighbours below the review threshold before `near_match` sees "
        "them. Each pair is its own project (one stored entry), as in `semula eval`.\n")
    base_same = [x for x in dev if x["expect"] == "same"]
    base_diff = [x for x in dev if x["expect"] == "different"]
    L.append(f"Without the embedding tier (defaults): dev hit rate {rate(sum(x['base_on'] for x in base_same), len(base_same)):.3f}, "
             f"false-hit rate {rate(sum(x['base_on'] for x in base_diff), len(base_diff)):.3f}"
             + (f"; public hit rate {rate(sum(x['base_on'] for x in public), len(public)):.3f}" if public else "") + ".\n")
    rows = []
    for s in sweep:
        rows.append([f"{s['t']:.2f}", "on" if s["guard"] else "off",
                     f"{rate(s['dev_hits'], s['dev_same']):.3f} ({s['dev_hits']})",
                     f"{rate(s['dev_false'], s['dev_diff']):.3f} ({s['dev_false']})",
                     s["dev_emb_only"],
                     f"{rate(s['pub_hits'], s['pub_same']):.3f} ({s['pub_emb_only']})" if s["pub_same"] else "-"])
    L.append(table(["serve threshold", "guard", "dev hit rate (n)", "dev false-hit rate (n)",
                    "dev hits only the embedding tier gives", "public hit rate (hits only the embedding tier gives)"], rows))
    L.append("")
    for guard in (True, False):
        b = best_row(sweep, guard)
        if b is None:
            L.append(f"- Guard {'on' if guard else 'off'}: no threshold keeps the dev false-hit rate ≤ 1 %.")
        else:
            L.append(f"- Guard {'on' if guard else 'off'}: best threshold by dev hit rate with false hits ≤ 1 %: **{b['t']:.2f}** → "
                     f"dev hit rate {rate(b['dev_hits'], b['dev_same']):.3f}, false-hit rate "
                     f"{rate(b['dev_false'], b['dev_diff']):.3f} ({b['dev_false']}/{b['dev_diff']})"
                     + (f", public hit rate {rate(b['pub_hits'], b['pub_same']):.3f}" if b["pub_same"] else "") + ".")
    L.append("")

    # cosine distributions and the false hits at the best threshold
    same_c = [x["cosine"] for x in dev if x["expect"] == "same" and x["cosine"] is not None]
    diff_c = [x["cosine"] for x in dev if x["expect"] == "different" and x["cosine"] is not None]
    pub_c = [x["cosine"] for x in public if x["cosine"] is not None]
    qs = (10, 25, 50, 75, 90)
    rows = [["dev same", len(same_c), *(fmt(p(same_c, q), 3) for q in qs)],
            ["dev different", len(diff_c), *(fmt(p(diff_c, q), 3) for q in qs)]]
    if pub_c:
        rows.append(["public (same)", len(pub_c), *(fmt(p(pub_c, q), 3) for q in qs)])
    L.append("Cosine distributions (the cosine alone separates the labels poorly: a changed number or name barely "
             "moves it, which is why the guard and the shape checks decide):\n")
    L.append(table(["pairs", "n", *(f"p{q}" for q in qs)], rows))
    L.append("")
    b = best_row(sweep, True)
    t_show = b["t"] if b else 0.94
    rows = []
    for x in dev:
        if x["expect"] == "different" and (x["base_on"] or x["emb_on"][t_show]):
            rows.append([x["id"], x["category"], fmt(x["cosine"] or 0, 3), x["base_tier"] if x["base_on"] else "embedding"])
    L.append(f"False hits with the guard on at {t_show:.2f}: " + (str(len(rows)) + "\n" if rows else "none.\n"))
    if rows:
        L.append(table(["pair", "category", "cosine", "served by"], rows))
        L.append("")
    # why dev "same" pairs are not served at the best threshold
    if b:
        why = Counter()
        for x in dev:
            if x["expect"] == "same" and not (x["base_on"] or x["emb_on"][t_show]):
                reason = x["reasons"].get(t_show) or "no text"
                why[reason.split(":")[0] if not reason.startswith("score") else "score below threshold"] += 1
        L.append(f"Why dev *same* pairs are not served at {t_show:.2f} (guard on), by the embedding verdict's first reason:\n")
        L.append(table(["reason", "pairs"], [[k, v] for k, v in why.most_common()]))
        L.append("")
        cat_rows = []
        cats = sorted({x["category"] for x in dev})
        for c in cats:
            xs = [x for x in dev if x["category"] == c]
            cat_rows.append([c, len(xs), sum(x["expect"] == "same" for x in xs),
                             sum(1 for x in xs if x["expect"] == "same" and (x["base_on"] or x["emb_on"][t_show])),
                             sum(1 for x in xs if x["expect"] == "different" and (x["base_on"] or x["emb_on"][t_show])),
                             fmt(statistics.median([x["cosine"] for x in xs if x["cosine"] is not None] or [float("nan")]), 3)])
        L.append(f"Dev pairs by category at {t_show:.2f}, guard on:\n")
        L.append(table(["category", "pairs", "same", "same served", "different served", "median cosine"], cat_rows))
        L.append("")
    if check is not None:
        L.append(f"Cross-check: `semula eval` (the real pipeline with SEMULA_EMBEDDINGS=on, the background worker, "
                 f"review queue) on dev-pairs.jsonl at embedding_serve_threshold={check['threshold']:.2f}: hit rate "
                 f"{check['hit_rate']:.3f}, false-hit rate {check['false_hit_rate']:.3f}, in {check['seconds']:.0f} s; "
                 f"the in-memory sweep row says {check['sweep_hit']:.3f} / {check['sweep_false']:.3f}.\n")
    return "\n".join(L) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmark" / "results" / "embedding.md")
    parser.add_argument("--quick", action="store_true", help="1k only, 60 queries, dev pairs only, no cross-check")
    parser.add_argument("--no-cross-check", action="store_true")
    parser.add_argument("--embed-limit", type=int, default=2000,
                        help="entries really embedded; the rest of a larger store gets random unit vectors")
    parser.add_argument("--public-limit", type=int, default=500, help="public pairs used (of 1500); 0 = all")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    n_queries = args.queries
    if args.quick:
        sizes = [s for s in sizes if s <= 1000] or [1000]
        n_queries = min(n_queries, 60)
    started_all = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started_all:6.1f}s] {msg}", file=sys.stderr, flush=True)

    embedder, load_s = load_embedder()
    machine_rows = machine(load_s)
    log(f"model loaded in {load_s:.1f}s")

    vocab = lex.Vocabulary()
    n = max(sizes)
    prompts, entries, seen = [], [], set()
    i = 0
    while len(entries) < n:
        prompt = lex.make_prompt(vocab, random.Random(i))
        e = lex.new_entry(lex.canonical_for(prompt, i), i)
        i += 1
        if e.request_fp in seen:
            continue
        seen.add(e.request_fp)
        prompts.append(prompt)
        entries.append(e)
    real = min(n, args.embed_limit)
    texts = [embedding_text(e.canonical, SETTINGS.scrub_patterns) for e in entries[:real]]
    t = time.perf_counter()
    vectors = embed_all(embedder, texts)
    backfill = {"n": len(texts), "s": time.perf_counter() - t, "real": real, "total": n}
    log(f"embedded {len(texts)} entries in {backfill['s']:.1f}s")
    if n > real:  # filler: random unit vectors (same index cost; cosine ~0 to everything)
        filler = np.random.default_rng(5).standard_normal((n - real, vectors.shape[1])).astype(np.float32)
        filler /= np.linalg.norm(filler, axis=1, keepdims=True)
        vectors = np.vstack([vectors, filler])

    results = [run_size(size, prompts, entries, vectors, embedder, vocab, n_queries, log, real) for size in sizes]

    t = time.perf_counter()
    dev, e1 = pair_data(CORPUS / "dev-pairs.jsonl", embedder)
    public, e2 = ([], 0.0) if args.quick else pair_data(CORPUS / "public-paraphrase-pairs.jsonl", embedder,
                                                                  args.public_limit or None)
    sweep = sweep_rows(dev, public)
    log(f"sweep done in {time.perf_counter() - t:.1f}s (embedding {e1 + e2:.1f}s)")

    check = None
    if not args.quick and not args.no_cross_check:
        b = best_row(sweep, True) or next(s for s in sweep if s["t"] == 0.94 and s["guard"])
        summary = cross_check(b["t"], log)
        check = {"threshold": b["t"], "hit_rate": summary["hit_rate"], "false_hit_rate": summary["false_hit_rate"],
                 "seconds": summary["seconds"], "sweep_hit": rate(b["dev_hits"], b["dev_same"]),
                 "sweep_false": rate(b["dev_false"], b["dev_diff"])}

    total_s = time.perf_counter() - started_all
    text = render(args, sizes, n_queries, machine_rows, results, backfill, dev, public, sweep, e1 + e2, check,
                  total_s, os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    log(f"wrote {args.out} (total {total_s:.0f}s)")


if __name__ == "__main__":
    main()
