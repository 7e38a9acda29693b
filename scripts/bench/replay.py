"""Replay throughput of semula's exact-hit path against what mitmproxy itself allows.

Three variants answer the same N distinct OpenAI chat requests through mitmdump, driven by
concurrent keep-alive httpx clients: `semula proxy --mode replay` on a store of E entries; a
no-op addon answering from a dict (scripts/bench/noop_addon.py); `mitmdump --server-replay`.
Runs are interleaved; every answer is checked. Then semula's hooks are timed in-process.

    .venv/bin/python scripts/bench.py replay            # full run: writes benchmark/results/replay.md (+ .json)
    .venv/bin/python scripts/bench.py replay --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

The results file is rendered by scripts/bench/render.py.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import pickle
import random
import ssl
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from collections.abc import Callable
from typing import Any

import httpx

from bench import common, pyspy
from bench.common import REPO, log, pct

HOST, PATH = "api.openai.com", "/v1/chat/completions"
URL = f"https://{HOST}{PATH}"
PROJECT = "default"
VARIANTS = ("semula", "noop", "replay")
# Each proxy gets every request twice: "first" is the first sight of each request (semula: the canonical
# tiers), "repeat" the same requests again (semula: the raw-request fast path). The targets are the repeat's.
PASSES = ("first", "repeat")
NOOP_ADDON = REPO / "scripts" / "bench" / "noop_addon.py"
CLIENT_HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench-not-a-real-key"}
SYSTEM_PROMPT = ("You are a careful assistant for the semula replay benchmark. Answer in one short paragraph, "
                 "cite no sources, and never invent numbers you were not given.")
WORDS = ("proxy replay record cache answer token stream model prompt request latency budget test suite fixture "
         "deterministic network provider fingerprint canonical normalise exact tier hit miss recording entry project "
         "namespace header body json schema parquet duckdb mitmproxy addon client").split()
Answer = tuple[int, list[tuple[str, str]], bytes]


def request_body(i: int) -> bytes:
    rng = random.Random(i)
    question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 60)))
    return json.dumps({"model": "gpt-4o-mini", "temperature": 0, "max_tokens": 256, "messages": [
        {"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": f"Question {i}: {question}?"}]},
        separators=(",", ":")).encode()


def canonical(body: bytes) -> Any:
    from semula.providers import adapter_for
    from semula.providers.base import RawRequest

    headers = {k.lower(): v for k, v in CLIENT_HEADERS.items()}
    return adapter_for(HOST, PATH).canonicalise(RawRequest("POST", HOST, PATH, (), headers, body), common.bench_key())


def proxy_args(port: int, confdir: Path) -> list[str]:
    """What every mitmdump gets (semula proxy sets the same itself)."""
    from semula.providers import DEFAULT_PROVIDER_HOSTS, allow_hosts_regexes

    args = ["--listen-host", "127.0.0.1", "--listen-port", str(port), "--set", f"confdir={confdir}",
            "--set", "connection_strategy=lazy", "--set", "flow_detail=0"]
    for regex in allow_hosts_regexes(DEFAULT_PROVIDER_HOSTS):
        args += ["--set", f"allow_hosts={regex}"]
    return args


def mitmdump() -> str:
    return str(Path(sys.executable).parent / "mitmdump")


async def drive(port: int, ca: Path, bodies: list[bytes], expected: dict[bytes, bytes] | None, concurrency: int,
                semula: bool = False, warmup: int = 0, passes: int = 1,
                cpu: Callable[[], float] | None = None) -> list[dict[str, Any]]:
    """Warm the connections, then send every body once per pass from `concurrency` workers; time and check each.

    `cpu` reads the proxy's CPU seconds: each pass reports the proxy CPU it cost per request."""
    latencies: list[float] = []
    failures: list[str] = []
    async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=str(ca)),
                                 timeout=60.0, headers=CLIENT_HEADERS,
                                 limits=httpx.Limits(max_connections=concurrency)) as client:

        async def worker(queue: list[bytes], timed: bool) -> None:
            while queue:
                body = queue.pop()
                t0 = time.perf_counter()
                try:
                    r = await client.post(URL, content=body)
                except Exception as e:  # noqa: BLE001 - counted as a failure
                    failures.append(f"{type(e).__name__}: {e}")
                    continue
                if timed:
                    latencies.append(common.ms_since(t0))
                ok = r.status_code == 200 and (expected is None or r.content == expected[body])
                if ok and semula:
                    ok = r.headers.get("x-semula-decision") == "hit" and r.headers.get("x-semula-tier") == "exact"
                if not ok:
                    failures.append(f"{r.status_code} {dict(r.headers)} {r.content[:200]!r}"
                                    + (f" expected {expected[body][:200]!r}" if expected else ""))

        warm = list(reversed(bodies[:warmup]))
        await asyncio.gather(*(worker(warm, False) for _ in range(concurrency)))
        # What this process holds (bodies, answers, earlier results) out of the client's collections: a
        # full collection here stopped the client 100-220 ms, a p99 that was the client's, not the proxy's.
        gc.collect()
        gc.freeze()
        results = []
        for _ in range(passes):
            latencies.clear()
            failures.clear()
            queue, cpu0, begin, t0 = list(reversed(bodies)), time.process_time(), datetime.now(UTC), time.perf_counter()
            proxy0 = cpu() if cpu else 0.0
            await asyncio.gather(*(worker(queue, True) for _ in range(concurrency)))
            wall = time.perf_counter() - t0
            results.append({
                "wall_s": wall, "latencies": list(latencies), "failures": len(failures), "failure": failures[:1],
                "client_cores": (time.process_time() - cpu0) / wall, "window": (begin, datetime.now(UTC)),
                "proxy_cpu_ms": (cpu() - proxy0) * 1000 / len(bodies) if cpu else None})
        return results


def record_flows(procs: common.Processes, work: Path, confdir: Path, ca: Path, bodies: list[bytes],
                 concurrency: int) -> tuple[Path, dict[bytes, Answer]]:
    """Record the benchmark requests once through mitmdump -w + map_remote to the fake provider."""
    from mitmproxy import http, io

    fake, fake_port = common.start_fake_provider(procs, work)
    flows, port = work / "flows.mitm", common.free_port()
    rec = procs.start([mitmdump(), *proxy_args(port, confdir), "-w", str(flows), "--set", "ssl_insecure=true",
                       "--set", f"map_remote=|//{HOST}/|//127.0.0.1:{fake_port}/"], work / "record.log")
    try:
        common.wait_ready(rec, work / "record.log", None, port)
        result = asyncio.run(drive(port, ca, bodies, None, concurrency))[0]
        if result["failures"]:
            raise RuntimeError(f"recording: {result['failures']} requests failed, e.g. {result['failure']}")
    finally:
        procs.stop(rec)
        procs.stop(fake)
    answers: dict[bytes, Answer] = {}
    with open(flows, "rb") as f:
        for flow in io.FlowReader(f).stream():
            if isinstance(flow, http.HTTPFlow) and flow.response is not None:
                r = flow.response
                answers[flow.request.get_content(strict=False) or b""] = (
                    r.status_code, list(r.headers.items()), r.get_content(strict=False) or b"")
    return flows, answers


def seed(data_dir: Path, bodies: list[bytes], answers: dict[bytes, Answer], bench: list[bytes]) -> float:
    """Seed one entry per body, then check every benchmark request is an exact hit holding its answer."""
    from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
    from semula.engine.engine import Engine

    t0 = time.perf_counter()
    entries = [common.new_entry(canonical(b), i, PROJECT, HOST, *answers[b]) for i, b in enumerate(bodies)]
    store, _, _ = common.seeded_store(data_dir, entries)
    seconds = time.perf_counter() - t0
    cache = Engine.open(store)
    try:
        settings = cache.settings_for(PROJECT)
        for body in bench:
            c = canonical(body)
            match = cache.match(PROJECT, request_fingerprint(c), normalised_fingerprint(c, *settings.fingerprint_inputs))
            entry = cache.entry(match.entry_id) if match and match.tier == "exact" else None
            if entry is None or entry.body != answers[body][2]:
                raise RuntimeError(f"a seeded request is not an exact hit holding its answer: {match}")
        common.settle_index(cache)
    finally:
        cache.close()
    return seconds


def run_variant(procs: common.Processes, variant: str, run: int, work: Path, confdir: Path, ca: Path,
                data_dir: Path, flows: Path, bodies: list[bytes], expected: dict[bytes, bytes],
                concurrency: int, warmup: int, profile: Path | None = None) -> list[dict[str, Any]]:
    """One fresh proxy, both passes; with `profile`, py-spy samples the proxy during them into that file."""
    port, log_path = common.free_port(), work / f"{variant}-{run}.log"
    argv, marker = {
        "semula": ([sys.executable, "-m", "semula", "proxy", "--mode", "replay", "--listen-host", "127.0.0.1",
                    "--listen-port", str(port), "--data-dir", str(data_dir), "--set", f"confdir={confdir}",
                    "--set", "semula_recordings=off"],  # the store is the benchmark's, not a folder in the cwd
                   "semula ready"),
        "noop": ([mitmdump(), *proxy_args(port, confdir), "-s", str(NOOP_ADDON)], None),
        # The flows name the fake provider's 127.0.0.1:port: host and port are left out of the match.
        "replay": ([mitmdump(), *proxy_args(port, confdir), "--server-replay", str(flows), "--set",
                    "server_replay_reuse=true", "--set", "server_replay_ignore_host=true", "--set",
                    "server_replay_ignore_port=true", "--set", "server_replay_extra=404"], None),
    }[variant]
    proc = procs.start(argv, log_path, {"SEMULA_BENCH_ANSWERS": str(work / "noop-answers.pickle"),
                                        "PYTHONPATH": str(REPO / "addon")})
    try:
        common.wait_ready(proc, log_path, marker, port)
        settle = common.wait_idle(proc.pid)  # start-up work (semula's index build) done before timing
        sampler = pyspy.attach(proc.pid, profile) if profile else None
        try:
            passes = asyncio.run(drive(port, ca, bodies, expected, concurrency, variant == "semula", warmup,
                                       len(PASSES), lambda: common.cpu_seconds(proc.pid)))
        finally:
            if sampler is not None:
                log("py-spy: " + next((ln for ln in pyspy.detach(sampler).splitlines() if "Samples" in ln), "no output"))
    finally:
        procs.stop(proc)
    out = []
    for name, r in zip(PASSES, passes):
        lat = r.pop("latencies")
        out.append({**r, "variant": variant, "pass": name, "run": run, "rps": len(bodies) / r["wall_s"],
                    "p50": pct(lat, 50), "p99": pct(lat, 99), "settle_s": settle})
    return out


def decision_ms(data_dir: Path, windows: list[tuple[datetime, datetime]]) -> dict[str, Any]:
    """semula's logged decision_ms of the hits inside the timed windows (warm-up excluded), and how many
    of them the fast path served."""
    import pyarrow.dataset as ds

    files = [str(f) for f in sorted((data_dir / "calls").glob("**/*.parquet"))]
    columns = ["ts", "decision", "decision_ms", "fast"]
    rows = ds.dataset(files, format="parquet").to_table(columns=columns).to_pylist() if files else []
    inside = [r for r in rows if any(b <= r["ts"] <= e for b, e in windows)]
    values = [r["decision_ms"] for r in inside if r["decision"] == "hit" and r["decision_ms"] is not None]
    return {**common.summary(values, (50, 90, 99)), "others": sum(r["decision"] != "hit" for r in inside),
            "fast": sum(bool(r["fast"]) for r in inside)}


def hook_breakdown(data_dir: Path, flows_path: Path, bodies: list[bytes], answers: Path, reps: int = 3) -> dict[str, float]:
    """ms per request, best of `reps` passes with the GC off: semula's four hooks on a hit, in this process,
    the no-op addon's hook, and the steps of a hit timed alone (public functions only)."""
    import contextlib

    from mitmproxy import http, io
    from mitmproxy.test import taddons, tflow

    from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
    from semula.core.decision import Decision
    from semula.proxy.addon import SemulaAddon
    from semula.proxy.call.answer import answer_response
    from semula.proxy.call.fastpath import FAST_PATH_ENTRIES

    with open(flows_path, "rb") as f:
        template = next(fl for fl in io.FlowReader(f).stream() if isinstance(fl, http.HTTPFlow))
    fields = [(k, HOST.encode() if k.lower() == b"host" else v) for k, v in template.request.headers.fields]

    def best(fn: Any) -> float:
        times = []
        for _ in range(reps):
            flows = [tflow.tflow(req=http.Request.make("POST", URL, b, http.Headers(list(fields)))) for b in bodies]
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                for fl in flows:
                    fn(fl)
                times.append(common.ms_since(t0) / len(flows))
            finally:
                gc.enable()
        return min(times)

    out: dict[str, float] = {}
    addon, loop = SemulaAddon(), asyncio.new_event_loop()
    with taddons.context(addon) as tctx, open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        tctx.configure(addon, semula_mode="replay", semula_data_dir=str(data_dir), semula_admin=False,
                       semula_recordings="off")
        try:
            loop.run_until_complete(addon.running())
            loop.run_until_complete(addon.parts.store.ensure_open())  # the store opens after the ready line
            common.join_rebuilds()
            cache = addon.parts.store.engine
            assert cache is not None, addon.parts.store.problem

            def hooks(fl: Any) -> None:
                addon.requestheaders(fl)
                loop.run_until_complete(addon.request(fl))
                addon.responseheaders(fl)
                loop.run_until_complete(addon.response(fl))
                if fl.response is None or fl.response.headers.get("x-semula-decision") != "hit":
                    raise RuntimeError("in-process hook run: not a hit")

            loop_ms = best(lambda fl: loop.run_until_complete(asyncio.sleep(0)))
            addon.parts.fast.max_entries = 0  # nothing remembered: every hit takes the canonical tiers
            out["semula hooks, canonical hit (parse, fingerprints, lookup)"] = best(hooks) - 2 * loop_ms
            addon.parts.fast.max_entries = FAST_PATH_ENTRIES
            best(hooks)  # the first pass remembers every request
            out["semula hooks, fast hit (raw-request fast path)"] = best(hooks) - 2 * loop_ms
            out.update(fast_hit_parts(addon, best, hooks))
            per_call = []  # the request hook alone, GC on: its own tail, without the network or other processes
            for fl in [tflow.tflow(req=http.Request.make("POST", URL, b, http.Headers(list(fields)))) for b in bodies]:
                addon.requestheaders(fl)
                t0 = time.perf_counter()
                loop.run_until_complete(addon.request(fl))
                per_call.append(common.ms_since(t0) - loop_ms / 2)
            out["fast hit: request hook per call, p50"] = pct(per_call, 50)
            out["fast hit: request hook per call, p99"] = pct(per_call, 99)
            settings = cache.settings_for(PROJECT)
            canon = {b: canonical(b) for b in bodies}
            fps = {b: (request_fingerprint(canon[b]), normalised_fingerprint(canon[b], *settings.fingerprint_inputs))
                   for b in bodies}
            body = lambda fl: fl.request.content  # noqa: E731
            out["canonical: adapter.canonicalise"] = best(lambda fl: canonical(body(fl)))
            out["canonical: request_fingerprint"] = best(lambda fl: request_fingerprint(canon[body(fl)]))
            out["canonical: normalised_fingerprint"] = best(
                lambda fl: normalised_fingerprint(canon[body(fl)], *settings.fingerprint_inputs))
            out["engine.match + engine.cached_entry"] = best(
                lambda fl: cache.cached_entry(cache.match(PROJECT, *fps[body(fl)]).entry_id))
            entries = {b: cache.cached_entry(cache.match(PROJECT, *fps[b]).entry_id) for b in bodies}
            hit = Decision("hit", "serve", tier="exact", entry_id=1, score=1.0)
            out["answer_response (the entry's headers prepared once)"] = best(
                lambda fl: answer_response(entries[body(fl)], hit))
            out["Response.make, headers encoded per hit (as the no-op does)"] = best(
                lambda fl: http.Response.make(200, entries[body(fl)].body, http.Headers(
                    [(k.encode(), v.encode()) for k, v in entries[body(fl)].headers])))
        finally:
            addon.done()
            loop.close()
    os.environ["SEMULA_BENCH_ANSWERS"] = str(answers)
    spec = importlib.util.spec_from_file_location("noop_addon", NOOP_ADDON)
    noop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noop)
    out["no-op addon request hook"] = best(noop.addons[0].request)
    return out


def fast_hit_parts(addon: Any, best: Any, hooks: Any) -> dict[str, float]:
    """The steps of a fast hit, timed inside one pass of the hooks (wrapped, so slightly inflated)."""
    import semula.proxy.call.call as call_module
    import semula.proxy.call.calllog as calllog_module

    timers = common.Timers()
    timers.wrap(addon.parts.fast, "find", "fast: FastPath.find (key digest, lookup, re-check on the index)")
    timers.wrap(call_module, "finish", "fast: finish (call-log row, flow comment, console line)")
    timers.wrap(calllog_module, "call_row", "fast:   call_row")
    timers.wrap(calllog_module, "flow_comment", "fast:   flow_comment")
    timers.wrap(calllog_module, "console_line", "fast:   console_line")
    timers.wrap(addon.parts.calls, "append", "fast:   call-log append (a queue put)")
    try:
        best(hooks)
    finally:
        timers.undo()
    return {name: ms / timers.calls[name] for name, ms in timers.take().items()}


def measure(args: argparse.Namespace, procs: common.Processes, work: Path) -> dict[str, Any]:
    confdir, data_dir = work / "confdir", work / "semula-data"
    ca = common.ensure_ca(confdir)
    all_bodies = [request_body(i) for i in range(args.entries)]
    step = args.entries // args.requests
    bench = [all_bodies[i * step] for i in range(args.requests)]
    t0 = time.perf_counter()
    flows, recorded = record_flows(procs, work, confdir, ca, bench, args.concurrency)
    record_s = time.perf_counter() - t0
    log(f"recorded {len(recorded)} answers in {record_s:.1f} s")
    answers = {b: (200, [("content-type", "application/json")], common.answer_body(i)) for i, b in enumerate(all_bodies)}
    answers.update({b: recorded[b] for b in bench})
    seed_s = seed(data_dir, all_bodies, answers, bench)
    log(f"seeded {args.entries} entries in {seed_s:.1f} s; every benchmark request is an exact hit")
    from semula.core.redact import clean_headers

    with open(work / "noop-answers.pickle", "wb") as f:  # what semula serves: clean headers, same body
        pickle.dump({b: (s, clean_headers(h), c) for b, (s, h, c) in ((b, answers[b]) for b in bench)}, f)
    expected = {b: recorded[b][2] for b in bench}
    runs = []
    for run in range(1, args.runs + 1):
        for variant in VARIANTS[run % 3:] + VARIANTS[:run % 3]:  # rotated: no variant always goes first
            for r in run_variant(procs, variant, run, work, confdir, ca, data_dir, flows, bench, expected,
                                 args.concurrency, args.warmup):
                log(f"run {run} {variant:<7} {r['pass']:<6} {r['rps']:6.0f} req/s  p50 {r['p50']:5.1f} ms  "
                    f"p99 {r['p99']:5.1f} ms  proxy CPU {r['proxy_cpu_ms']:.2f} ms/req  "
                    f"failures {r['failures']} {r['failure']}")
                runs.append(r)
    dms = {name: decision_ms(data_dir, [r["window"] for r in runs if r["variant"] == "semula" and r["pass"] == name])
           for name in PASSES}
    for r in runs:
        del r["window"]
    profile = None
    if args.py_spy:  # an extra, untimed semula run: sampling slows the proxy it watches
        raw = args.py_spy / "semula-proxy.raw.txt"
        run_variant(procs, "semula", 0, work, confdir, ca, data_dir, flows, bench, expected, args.concurrency,
                    args.warmup, profile=raw)
        profile = {"raw": str(raw), **pyspy.hot_functions(raw, args.py_spy_top)}
        log(f"py-spy: {profile['samples']} samples in {raw}")
    breakdown = None if args.no_breakdown else hook_breakdown(data_dir, flows, bench, work / "noop-answers.pickle")
    median: dict[str, dict[str, Any]] = {}
    for name in PASSES:
        for v in VARIANTS:
            mine = [r for r in runs if r["variant"] == v and r["pass"] == name]
            row = median[f"{v} {name}"] = {k: statistics.median(r[k] for r in mine)
                                           for k in ("rps", "p50", "p99", "proxy_cpu_ms", "client_cores")}
            row["failures"] = sum(r["failures"] for r in mine)
            row["spread"] = (max(r["rps"] for r in mine) - min(r["rps"] for r in mine)) / row["rps"]
            row["range"] = {k: [min(r[k] for r in mine), max(r[k] for r in mine)] for k in ("rps", "p99", "proxy_cpu_ms")}
    return {"params": {"requests": args.requests, "entries": args.entries, "concurrency": args.concurrency,
                       "runs": args.runs, "warmup": args.warmup, "body_bytes": round(statistics.fmean(map(len, bench)))},
            "timings": {"record_s": record_s, "seed_s": seed_s}, "runs": runs, "median": median,
            "decision_ms": dms, "ratios": round_ratios(runs), "profile": profile, "breakdown": breakdown, "load_after": common.loadavg()}


def round_ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """semula ÷ no-op and ÷ server-replay for req/s, CPU per request and p99, taken within each round
    (the variants ran back to back), then min / median / max over the rounds: steadier than a ratio of
    medians when the machine's speed drifts between rounds."""
    cell = {(r["variant"], r["pass"], r["run"]): r for r in runs}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in PASSES:
        for other in ("noop", "replay"):
            for key in ("rps", "proxy_cpu_ms", "p99"):
                values = [cell[("semula", name, run)][key] / cell[(other, name, run)][key]
                          for run in sorted({r["run"] for r in runs}) if (other, name, run) in cell]
                out.setdefault(name, {})[f"{key} semula/{other}"] = {
                    "min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (req/s varies up to 28%% between runs)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed requests per run (default 4×concurrency)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 requests, 1000 entries, 1 run")
    parser.add_argument("--out", type=Path, default=None, help="results markdown (default benchmark/results/replay.md)")
    parser.add_argument("--json", type=Path, default=None, help="figures (default: --out with .json)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (store, flows, proxy logs)")
    parser.add_argument("--no-breakdown", action="store_true", help="skip timing semula's hooks in-process")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="one more, untimed semula run under `py-spy record --format raw` (raw file in DIR); "
                             "the proxy's hot functions go into the results")
    parser.add_argument("--py-spy-top", type=int, default=25, help="rows of the hot-function table")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.entries, args.runs = 200, 1000, 1
    if args.requests > args.entries:
        parser.error("--requests must not exceed --entries (the requests are a subset of the entries)")
    args.warmup = min(4 * args.concurrency if args.warmup is None else args.warmup, args.requests)
    import httpx
    import mitmproxy.version

    info = common.machine(mitmproxy=mitmproxy.version.VERSION, httpx=httpx.__version__)

    def body(procs: common.Processes, work: Path) -> int:
        data = measure(args, procs, work)
        common.finish("replay", {"command": common.command("replay", argv),
                                 "machine": info, **data}, args.out, args.json, args.quick)
        return 1 if any(r["failures"] for r in data["runs"]) else 0

    return common.run_in_work_dir(body, "semula-bench-", args.keep, "stopping the proxies")
