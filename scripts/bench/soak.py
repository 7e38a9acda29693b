"""Soak: 64 clients of mixed load through one auto-mode proxy, then a replay check of every recording.

    .venv/bin/python scripts/bench.py soak                          # 10 minutes: writes benchmark/results/reliability.md
    .venv/bin/python scripts/bench.py soak --minutes 1 --max-warmup-minutes 1 --out /tmp/reliability.md

The load: new and repeated prompts (OpenAI chat, Anthropic, Gemini), streams, bursts of identical
requests sent at once, several projects, and seeded bad bodies (tests/support/fuzzbodies.py). Reported:
semula's own 5xx and internal errors on the console, call-log rows vs requests, duplicate upstream
calls (the fake's counter vs the forwarded requests; misses of one request more than once), the
proxy's RSS after start, after warm-up and at the end, and a replay proxy on the same data dir
answering each recorded request as a hit.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import RESULTS, machine  # puts tests/support (e2e_helpers, fuzzbodies) on the path
from e2e_helpers import read_call_log, ssl_context, start_fake_provider, start_proxy, stop_process
from fuzzbodies import ANTHROPIC, GEMINI, GEMINI_STREAM, OPENAI_CHAT, PROXY_TARGETS, Target, mutated_bodies

CLIENTS = 64
PROJECTS = ("soak-a", "soak-b", "soak-c", "soak-d")
FLAT = 1.05  # RSS is flat when the last third's median is at most 5 % above the first third's (see growth)
REPEATED = 24  # prompts in the shared pool that every client asks again and again
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-test-not-a-real-key",
           "x-api-key": "sk-ant-test-not-a-real-key", "anthropic-version": "2023-06-01"}


@dataclass
class Call:
    project: str
    kind: str
    target: Target
    body: bytes
    status: int  # -1: the connection failed
    decision: str | None
    seconds: float
    error: str = ""
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple[str, str, bytes]:
        return self.project, self.target.path, self.body


def body_for(target: Target, text: str, stream: bool) -> tuple[Target, bytes]:
    if target is ANTHROPIC:
        body = {"model": "claude-3-5-haiku-latest", "max_tokens": 64, "stream": stream,
                "messages": [{"role": "user", "content": text}]}
    elif target is GEMINI:
        target = GEMINI_STREAM if stream else GEMINI
        body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    else:
        body = {"model": "gpt-4o-mini", "stream": stream, "messages": [{"role": "user", "content": text}]}
    return target, json.dumps(body).encode()


def rss_mb(pid: int) -> float:
    """Resident memory of the proxy process and its children, in MB."""
    def one(p: int) -> int:
        try:
            line = next(ln for ln in Path(f"/proc/{p}/status").read_text().splitlines() if ln.startswith("VmRSS:"))
            return int(line.split()[1])
        except (OSError, StopIteration):
            return 0

    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(x) for x in children.read_text().split()] if children.exists() else []
    return (one(pid) + sum(one(k) for k in kids)) / 1024


class Load:
    """The clients' shared state: the deadline, the bad bodies, the burst prompt of the moment, the calls."""

    def __init__(self, seed: int, deadline: float) -> None:
        self.seed = seed
        self.deadline = deadline
        self.calls: list[Call] = []
        self.lock = threading.Lock()
        self.bad = iter(mutated_bodies(seed, 10**9, PROXY_TARGETS, huge=False))
        self.run = f"{seed}-{os.getpid()}"

    def next_bad(self) -> tuple[Target, bytes]:
        with self.lock:
            _, target, _, body = next(self.bad)
        return target, body

    def plan(self, rng: random.Random, client: int, n: int) -> tuple[str, Target, bytes, dict[str, str]]:
        target = rng.choice((OPENAI_CHAT, OPENAI_CHAT, ANTHROPIC, GEMINI))
        stream = rng.random() < 0.3
        roll = rng.random()
        if roll < 0.35:
            kind, text = "new", f"soak new question {self.run} client {client} number {n}"
        elif roll < 0.80:
            kind, text = "repeat", f"soak repeated question {self.run} number {rng.randrange(REPEATED)}"
        elif roll < 0.92:
            # Every client that rolls this within one 3-second window asks the same thing at about the same time;
            # SLOW keeps the first upstream call open for 0.5 s, so the others overlap it.
            kind, text = "burst", f"SLOW soak burst {self.run} window {int(time.monotonic() // 3)}"
            target, stream = OPENAI_CHAT, False
        else:
            target, body = self.next_bad()
            return "bad", target, body, {"content-encoding": "gzip"} if body[:2] == b"\x1f\x8b" else {}
        target, body = body_for(target, text, stream)
        return kind, target, body, {}


def client_loop(load: Load, proxy_port: int, ca: Path, client: int) -> None:
    rng = random.Random(load.seed * 1000 + client)
    project = PROJECTS[client % len(PROJECTS)]
    proxy = f"http://{project}@127.0.0.1:{proxy_port}"
    with httpx.Client(proxy=proxy, verify=ssl_context(ca), trust_env=False, timeout=60) as http:
        n = 0
        while time.monotonic() < load.deadline:
            kind, target, body, extra = load.plan(rng, client, n)
            n += 1
            started = time.monotonic()
            try:
                r = http.post(target.url, content=body, headers={**HEADERS, **extra})
                call = Call(project, kind, target, body, r.status_code, r.headers.get("x-semula-decision"),
                            time.monotonic() - started, " ".join(r.text[:200].split()) if r.status_code >= 500 else "", tuple(extra.items()))
            except httpx.HTTPError as e:
                call = Call(project, kind, target, body, -1, None, time.monotonic() - started, repr(e)[:200], tuple(extra.items()))
            with load.lock:
                load.calls.append(call)


def replay_check(calls: list[Call], data_dir: Path, confdir: Path, dead_port: int) -> dict[str, object]:
    """A replay proxy (provider gone) on the same data dir must answer every recorded request as a hit."""
    recorded = {c.key: c for c in calls if c.decision == "miss" and 200 <= c.status < 300}
    proxy = start_proxy(mode="replay", data_dir=data_dir, confdir=confdir, upstream_port=dead_port)
    outcomes: Counter[str] = Counter()
    misses: list[str] = []
    lock = threading.Lock()
    items = list(recorded.values())

    def worker(part: list[Call]) -> None:
        with httpx.Client(proxy=f"http://{part[0].project}@127.0.0.1:{proxy.port}" if part else None,
                          verify=ssl_context(proxy.ca_path), trust_env=False, timeout=60) as http:
            for c in part:
                try:
                    r = http.post(c.target.url, content=c.body, headers={**HEADERS, **dict(c.extra)})
                    got = f"{r.status_code} {r.headers.get('x-semula-decision')}"
                except httpx.HTTPError as e:
                    got = f"error {type(e).__name__}"
                with lock:
                    outcomes[got] += 1
                    if got != "200 hit" and len(misses) < 10:
                        misses.append(f"{c.project} {c.target.name} {c.body[:80]!r}: {got}")

    by_project: dict[str, list[Call]] = {}
    for c in items:
        by_project.setdefault(c.project, []).append(c)
    threads = [threading.Thread(target=worker, args=(part[i::4],)) for part in by_project.values() for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proxy.stop()
    internal = [ln for ln in proxy.output().splitlines() if "internal error" in ln.lower() or "Traceback" in ln]
    return {"recorded requests": len(items), "answered as hits": outcomes.get("200 hit", 0),
            "outcomes": dict(outcomes), "examples of failures": misses, "internal errors (replay console)": internal[:10]}


def main(argv: list[str] | None = None) -> int:
    os.environ["SEMULA_RECORDINGS"] = "off"  # as the tests: no recordings folder in the working directory
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recordings", type=int, default=20_000,
                        help="recordings already in the store at start, as a team's store holds (its caches then "
                             "start at their budgets, so RSS after warm-up is the steady state)")
    parser.add_argument("--max-warmup-minutes", type=float, default=15,
                        help="warm-up lasts until the answer cache has turned over once, at most this long")
    parser.add_argument("--out", type=Path, default=RESULTS / "reliability.md")
    args = parser.parse_args(argv)
    from e2e_helpers import closed_port

    facts = machine(clients=str(args.clients), minutes=f"{args.minutes:g}", seed=str(args.seed),
                    recordings_at_start=str(args.recordings))
    with tempfile.TemporaryDirectory(prefix="semula-soak-") as tmp_name:
        tmp = Path(tmp_name)
        fake = start_fake_provider(tmp / "fakecerts")
        confdir, data_dir = tmp / "mitmconf", tmp / "data" / "semula-data"
        confdir.mkdir()
        data_dir.mkdir(parents=True)
        if args.recordings:
            from bench import common
            from bench.concurrent import seed

            seconds = seed(data_dir, common.workload(args.recordings)[2])
            print(f"soak: {args.recordings} recordings seeded in {seconds:.0f} s", flush=True)
        try:
            proxy = start_proxy(mode="auto", data_dir=data_dir, confdir=confdir, upstream_port=fake.port)
            rss = {"after start": rss_mb(proxy.proc.pid)}
            fake_before = fake.count()
            started = time.monotonic()
            duration = args.minutes * 60
            load = Load(args.seed, started + args.max_warmup_minutes * 60 + duration)
            threads = [threading.Thread(target=client_loop, args=(load, proxy.port, proxy.ca_path, i), daemon=True)
                       for i in range(args.clients)]
            for t in threads:
                t.start()
            warm_up(load, data_dir, started, min(30.0, duration / 4), args.max_warmup_minutes * 60)
            load.deadline = time.monotonic() + duration  # the measured load starts now
            rss["after warm-up"] = rss_mb(proxy.proc.pid)
            warmed = time.monotonic() - started
            timeline = sample_rss(load, proxy.proc.pid, data_dir, started, every=max(duration / 60, 5.0))
            rss["warm-up s"] = round(warmed)
            for t in threads:
                t.join()
            elapsed = time.monotonic() - started
            rss["at the end"] = rss_mb(proxy.proc.pid)
            upstream = fake.count() - fake_before
            proxy.stop()
            output = proxy.output()
            rows = read_call_log(data_dir)
            replay = replay_check(load.calls, data_dir, confdir, closed_port())
        finally:
            stop_process(fake.proc)
    report = summarise(load.calls, rows, output, upstream, rss, replay, elapsed)
    report["RSS over time"] = timeline
    report["RSS growth after warm-up"] = trend = growth(timeline)
    if not trend.get("flat"):
        report["verdict"] = "FAIL"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(facts, report), encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps({"machine": facts, **report}, indent=1, default=str) + "\n")
    print(args.out.read_text())
    return 0 if report["verdict"] == "pass" else 1


def recorded(load: Load) -> int:
    """The distinct requests the load has had recorded so far."""
    with load.lock:
        return len({c.key for c in load.calls if c.decision == "miss" and 200 <= c.status < 300})


def warm_up(load: Load, data_dir: Path, started: float, at_least: float, at_most: float) -> None:
    """Until the answer cache has turned over once: the load has recorded as many requests as the cache
    holds. Before that, RSS rises while the cache's preloaded entries give way to recorded ones, which
    hold more objects per counted byte (in-process, 20k seeded entries then 8k new at a time: RSS 456 ->
    480 -> 508 -> 502 -> 512 MB), and says nothing about a leak."""
    from semula.admin.client import call
    from semula.admin.protocol import AdminError, NoProxy

    while time.monotonic() - started < at_most:
        time.sleep(5.0)
        try:
            cached = call(data_dir, "memory", timeout=30)["answer_cache_entries"]
        except (AdminError, NoProxy, KeyError):
            continue
        if time.monotonic() - started >= at_least and recorded(load) >= cached:
            return
    print(f"soak: the answer cache had not turned over after {at_most:.0f} s: measuring from here", flush=True)


def held_mb(data_dir: Path) -> dict[str, float]:
    """What the proxy says it holds (admin operation `memory`), in MB."""
    from semula.admin.client import call
    from semula.admin.protocol import AdminError, NoProxy

    try:
        held = call(data_dir, "memory", timeout=30)
    except (AdminError, NoProxy) as e:
        print(f"soak: memory figures unavailable: {e}", flush=True)
        return {}
    return {"answers_mb": round(held["answer_cache_bytes"] / 2**20, 1), "lexical_mb": round(held["lexical_bytes"] / 2**20, 1),
            "duckdb_mb": round((held["store_bytes"] or 0) / 2**20, 1),
            "index_mb": round((held["fingerprint_bytes"] + held["fast_path_bytes"]) / 2**20, 1),
            "fingerprints": held["fingerprints"], "fast_path_entries": held["fast_path_entries"]}


def sample_rss(load: Load, pid: int, data_dir: Path, started: float, every: float) -> list[dict[str, float]]:
    """RSS every `every` seconds until the load ends, with the requests and recordings so far, and what
    the proxy counts it holds."""
    samples = []
    while time.monotonic() < load.deadline:
        time.sleep(min(every, max(load.deadline - time.monotonic(), 0.1)))
        with load.lock:
            requests = len(load.calls)
            recordings = len({c.key for c in load.calls if c.decision == "miss" and 200 <= c.status < 300})
        samples.append({"s": round(time.monotonic() - started), "rss_mb": round(rss_mb(pid), 1),
                        "requests": requests, "recordings": recordings, **held_mb(data_dir)})
    return samples


def growth(timeline: list[dict[str, float]]) -> dict[str, float | bool]:
    """From the first sample after warm-up to the last: MB in all, per 1,000 requests, per 1,000 recordings;
    and the trend: the median RSS of the last third of the samples against that of the first third. RSS
    swings with what is in flight (tens of MB either way), so single samples can't say flat; the medians
    can. The store grows under this load (a third of the requests are new prompts), and with it what the
    proxy counts it holds (DuckDB within its memory limit, the postings, the answer cache within its budget,
    the fingerprint index, and the fast path's map filling up to its bound):
    flat means the last third's median is within 5 % of the first third's plus that counted growth, so that
    what nothing counts (a leak, fragmentation) has not grown."""
    if len(timeline) < 3:
        return {}
    first, last = timeline[0], timeline[-1]
    mb = last["rss_mb"] - first["rss_mb"]
    requests, recordings = last["requests"] - first["requests"], last["recordings"] - first["recordings"]
    third = len(timeline) // 3

    def medians(key: Callable[[dict[str, float]], float]) -> tuple[float, float]:
        early, late = (statistics.median(key(r) for r in part) for part in (timeline[:third], timeline[-third:]))
        return early, late

    early, late = medians(lambda r: r["rss_mb"])
    counted_early, counted_late = medians(counted_mb)
    return {"MB": round(mb, 1), "MB per 1000 requests": round(1000 * mb / max(requests, 1), 2),
            "MB per 1000 new recordings": round(1000 * mb / max(recordings, 1), 2),
            "median MB, first third": round(early, 1), "median MB, last third": round(late, 1),
            "counted MB (median), first third": round(counted_early, 1),
            "counted MB (median), last third": round(counted_late, 1),
            "uncounted MB (median), first third": round(early - counted_early, 1),
            "uncounted MB (median), last third": round(late - counted_late, 1),
            "flat": late <= early * FLAT + max(counted_late - counted_early, 0.0)}


def counted_mb(sample: dict[str, float]) -> float:
    """What the proxy counts it holds at a sample (admin operation `memory`), in MB."""
    return sum(sample.get(key, 0.0) for key in ("answers_mb", "lexical_mb", "duckdb_mb", "index_mb"))


def summarise(calls: list[Call], rows: list[dict], output: str, upstream: int, rss: dict[str, float],
              replay: dict[str, object], elapsed: float) -> dict[str, object]:
    answered = [c for c in calls if c.status > 0]
    # The fake provider answers a body it cannot read 400, as real ones do: every 5xx is a failure.
    any_5xx = [c for c in answered if c.status >= 500]
    forwarded = [c for c in answered if c.decision in ("miss", "bypass", "error", "passthrough")]
    miss_keys = Counter(c.key for c in answered if c.decision == "miss")
    duplicates = sum(n - 1 for n in miss_keys.values() if n > 1)
    internal = [ln for ln in output.splitlines() if "internal error" in ln.lower() or "Traceback" in ln]
    bursts = Counter(c.key for c in answered if c.kind == "burst")
    burst_misses = sum(1 for c in answered if c.kind == "burst" and c.decision == "miss")
    report: dict[str, object] = {
        "requests": len(calls), "requests per second": round(len(calls) / elapsed, 1),
        "by kind": dict(Counter(c.kind for c in calls)),
        "statuses": dict(sorted(Counter(c.status for c in calls).items())),
        "decisions": dict(Counter(str(c.decision) for c in calls)),
        "connection failures": sum(1 for c in calls if c.status < 0),
        "5xx": len(any_5xx),
        "examples of 5xx / failures": [f"{c.kind} {c.target.name} {c.status}: {c.error}"
                                       for c in calls if c.status < 0 or c in any_5xx][:10],
        "internal errors in the console": len(internal), "console examples": internal[:10],
        "call-log rows": len(rows), "answered requests": len(answered),
        "upstream calls (fake counter)": upstream, "forwarded requests (miss/bypass/error)": len(forwarded),
        "duplicate upstream calls (fake - forwarded)": upstream - len(forwarded),
        "requests missed more than once": duplicates,
        "identical-concurrent bursts": len(bursts), "burst requests": sum(bursts.values()),
        "burst misses (ideally one a burst)": burst_misses,
        "RSS MB": {k: round(v, 1) for k, v in rss.items()},
        "latency p50/p99 s": [round(x, 3) for x in pctl([c.seconds for c in answered])],
        "replay": replay,
    }
    ok = (not any_5xx and not internal and len(rows) == len(answered) and not report["connection failures"]
          and upstream == len(forwarded) and duplicates == 0 and burst_misses <= len(bursts)
          and replay["answered as hits"] == replay["recorded requests"] and not replay["internal errors (replay console)"])
    report["verdict"] = "pass" if ok else "FAIL"
    return report


def pctl(values: list[float]) -> tuple[float, float]:
    if not values:
        return (float("nan"), float("nan"))
    s = sorted(values)
    return s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.99))]


def render(facts: dict[str, str], report: dict[str, object]) -> str:
    lines = ["# Reliability soak", "",
             "`scripts/bench.py soak`: 64 clients of mixed load (new and repeated prompts, streams, bursts of identical",
             "requests, four projects, seeded bad bodies) through one auto-mode proxy in front of the fake provider,",
             "then a replay proxy on the same data dir asked every recorded request.", "",
             f"**Verdict: {report['verdict']}**", "", "## Figures", "", "| | |", "|---|---|"]
    for key, value in report.items():
        if key in ("replay", "verdict", "RSS over time") or key.startswith("examples") or key == "console examples":
            continue
        lines.append(f"| {key} | {value} |")
    lines += ["", "## RSS over time (after warm-up)", "",
              "The proxy's RSS every 1/60 of the run, with the requests and the distinct recordings made so far:",
              "per-flow state is released when a flow ends (tests/reliability/test_per_flow_state.py); the store",
              "starts with the recordings of `--recordings`, and warm-up lasts until the load has recorded as many",
              "requests as the answer cache holds (64 MB, counted whole), so that every cached answer is one the",
              "load recorded; DuckDB (memory_limit 512 MB, far above what it holds here) is then near its steady",
              "state too, though it grows with the store. What grows per recording is the fingerprint index",
              "(~0.23 KB), the full-text postings, and, up to 32,768 entries, the fast path's map (~0.45 KB an",
              "entry: every new recording's repeats are fast hits). The proxy caps",
              "glibc's malloc arenas at 2 and trims the heap every 30 s (`semula.proxy.run.malloc`). RSS swings with",
              "what is in flight, so flat is judged on medians: the last third's within 5 % of the first third's",
              "plus the growth of what the proxy counts it holds (the store grows by the new recordings).",
              "The last six columns are what the proxy counts it holds (admin operation `memory`).", "",
              "| s | RSS MB | requests | new recordings | answer cache MB | postings MB | DuckDB MB | "
              "index + fast path MB | fingerprints | fast path entries |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['s']} | {r['rss_mb']} | {r['requests']} | {r['recordings']} | {r.get('answers_mb', '-')} | "
              f"{r.get('lexical_mb', '-')} | {r.get('duckdb_mb', '-')} | {r.get('index_mb', '-')} | "
              f"{r.get('fingerprints', '-')} | {r.get('fast_path_entries', '-')} |"
              for r in report["RSS over time"]]  # type: ignore[union-attr]
    lines += ["", "## Replay check", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in report["replay"].items()]  # type: ignore[union-attr]
    for title, key in (("Examples of 5xx / failures", "examples of 5xx / failures"),
                       ("Internal errors on the console", "console examples")):
        if report.get(key):
            lines += ["", f"## {title}", "", "```", *map(str, report[key]), "```"]  # type: ignore[arg-type]
    lines += ["", "## Machine", "", "| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in facts.items()], ""]
    return "\n".join(lines)
