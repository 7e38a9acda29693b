"""The opt-in embedding tier: miss path on vs off, hits, writes, and the serve-threshold sweep.

In full: miss-path cost with the tier on vs off (same Cache, interleaved), hits and writes on vs off,
index reloads, and the embedding_serve_threshold sweep on the pair corpora. The model is the shared
all-MiniLM-L6-v2 (ONNX), not the production default: thresholds are for it.

    .venv/bin/python scripts/bench.py embedding            # full run: writes benchmark/results/embedding.md (+ .json)
    .venv/bin/python scripts/bench.py embedding --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

The results file is rendered by scripts/bench/render.py.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.common import PROJECT, canonical_for, log, miss_decision, pct

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
THRESHOLDS = tuple(round(0.70 + 0.02 * i, 2) for i in range(15))  # 0.70 .. 0.98


def model_dir() -> Path:
    return common.shared_path("models", "all-MiniLM-L6-v2-onnx")


def embed_all(embedder: Any, texts: list[str], batch: int = 64) -> np.ndarray:
    out = [embedder.embed(texts[i:i + batch]) for i in range(0, len(texts), batch)]
    return np.vstack(out) if out else np.zeros((0, 384), dtype=np.float32)


def use_tier(engine: Any, tier: Any) -> None:
    """The same Engine with and without its embedding tier (every part that holds the near tiers)."""
    from semula.core.tiers import Tier

    others = tuple(t for t in engine.searcher.tiers if t.tier is not Tier.EMBEDDING)
    tiers = others if tier is None else (*others, tier)
    engine.embeddings = tier
    engine.tiers = engine.searcher.tiers = engine.recordings.tiers = tiers


def p50_95(xs: list[float]) -> list[float]:
    return [pct(xs, 50), pct(xs, 95)]


def run_size(size: int, prompts: list[str], entries: list[Any], vectors: np.ndarray, embedder: Any, vocab: Any,
             n_queries: int, real: int) -> dict[str, Any]:
    from semula.embeddings.model import embedding_text
    from semula.engine.engine import Engine as Cache

    r: dict[str, Any] = {"size": size, "load_before": common.loadavg()}
    rng = random.Random(2000 + size)
    with tempfile.TemporaryDirectory(prefix=f"semula-bench-emb-{size}-") as tmp:
        t0 = time.perf_counter()
        store, id_of, _ = common.seeded_store(tmp, entries[:size])
        cache = Cache.open(store, embedder=embedder)
        try:
            tier, settings = cache.embeddings, cache.settings_for(PROJECT)
            common.settle_index(cache)
            cache.preloaded(timeout=300)  # steady state: the start-up answer preload (Python, the GIL) is done
            store.vectors.put(embedder.name, [(id_of[e.request_fp], vectors[i]) for i, e in enumerate(entries[:size])])
            r["seed_s"] = time.perf_counter() - t0
            loads = []
            for _ in range(5):
                tier.index.invalidate(PROJECT)
                t0 = time.perf_counter()
                r["vectors"] = tier.index.size(PROJECT)
                loads.append(common.ms_since(t0))
            r["cold_load_ms"] = statistics.median(loads)

            queries = [("paraphrase", canonical_for(vocab.paraphrase(prompts[i], rng), i))
                       for i in rng.sample(range(min(size, real)), n_queries // 2)]
            queries += [("unrelated", canonical_for(vocab.prompt(random.Random(20_000_000 + size * 1000 + k)), k))
                        for k in range(n_queries - n_queries // 2)]
            rng.shuffle(queries)
            timers = common.Timers().wrap(embedder, "embed", "encode").wrap(tier.index, "search", "index_search")
            timers.wrap(tier, "search", "tier_search")
            for k in range(3):  # warm-up
                miss_decision(cache, canonical_for(vocab.prompt(random.Random(99 + size + k)), 1))
            timers.take()
            rows = []
            for n, (kind, q) in enumerate(queries):
                row: dict[str, Any] = {"kind": kind}
                for mode in (("on", "off") if n % 2 == 0 else ("off", "on")):
                    use_tier(cache, tier if mode == "on" else None)  # the same Cache, with and without the tier
                    row[mode], row[mode + "_outcome"], _ = miss_decision(cache, q)
                    if mode == "on":
                        row.update(timers.take())
                    timers.take()
                rows.append(row)
            use_tier(cache, tier)
            miss: dict[str, Any] = {}
            for kind in ("all", "paraphrase", "unrelated"):
                xs = [x for x in rows if kind in ("all", x["kind"])]
                g = lambda key: [x.get(key, 0.0) for x in xs]  # noqa: E731
                miss[kind] = {"n": len(xs), "on": p50_95(g("on")), "off": p50_95(g("off")), "encode": p50_95(g("encode")),
                              "index_search": p50_95(g("index_search")),
                              "search_minus_encode": p50_95([x.get("tier_search", 0) - x.get("encode", 0) for x in xs]),
                              "on_minus_encode": p50_95([x["on"] - x.get("encode", 0) for x in xs]),
                              "paired_extra": p50_95([x["on"] - x.get("encode", 0) - x["off"] for x in xs])}
            r["miss_ms"] = miss
            r["outcomes"] = {m: dict(sorted(Counter(x[m + "_outcome"] for x in rows).items()))
                             for m in ("on", "off")}
            log(f"  {size}: miss on p50 {miss['all']['on'][0]:.1f} ms (encode {miss['all']['encode'][0]:.1f}), "
                f"off p50 {miss['all']['off'][0]:.1f} ms")

            trunc, embed = [], []
            for text in [embedding_text(q, settings.scrub_patterns) for _, q in queries[:60]]:
                t0 = time.perf_counter()
                embedder.truncate(text)
                trunc.append(common.ms_since(t0))
                t0 = time.perf_counter()
                embedder.embed([text])
                embed.append(common.ms_since(t0))
            r["truncate_ms"], r["embed_one_ms"] = p50_95(trunc), p50_95(embed)

            keys = [(entries[i].request_fp, entries[i].normalised_fp) for i in rng.sample(range(size), min(size, 500))]
            hits: dict[str, list[float]] = {"on": [], "off": []}
            calls = timers.calls.get("encode", 0)
            for rep in range(4):
                for mode in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                    use_tier(cache, tier if mode == "on" else None)
                    for rfp, nfp in keys:
                        t0 = time.perf_counter()
                        assert cache.match(PROJECT, rfp, nfp).tier == "exact"
                        hits[mode].append(common.ms_since(t0) * 1000)
            r["hit_us"] = {m: p50_95(v) for m, v in hits.items()}
            r["hit_model_calls"] = timers.calls.get("encode", 0) - calls

            def write(idx: int) -> float:
                new = common.new_entry(canonical_for(vocab.prompt(random.Random(idx)), idx), idx)
                t0 = time.perf_counter()
                cache.record(new)
                return common.ms_since(t0)

            # fewer writes into a store smaller than the usual counts (the test's tiny run)
            r["writes_per_mode"], r["burst_writes"] = min(60, size), min(64, size)
            writes: dict[str, list[float]] = {"on": [], "off": []}
            for k in range(r["writes_per_mode"]):
                for mode in (("on", "off") if k % 2 == 0 else ("off", "on")):
                    use_tier(cache, tier if mode == "on" else None)
                    writes[mode].append(write(30_000_000 + size * 10 + k * 2 + (mode == "on")))
            use_tier(cache, tier)
            t0 = time.perf_counter()
            tier.worker.drain(120)
            r["write_ms"], r["drain_after_writes_s"] = {m: p50_95(v) for m, v in writes.items()}, time.perf_counter() - t0
            common.settle_index(cache)

            after, after_index = [], []
            for k in range(8):  # a miss right after a write whose vector the worker has stored
                write(40_000_000 + size * 10 + k)
                tier.worker.drain(30)
                common.settle_index(cache)
                timers.take()
                after.append(miss_decision(cache, canonical_for(vocab.prompt(random.Random(40_500_000 + size + k)), k))[0])
                after_index.append(timers.take().get("index_search", 0.0))
            for k in range(r["burst_writes"]):  # a burst the worker embeds while misses arrive
                write(50_000_000 + size * 100 + k)
            busy = [miss_decision(cache, canonical_for(vocab.prompt(random.Random(60_000_000 + size + k)), k))[0]
                    for k in range(6)]
            tier.worker.drain(120)
            timers.undo()
            r["after_write_ms"], r["after_write_index_ms"] = [pct(after, 50), max(after)], pct(after_index, 50)
            r["busy_ms"] = [pct(busy, 50), max(busy)]
        finally:
            cache.close()
    return r


def pair_data(path: Path, embedder: Any, limit: int | None = None) -> tuple[list[dict[str, Any]], float]:
    """Per pair: the cosine of the two embedding texts, the default pipeline's outcome, and the embedding
    verdict per threshold (guard on, and guard off = also counting verdicts refused only by the guard)."""
    from semula.core.bypass import near_bypass
    from semula.core.nearmatch import near_match
    from semula.core.pair import pipeline_outcome
    from semula.core.settings import ProjectSettings
    from semula.embeddings.model import embedding_text
    from semula.engine.evaluate import canonical_of, load_pairs

    base = ProjectSettings()
    key = common.bench_key()
    pairs = [(p.get("id", str(i)), p["expect"], p.get("category", "-"), canonical_of(p["stored"], key),
              canonical_of(p["incoming"], key)) for i, p in enumerate(load_pairs(path)[:limit])]
    text = lambda c: embedding_text(c, base.scrub_patterns)  # noqa: E731
    texts = sorted({text(c) for *_, s, i in pairs for c in (s, i)})
    t0 = time.perf_counter()
    vec = dict(zip(texts, embed_all(embedder, texts)))
    embed_s = time.perf_counter() - t0
    out = []
    for pid, expect, category, stored, incoming in pairs:
        a, b = text(stored), text(incoming)
        cosine = float(vec[a] @ vec[b]) if a.strip() and b.strip() else None
        outcome, bypass = pipeline_outcome(stored, incoming, base), near_bypass(incoming, base)
        on, off, reasons = {}, {}, {}
        for t in THRESHOLDS:
            if cosine is None:
                on[t] = off[t] = False
                continue
            # neighbours below the review threshold never reach near_match: lower it with the serve threshold
            s = replace(base, embedding_serve_threshold=t, embedding_review_threshold=min(base.embedding_review_threshold, t))
            v = near_match(incoming, stored, s, tier="embedding", score=cosine,
                           near_bypass_reason=bypass.reason if bypass else None)
            on[t], off[t], reasons[t] = v.serve, v.serve or (v.reason or "").startswith("guard:"), v.reason
        out.append({"id": pid, "expect": expect, "category": category, "cosine": cosine,
                    "base_on": outcome.action == "served", "base_off": outcome.served_without_guard,
                    "base_tier": outcome.tier, "on": on, "off": off, "reasons": reasons})
    return out, embed_s


def sweep_rows(dev: list[dict[str, Any]], public: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for t in THRESHOLDS:
        for guard in (True, False):
            b, e = ("base_on", "on") if guard else ("base_off", "off")
            served = lambda x: x[b] or x[e][t]  # noqa: E731
            only = lambda xs: sum(1 for x in xs if x[e][t] and not x[b])  # noqa: E731
            same, diff = [x for x in dev if x["expect"] == "same"], [x for x in dev if x["expect"] == "different"]
            psame = [x for x in public if x["expect"] == "same"]
            rows.append({"t": t, "guard": guard, "dev_hits": sum(map(served, same)), "dev_same": len(same),
                         "dev_false": sum(map(served, diff)), "dev_diff": len(diff), "dev_emb_only": only(same),
                         "pub_hits": sum(map(served, psame)), "pub_same": len(psame), "pub_emb_only": only(psame)})
    return rows


def best_row(rows: list[dict[str, Any]], guard: bool, max_false: float = 0.01) -> dict[str, Any] | None:
    rate = lambda n, d: n / d if d else 0.0  # noqa: E731
    ok = [r for r in rows if r["guard"] == guard and rate(r["dev_false"], r["dev_diff"]) <= max_false]
    return max(ok, key=lambda r: (rate(r["dev_hits"], r["dev_same"]), rate(r["pub_hits"], r["pub_same"]), -r["t"]),
               default=None)


def sweep_figures(dev: list[dict[str, Any]], public: list[dict[str, Any]], embed_s: float) -> dict[str, Any]:
    rows = sweep_rows(dev, public)
    best = {"on": best_row(rows, True), "off": best_row(rows, False)}
    t = best["on"]["t"] if best["on"] else 0.94
    served = lambda x: x["base_on"] or x["on"][t]  # noqa: E731
    cos = lambda xs: [pct([x["cosine"] for x in xs if x["cosine"] is not None], q) for q in (10, 25, 50, 75, 90)]  # noqa: E731
    why = Counter(("score below threshold" if (x["reasons"].get(t) or "").startswith("score")
                   else (x["reasons"].get(t) or "no text").split(":")[0])
                  for x in dev if x["expect"] == "same" and not served(x))
    categories = {c: {"pairs": len(xs), "same": sum(x["expect"] == "same" for x in xs),
                      "same served": sum(x["expect"] == "same" and served(x) for x in xs),
                      "different served": sum(x["expect"] == "different" and served(x) for x in xs),
                      "median cosine": statistics.median([x["cosine"] for x in xs if x["cosine"] is not None] or [float("nan")])}
                  for c in sorted({x["category"] for x in dev}) for xs in [[x for x in dev if x["category"] == c]]}
    return {"rows": rows, "best": best, "shown_threshold": t, "embed_s": embed_s,
            "dev_pairs": len(dev), "public_pairs": len(public),
            "baseline": {"dev_hits": sum(x["base_on"] for x in dev if x["expect"] == "same"),
                         "dev_false": sum(x["base_on"] for x in dev if x["expect"] == "different"),
                         "pub_hits": sum(x["base_on"] for x in public)},
            "cosines": {"dev same": cos([x for x in dev if x["expect"] == "same"]),
                        "dev different": cos([x for x in dev if x["expect"] == "different"]),
                        **({"public (same)": cos(public)} if public else {})},
            "false_hits": [[x["id"], x["category"], x["cosine"], x["base_tier"] if x["base_on"] else "embedding"]
                           for x in dev if x["expect"] == "different" and served(x)],
            "why_not_served": dict(why.most_common()), "categories": categories}


def cross_check(threshold: float) -> dict[str, Any]:
    """`semula eval` on the dev pairs with SEMULA_EMBEDDINGS=on (the real pipeline, worker and all)."""
    from semula.engine.evaluate import evaluate

    env = {"SEMULA_EMBEDDINGS": "on", "SEMULA_EMBEDDINGS_MODEL": MODEL_NAME,
           "SEMULA_EMBEDDINGS_MODEL_PATH": str(model_dir()), "SEMULA_EMBEDDINGS_OFFLINE": "on"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        t0 = time.perf_counter()
        s = evaluate(common.corpus_file("dev-pairs.jsonl"), {"embedding_serve_threshold": threshold})
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return {"threshold": threshold, "hit_rate": s["hit_rate"], "false_hit_rate": s["false_hit_rate"],
            "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="1k only, ≤ 60 queries, dev pairs only, no cross-check")
    parser.add_argument("--no-cross-check", action="store_true")
    parser.add_argument("--embed-limit", type=int, default=2000,
                        help="entries really embedded; the rest of a larger store gets random unit vectors")
    parser.add_argument("--public-limit", type=int, default=500, help="public pairs used (of 1500); 0 = all")
    parser.add_argument("--dev-limit", type=int, default=0, help="dev pairs used (of 183); 0 = all")
    parser.add_argument("--out", type=Path, default=None, help="results markdown (default benchmark/results/embedding.md)")
    parser.add_argument("--json", type=Path, default=None, help="figures (default: --out with .json)")
    args = parser.parse_args(argv)
    sizes, n_queries = [int(s) for s in args.sizes.split(",")], args.queries
    if args.quick:
        sizes, n_queries = [s for s in sizes if s <= 1000] or [1000], min(n_queries, 60)
    import fastembed
    import onnxruntime

    from semula.embeddings.model import Embedder, EmbeddingConfig, embedding_text

    from semula.proxy.addon import GIL_SWITCH_SECONDS

    sys.setswitchinterval(GIL_SWITCH_SECONDS)  # as the proxy runs: the miss path shares the GIL with the store's threads
    t0 = time.perf_counter()
    embedder = Embedder.load(EmbeddingConfig(enabled=True, model_name=MODEL_NAME, model_path=str(model_dir()),
                                             offline=True, cache_dir=model_dir()))
    info = common.machine(fastembed=fastembed.__version__, onnxruntime=onnxruntime.__version__,
                          numpy=np.__version__, model=f"{MODEL_NAME} (ONNX), load {time.perf_counter() - t0:.1f} s")
    vocab, prompts, entries = common.workload(max(sizes))
    real = min(len(entries), args.embed_limit)
    t0 = time.perf_counter()
    vectors = embed_all(embedder, [embedding_text(e.canonical) for e in entries[:real]])
    backfill = {"real": real, "total": len(entries), "seconds": time.perf_counter() - t0}
    log(f"embedded {real} entries in {backfill['seconds']:.1f} s")
    if len(entries) > real:  # filler: random unit vectors (same index cost; never neighbours)
        filler = np.random.default_rng(5).standard_normal((len(entries) - real, vectors.shape[1])).astype(np.float32)
        vectors = np.vstack([vectors, filler / np.linalg.norm(filler, axis=1, keepdims=True)])
    results = [run_size(s, prompts, entries, vectors, embedder, vocab, n_queries, real) for s in sizes]
    dev, e1 = pair_data(common.corpus_file("dev-pairs.jsonl"), embedder, args.dev_limit or None)
    public, e2 = ([], 0.0) if args.quick else pair_data(common.corpus_file("public-paraphrase-pairs.jsonl"), embedder,
                                                        args.public_limit or None)
    sweep = sweep_figures(dev, public, e1 + e2)
    check = None
    if not (args.quick or args.no_cross_check):
        check = cross_check(sweep["shown_threshold"])
    common.finish("embedding", {"command": common.command("embedding", argv), "machine": info,
                                "params": {"sizes": sizes, "queries": n_queries, "quick": args.quick},
                                "backfill": backfill, "sizes": results, "sweep": sweep, "cross_check": check,
                                "load_after": common.loadavg()}, args.out, args.json, args.quick)
    return 0
