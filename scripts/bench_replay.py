#!/usr/bin/env python3
"""Replay throughput of semula's exact-hit path against what mitmproxy itself allows.

Three variants answer the same N distinct requests (POST https://api.openai.com/v1/chat/completions)
through mitmdump, driven by concurrent keep-alive clients (asyncio + httpx through the proxy):

  semula   `semula proxy --mode replay` with a store of E entries (the N requests are a subset)
  noop     mitmdump -s scripts/bench_noop_addon.py: a dict body bytes -> answer bytes, answered in
           the `request` hook (the ceiling for an addon that answers from memory)
  replay   mitmdump --server-replay flows --set server_replay_reuse=true (mitmproxy's own replay of
           the same answers, recorded once through map_remote to tests/fakeprovider.py)

All three run with flow_detail=0, connection_strategy=lazy and the same allow_hosts, one proxy
process per run, interleaved (semula noop replay, semula noop replay, ...); the report gives the
median of the runs. Nothing goes upstream during the runs (semula in replay mode, the no-op addon
and server_replay_extra answer 404 for anything unknown), and every answer is checked (status,
body; for semula also x-semula-decision: hit, x-semula-tier: exact).

    .venv/bin/python scripts/bench_replay.py                 # full run (2000 req, 10000 entries, 3 runs)
    .venv/bin/python scripts/bench_replay.py --quick         # smoke run (200 req, 1000 entries, 1 run)

This is a script, not a test: it writes benchmark/results/replay.md (--out) and never asserts targets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import pickle
import platform
import random
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "addon"))

import httpx  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from semula.core.canonical import normalised_fingerprint, request_fingerprint  # noqa: E402
from semula.core.normalise import scrub_volatile  # noqa: E402
from semula.providers import DEFAULT_PROVIDER_HOSTS, adapter_for, allow_hosts_regexes  # noqa: E402
from semula.providers.base import RawRequest  # noqa: E402
from semula.core.redact import clean_headers, redact_bytes, redact_text  # noqa: E402
from semula.core.settings import ProjectSettings  # noqa: E402
from semula.store.duckdb_store import Store  # noqa: E402

HOST = "api.openai.com"
PATH = "/v1/chat/completions"
URL = f"https://{HOST}{PATH}"
PROJECT = "default"
VARIANTS = ("semula", "noop", "replay")
TITLES = {
    "semula": "semula (exact hits)",
    "noop": "no-op addon (dict from memory)",
    "replay": "mitmproxy --server-replay",
}
FAKEPROVIDER = REPO / "tests" / "fakeprovider.py"
NOOP_ADDON = REPO / "scripts" / "bench_noop_addon.py"
CLIENT_HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench-not-a-real-key"}
SYSTEM_PROMPT = (
    "You are a careful assistant for the semula replay benchmark. Answer in one short paragraph, "
    "cite no sources, and never invent numbers you were not given."
)
WORDS = (
    "proxy replay record cache answer token stream model prompt request latency budget test suite "
    "fixture deterministic network provider fingerprint canonical normalise exact tier hit miss "
    "recording entry project namespace header body json schema parquet duckdb mitmproxy addon client"
).split()

console = Console(highlight=False)


# --- processes -----------------------------------------------------------------------------


class Processes:
    """Every child this script starts, so that all of them are stopped on any exit."""

    def __init__(self) -> None:
        self.live: list[subprocess.Popen] = []

    def start(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
            env={**os.environ, **(env or {})}, start_new_session=True,  # our Ctrl-C is ours to forward
        )
        proc._bench_log = log  # type: ignore[attr-defined]
        self.live.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen, timeout: float = 30.0) -> int | None:
        """SIGINT first (mitmproxy runs its `done` hooks: semula flushes the call log), then kill."""
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            except ProcessLookupError:
                pass
        proc._bench_log.close()  # type: ignore[attr-defined]
        if proc in self.live:
            self.live.remove(proc)
        return proc.returncode

    def stop_all(self) -> None:
        for proc in list(self.live):
            self.stop(proc, timeout=10.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_ready(proc: subprocess.Popen, log_path: Path, marker: str | None, port: int | None,
               timeout: float = 90.0) -> str:
    """Wait until `marker` appears in the child's output (or, without a marker, the port accepts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if marker is not None:
            for line in text.splitlines():
                if marker in line:
                    return line
        elif port is not None and port_open(port):
            return f"listening on {port}"
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:4]} exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.05)
    raise RuntimeError(f"{proc.args[:4]} not ready after {timeout:.0f} s:\n{log_path.read_text(errors='replace')[-3000:]}")


def wait_idle(pid: int, timeout: float = 60.0, window: float = 0.5, busy: float = 0.10) -> float:
    """Wait until the process has used under `busy` cores for two windows in a row (start-up work
    such as index builds done); return how long that took."""
    started = time.monotonic()
    quiet = 0
    while time.monotonic() - started < timeout and quiet < 2:
        before = cpu_seconds(pid)
        time.sleep(window)
        quiet = quiet + 1 if (cpu_seconds(pid) - before) / window < busy else 0
    return time.monotonic() - started


def join_background_threads(before: set[threading.Thread], timeout: float = 60.0) -> None:
    """Let one-off threads a semula object started (e.g. the full-text index build) finish."""
    deadline = time.monotonic() + timeout
    for thread in set(threading.enumerate()) - before:
        if "rebuild" in thread.name:
            thread.join(max(0.0, deadline - time.monotonic()))


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def common_proxy_args(port: int, confdir: Path) -> list[str]:
    """What every mitmdump gets: semula proxy sets the same (lazy, flow_detail=0, allow_hosts)."""
    args = ["--listen-host", "127.0.0.1", "--listen-port", str(port),
            "--set", f"confdir={confdir}", "--set", "connection_strategy=lazy", "--set", "flow_detail=0"]
    for regex in allow_hosts_regexes(DEFAULT_PROVIDER_HOSTS):
        args += ["--set", f"allow_hosts={regex}"]
    return args


def ensure_ca(confdir: Path) -> Path:
    """mitmproxy's CA in `confdir`, created the way mitmproxy creates it (as `semula env` does)."""
    from mitmproxy.certs import CertStore

    ca = confdir / "mitmproxy-ca-cert.pem"
    if not ca.exists():
        confdir.mkdir(parents=True, exist_ok=True)
        CertStore.from_store(str(confdir), "mitmproxy", 2048)
    return ca


# --- the synthetic workload ----------------------------------------------------------------


def request_body(i: int) -> bytes:
    rng = random.Random(i)
    question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 60)))
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Question {i}: {question}?"},
        ],
        "temperature": 0,
        "max_tokens": 256,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def synthetic_answer(i: int) -> tuple[int, list[tuple[str, str]], bytes]:
    """An answer shaped like the fake provider's (for the entries no benchmark request asks for)."""
    text = f"fake answer #{i} to: Question {i}"
    body = {
        "id": f"chatcmpl-seed{i:06d}", "created": 1_700_000_000 + i, "model": "gpt-4o-mini",
        "system_fingerprint": "fp_fake", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 60, "completion_tokens": 7, "total_tokens": 67},
    }
    headers = [("content-type", "application/json"), ("x-request-id", f"req_seed{i:06d}")]
    return 200, headers, json.dumps(body).encode()


def raw_request(body: bytes) -> RawRequest:
    # What the addon builds from the flow (headers lowercased; only behaviour headers matter).
    return RawRequest(method="POST", host=HOST, path=PATH, query=(),
                      headers={k.lower(): v for k, v in CLIENT_HEADERS.items()}, body=body)


def seed_store(data_dir: Path, bodies: list[bytes], answers: dict[bytes, tuple[int, list[tuple[str, str]], bytes]]) -> float:
    """Write one entry per body with semula's own canonicalisation and fingerprints.

    `Cache.record` costs ~11 ms a row here (a DuckDB transaction, then a read-back), so the
    rows go in as one bulk INSERT with exactly the values `Store.upsert_entry` writes; the
    caller then checks that the proxy serves them as exact hits.
    """
    import pyarrow as pa

    started = time.perf_counter()
    adapter = adapter_for(HOST, PATH)
    settings = ProjectSettings()
    now = datetime.now(UTC).replace(tzinfo=None)
    cols: dict[str, list[Any]] = {name: [] for name in (
        "project", "request_fp", "provider", "host", "method", "endpoint", "model", "normalised_fp",
        "canonical", "last_text", "status", "headers", "body", "streamed", "prompt_tokens",
        "completion_tokens", "upstream_ms", "created_at", "updated_at")}
    for i, body in enumerate(bodies):
        canonical = adapter.canonicalise(raw_request(body))
        status, headers, content = answers[body]
        usage = adapter.usage_from_body(content)
        row = {
            "project": PROJECT, "request_fp": request_fingerprint(canonical), "provider": canonical.provider,
            "host": HOST, "method": canonical.method, "endpoint": canonical.endpoint, "model": canonical.model,
            "normalised_fp": normalised_fingerprint(canonical, *settings.fingerprint_inputs),
            "canonical": json.dumps(canonical.to_json(), ensure_ascii=False),
            "last_text": redact_text(scrub_volatile(canonical.last_text(), settings.scrub_patterns)),
            "status": status, "headers": json.dumps(clean_headers(headers), ensure_ascii=False),
            "body": redact_bytes(content), "streamed": False, "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens, "upstream_ms": 250.0 + i % 100,
            "created_at": now, "updated_at": now,
        }
        for name, value in row.items():
            cols[name].append(value)
    table = pa.table({
        **{k: pa.array(v, pa.string()) for k, v in cols.items()
           if k not in ("status", "body", "streamed", "prompt_tokens", "completion_tokens", "upstream_ms",
                        "created_at", "updated_at")},
        "status": pa.array(cols["status"], pa.int32()),
        "body": pa.array(cols["body"], pa.binary()),
        "streamed": pa.array(cols["streamed"], pa.bool_()),
        "prompt_tokens": pa.array(cols["prompt_tokens"], pa.int64()),
        "completion_tokens": pa.array(cols["completion_tokens"], pa.int64()),
        "upstream_ms": pa.array(cols["upstream_ms"], pa.float64()),
        "created_at": pa.array(cols["created_at"], pa.timestamp("us")),
        "updated_at": pa.array(cols["updated_at"], pa.timestamp("us")),
    })
    store = Store.open(data_dir)
    try:
        names = ", ".join(cols)
        store.con.register("bench_seed", table)
        with store.transaction() as con:
            con.execute(f"INSERT INTO entries ({names}) SELECT {names} FROM bench_seed")
        store.con.unregister("bench_seed")
        count = store.con.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        store.close()
    if count != len(bodies):
        raise RuntimeError(f"seeded {count} entries, expected {len(bodies)}")
    return time.perf_counter() - started


def verify_store(data_dir: Path, bench_bodies: list[bytes], expected: dict[bytes, bytes]) -> None:
    """Every benchmark request must be an exact hit in semula's own index, with the right answer."""
    from semula.engine.cache import Cache

    threads = set(threading.enumerate())
    cache = Cache(Store.open(data_dir))
    try:
        adapter = adapter_for(HOST, PATH)
        settings = cache.settings_for(PROJECT)
        for body in bench_bodies:
            canonical = adapter.canonicalise(raw_request(body))
            match = cache.match(PROJECT, request_fingerprint(canonical),
                                normalised_fingerprint(canonical, *settings.fingerprint_inputs))
            if match is None or match.tier != "exact":
                raise RuntimeError(f"seeded request is not an exact hit: {match}")
            entry = cache.entry(match.entry_id)
            if entry is None or entry.body != expected[body]:
                raise RuntimeError(f"seeded entry {match.entry_id} does not hold the recorded answer")
    finally:
        join_background_threads(threads)
        cache.store.close()


# --- the client ----------------------------------------------------------------------------


@dataclass
class RunResult:
    variant: str
    run: int
    requests: int
    wall_s: float
    latencies_ms: list[float]
    failures: int
    failure_example: str | None
    proxy_cpu_s: float
    client_cpu_s: float
    window: tuple[datetime, datetime]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.requests / self.wall_s

    @property
    def p50(self) -> float:
        return percentile(self.latencies_ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 99)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def drive(port: int, ca: Path, bodies: list[bytes], expected: dict[bytes, bytes], concurrency: int,
                semula: bool, warmup: int) -> tuple[float, list[float], int, str | None, float, tuple[datetime, datetime], int]:
    """Warm the connections, then send every body once from `concurrency` workers; time each call."""
    context = ssl.create_default_context(cafile=str(ca))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    failures = 0
    example: list[str] = []

    async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", verify=context, limits=limits,
                                 timeout=60.0, headers=CLIENT_HEADERS) as client:

        async def worker(queue: list[bytes], record: bool) -> None:
            nonlocal failures
            while queue:
                body = queue.pop()
                t0 = time.perf_counter()
                try:
                    response = await client.post(URL, content=body)
                except httpx.HTTPError as e:
                    failures += 1
                    example.append(f"{type(e).__name__}: {e}")
                    continue
                took = time.perf_counter() - t0
                if record:
                    latencies.append(took * 1000)
                ok = response.status_code == 200 and response.content == expected[body]
                if ok and semula:
                    ok = (response.headers.get("x-semula-decision") == "hit"
                          and response.headers.get("x-semula-tier") == "exact")
                if not ok:
                    failures += 1
                    example.append(f"{response.status_code} {dict(response.headers)} {response.content[:200]!r}")

        warm = list(reversed(bodies[:warmup]))
        await asyncio.gather(*(worker(warm, False) for _ in range(concurrency)))
        warm_failures = failures
        failures = 0
        queue = list(reversed(bodies))
        cpu0 = time.process_time()
        begin = datetime.now(UTC)
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(queue, True) for _ in range(concurrency)))
        wall = time.perf_counter() - t0
        end = datetime.now(UTC)
        client_cpu = time.process_time() - cpu0
    return wall, latencies, failures, (example[0] if example else None), client_cpu, (begin, end), warm_failures


# --- the phases ----------------------------------------------------------------------------


def record_flows(procs: Processes, work: Path, confdir: Path, ca: Path, bench_bodies: list[bytes],
                 concurrency: int) -> tuple[Path, dict[bytes, tuple[int, list[tuple[str, str]], bytes]]]:
    """Record the benchmark requests once through mitmdump -w + map_remote to the fake provider."""
    from mitmproxy import http, io

    fake_log = work / "fakeprovider.log"
    fake = procs.start([sys.executable, str(FAKEPROVIDER), "--port", "0", "--cert-dir", str(work / "fakecerts")], fake_log)
    line = wait_ready(fake, fake_log, "fakeprovider ready port=", None)
    fake_port = int(line.rsplit("=", 1)[1])
    flows = work / "flows.mitm"
    port = free_port()
    rec_log = work / "record-proxy.log"
    rec = procs.start([
        str(Path(sys.executable).parent / "mitmdump"), *common_proxy_args(port, confdir),
        "-w", str(flows), "--set", "ssl_insecure=true",
        "--set", f"map_remote=|//{HOST}/|//127.0.0.1:{fake_port}/",
    ], rec_log)
    try:
        wait_ready(rec, rec_log, None, port)
        # No expected answers yet: only the status is checked while recording.
        failures, example = asyncio.run(_record_drive(port, ca, bench_bodies, concurrency))
        if failures:
            raise RuntimeError(f"recording: {failures} requests failed, e.g. {example}")
    finally:
        procs.stop(rec)
        procs.stop(fake)
    answers: dict[bytes, tuple[int, list[tuple[str, str]], bytes]] = {}
    with open(flows, "rb") as f:
        for flow in io.FlowReader(f).stream():
            if isinstance(flow, http.HTTPFlow) and flow.response is not None:
                r = flow.response
                answers[flow.request.get_content(strict=False) or b""] = (
                    r.status_code, list(r.headers.items()), r.get_content(strict=False) or b"")
    missing = [b for b in bench_bodies if b not in answers or answers[b][0] != 200]
    if missing:
        raise RuntimeError(f"{len(missing)} benchmark requests were not recorded with a 200")
    return flows, answers


async def _record_drive(port: int, ca: Path, bodies: list[bytes], concurrency: int) -> tuple[int, str | None]:
    context = ssl.create_default_context(cafile=str(ca))
    failures = 0
    example: str | None = None
    async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", verify=context, timeout=60.0,
                                 headers=CLIENT_HEADERS,
                                 limits=httpx.Limits(max_connections=concurrency)) as client:
        queue = list(reversed(bodies))

        async def worker() -> None:
            nonlocal failures, example
            while queue:
                body = queue.pop()
                try:
                    r = await client.post(URL, content=body)
                    if r.status_code != 200:
                        failures += 1
                        example = example or f"{r.status_code} {r.text[:200]}"
                except httpx.HTTPError as e:
                    failures += 1
                    example = example or repr(e)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failures, example


def variant_argv(variant: str, port: int, confdir: Path, data_dir: Path, flows: Path) -> tuple[list[str], str | None]:
    """The command line of one variant and the output line that says it is ready."""
    if variant == "semula":
        # semula proxy itself adds connection_strategy=lazy, flow_detail=0 and allow_hosts.
        return [sys.executable, "-m", "semula", "proxy", "--mode", "replay", "--listen-host", "127.0.0.1",
                "--listen-port", str(port), "--data-dir", str(data_dir), "--set", f"confdir={confdir}"], "semula ready:"
    mitmdump = str(Path(sys.executable).parent / "mitmdump")
    if variant == "noop":
        return [mitmdump, *common_proxy_args(port, confdir), "-s", str(NOOP_ADDON)], None
    # Recorded through map_remote, the flows name 127.0.0.1:<fake port>; the clients ask for
    # api.openai.com:443, so host and port are left out of the match (method, scheme, path, query, body stay).
    return [mitmdump, *common_proxy_args(port, confdir), "--server-replay", str(flows),
            "--set", "server_replay_reuse=true", "--set", "server_replay_ignore_host=true",
            "--set", "server_replay_ignore_port=true", "--set", "server_replay_extra=404"], None


def run_variant(procs: Processes, variant: str, run: int, work: Path, confdir: Path, ca: Path, data_dir: Path,
                flows: Path, answers_pickle: Path, bench_bodies: list[bytes], expected: dict[bytes, bytes],
                concurrency: int, warmup: int) -> RunResult:
    port = free_port()
    argv, marker = variant_argv(variant, port, confdir, data_dir, flows)
    log = work / f"{variant}-{run}.log"
    env = {"SEMULA_BENCH_ANSWERS": str(answers_pickle), "PYTHONPATH": str(REPO / "addon")}
    proc = procs.start(argv, log, env)
    try:
        wait_ready(proc, log, marker, port)
        if marker is not None:  # the listener may come up a moment after the ready line, or before it
            deadline = time.monotonic() + 30
            while not port_open(port) and time.monotonic() < deadline:
                time.sleep(0.05)
        settle = wait_idle(proc.pid)
        cpu_before = cpu_seconds(proc.pid)
        wall, latencies, failures, example, client_cpu, window, warm_failures = asyncio.run(
            drive(port, ca, bench_bodies, expected, concurrency, variant == "semula", warmup))
        # Proxy CPU over warm-up + timed phase: warm-up is small; measured from the same point for all.
        proxy_cpu = cpu_seconds(proc.pid) - cpu_before
    finally:
        code = procs.stop(proc)
    if warm_failures:
        failures += warm_failures
    result = RunResult(variant, run, len(bench_bodies), wall, latencies, failures, example, proxy_cpu,
                       client_cpu, window, {"exit_code": code, "log": log.name, "warmup": warmup,
                                                               "settle": settle})
    return result


def decision_ms(data_dir: Path, windows: list[tuple[datetime, datetime]]) -> dict[str, Any]:
    """semula's decision_ms of the hits logged inside the timed windows (warm-up excluded)."""
    import pyarrow.dataset as ds

    files = sorted((data_dir / "calls").glob("**/*.parquet"))
    if not files:
        return {"count": 0}
    table = ds.dataset([str(f) for f in files], format="parquet").to_table(
        columns=["ts", "decision", "tier", "decision_ms"])
    rows = table.to_pylist()
    values, others, all_hits = [], {}, 0
    for row in rows:
        inside = any(begin <= row["ts"] <= end for begin, end in windows)
        if row["decision"] == "hit":
            all_hits += 1
            if inside and row["decision_ms"] is not None:
                values.append(row["decision_ms"])
        elif inside:
            key = f"{row['decision']}/{row['tier']}"
            others[key] = others.get(key, 0) + 1
    return {
        "count": len(values), "all_hits": all_hits, "rows": len(rows), "others": others,
        "p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"), "mean": statistics.fmean(values) if values else float("nan"),
    }


# --- where the time goes: semula's hooks in-process ----------------------------------------


def hook_breakdown(data_dir: Path, flows_path: Path, bench_bodies: list[bytes], answers_pickle: Path,
                   entries: int, reps: int = 3) -> dict[str, Any]:
    """Time semula's hooks and their parts in this process (no network, no proxy, same requests).

    Runs after the proxy runs (it appends hit rows to the call log). Each figure is the best of
    `reps` passes over all benchmark requests, so it is the cost, not the machine's noise.
    """
    import contextlib
    import gc
    import importlib.util

    from mitmproxy import http, io
    from mitmproxy.test import taddons, tflow

    from semula.proxy.addon import SemulaAddon

    with open(flows_path, "rb") as f:
        template = next(fl for fl in io.FlowReader(f).stream() if isinstance(fl, http.HTTPFlow))
    fields = [(k, HOST.encode() if k.lower() == b"host" else v) for k, v in template.request.headers.fields]

    def make_flows() -> list[http.HTTPFlow]:
        out = []
        for body in bench_bodies:
            req = http.Request.make("POST", URL, body, http.Headers(list(fields)))
            out.append(tflow.tflow(req=req))
        return out

    def best(fn: Any) -> float:
        """ms per request, best of reps (fresh flows each pass, built outside the timing)."""
        times = []
        for _ in range(reps):
            fl = make_flows()
            gc.collect()
            gc.disable()  # the pure cost; GC is reported on its own
            try:
                t0 = time.perf_counter()
                for f in fl:
                    fn(f)
                times.append((time.perf_counter() - t0) * 1000 / len(fl))
            finally:
                gc.enable()
        return min(times)

    result: dict[str, Any] = {"reps": reps, "n": len(bench_bodies), "entries": entries}
    devnull = open(os.devnull, "w")  # noqa: SIM115 - the proxy's per-call line goes to a file, not a terminal
    addon = SemulaAddon()
    with taddons.context(addon) as tctx, contextlib.redirect_stdout(devnull):
        tctx.configure(addon, semula_mode="replay", semula_data_dir=str(data_dir), semula_admin=False)
        loop = asyncio.new_event_loop()
        try:
            def full_gc_ms() -> float:
                gc.collect()
                t0 = time.perf_counter()
                gc.collect()
                return (time.perf_counter() - t0) * 1000

            result["gc_before"] = (len(gc.get_objects()), full_gc_ms())
            threads = set(threading.enumerate())
            loop.run_until_complete(addon.running())
            join_background_threads(threads)
            cache = addon.cache
            assert cache is not None, addon.store_problem
            result["gc_after"] = (len(gc.get_objects()), full_gc_ms())

            # One hit through the hooks, in mitmproxy's order; semula's own methods are wrapped on the
            # instance so that the same pass says where the request hook's time goes.
            spent: dict[str, float] = {}
            per_call: list[float] = []
            originals = {name: getattr(addon, name) for name in ("_decide", "_serve", "_finish")}

            def timed_async(name: str) -> Any:
                async def wrapper(*a: Any, **k: Any) -> Any:
                    t = time.perf_counter()
                    try:
                        return await originals[name](*a, **k)
                    finally:
                        spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
                return wrapper

            def timed_finish(*a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                try:
                    return originals["_finish"](*a, **k)
                finally:
                    spent["_finish"] = spent.get("_finish", 0.0) + time.perf_counter() - t

            def hooks(f: http.HTTPFlow) -> None:
                t0 = time.perf_counter()
                addon.requestheaders(f)
                t1 = time.perf_counter()
                loop.run_until_complete(addon.request(f))
                t2 = time.perf_counter()
                addon.responseheaders(f)
                loop.run_until_complete(addon.response(f))
                t3 = time.perf_counter()
                per_call.append((t2 - t1) * 1000)
                spent["requestheaders"] = spent.get("requestheaders", 0.0) + t1 - t0
                spent["request"] = spent.get("request", 0.0) + t2 - t1
                spent["response"] = spent.get("response", 0.0) + t3 - t2
                if f.response is None or f.response.headers.get("x-semula-decision") != "hit":
                    raise RuntimeError("in-process hook run: not a hit")

            def run_loop_only(f: http.HTTPFlow) -> None:
                async def nothing() -> None:
                    return None
                loop.run_until_complete(nothing())

            one_loop_run = best(run_loop_only)  # what loop.run_until_complete itself costs, per call
            addon._decide, addon._serve, addon._finish = timed_async("_decide"), timed_async("_serve"), timed_finish
            passes = []
            try:
                for _ in range(reps):
                    spent.clear()
                    per_call.clear()
                    fl = make_flows()
                    gc.collect()
                    gc.disable()  # the pure cost; GC is reported on its own
                    try:
                        for f in fl:
                            hooks(f)
                    finally:
                        gc.enable()
                    passes.append(({k: v * 1000 / len(fl) for k, v in spent.items()}, list(per_call)))
            finally:
                for name in originals:
                    delattr(addon, name)
            split, calls = min(passes, key=lambda p: p[0]["requestheaders"] + p[0]["request"] + p[0]["response"])
            split["request"] -= one_loop_run
            split["response"] -= one_loop_run
            result["split"] = split
            result["hooks_total"] = split["requestheaders"] + split["request"] + split["response"]
            result["request_p50"] = percentile(calls, 50) - one_loop_run
            result["request_p99"] = percentile(calls, 99) - one_loop_run

            adapter = adapter_for(HOST, PATH)
            settings = cache.settings_for(PROJECT)
            raws = {b: raw_request(b) for b in bench_bodies}
            canon = {b: adapter.canonicalise(raws[b]) for b in bench_bodies}
            fps = {b: (request_fingerprint(canon[b]), normalised_fingerprint(canon[b], *settings.fingerprint_inputs))
                   for b in bench_bodies}
            entry_of = {b: cache.cached_entry(cache.match(PROJECT, *fps[b]).entry_id) for b in bench_bodies}
            def response_make(f: http.HTTPFlow) -> None:
                entry = entry_of[f.request.content]
                http.Response.make(200, entry.body, http.Headers(
                    [(k.encode(), v.encode()) for k, v in entry.headers]
                    + [(b"x-semula-decision", b"hit"), (b"x-semula-tier", b"exact"),
                       (b"x-semula-score", b"1.000"), (b"x-semula-entry", b"1")]))

            # (short name, label, ms, semula's own step?)
            result["parts"] = [
                ("pretty_host", "`flow.request.pretty_host` (requestheaders)",
                 best(lambda f: f.request.pretty_host), True),
                ("header dict", "header dict via `Headers.items()` (as `_decide` builds it)",
                 best(lambda f: {k.lower(): v for k, v in f.request.headers.items()}), True),
                ("header dict from fields", "&nbsp;&nbsp;the same dict from `Headers.fields` (one pass; a fix "
                 "would join repeated names)",
                 best(lambda f: {k.decode("latin-1").lower(): v.decode("utf-8", "surrogateescape")
                                 for k, v in f.request.headers.fields}), False),
                ("query + body", "`request.query.fields` + `request.get_content()` (the rest of `RawRequest`)",
                 best(lambda f: (tuple(f.request.query.fields), f.request.get_content(strict=False))), True),
                ("canonicalise", "`adapter.canonicalise` (JSON parse, redact_json, read messages)",
                 best(lambda f: adapter.canonicalise(raws[f.request.content])), True),
                ("request_fingerprint", "`request_fingerprint` (canonical JSON + SHA-256)",
                 best(lambda f: request_fingerprint(canon[f.request.content])), True),
                ("normalised_fingerprint", "`normalised_fingerprint` (computed even when the exact tier hits)",
                 best(lambda f: normalised_fingerprint(canon[f.request.content], *settings.fingerprint_inputs)), True),
                ("match", "`cache.match` + `cache.cached_entry`",
                 best(lambda f: cache.cached_entry(cache.match(PROJECT, *fps[f.request.content]).entry_id)), True),
                ("Response.make", "`Response.make` with the entry's headers (encoded per hit) + 4 `x-semula-*` "
                 "(the no-op pays most of this too)", best(response_make), False),
            ]
        finally:
            try:
                addon.done()
            except Exception as e:  # shutting the in-process addon down is not what is measured
                result["done_error"] = f"{type(e).__name__}: {e}"
            loop.close()

    os.environ["SEMULA_BENCH_ANSWERS"] = str(answers_pickle)
    spec = importlib.util.spec_from_file_location("bench_noop_addon", NOOP_ADDON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    noop = module.addons[0]
    result["noop_request"] = best(noop.request)
    devnull.close()
    return result


# --- the report ----------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import duckdb
    import mitmproxy.version

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    def git(*argv: str) -> str:
        try:
            return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "addon")
    return {
        "code": f"{commit}" + (" + uncommitted changes in addon/" if dirty else ""),
        "cpu": cpu, "cores": f"{os.cpu_count()} logical ({affinity} usable by this process)",
        "python": platform.python_version(), "mitmproxy": mitmproxy.version.VERSION,
        "httpx": httpx.__version__, "duckdb": duckdb.__version__,
        "os": f"{platform.system()} {platform.release()}",
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def write_report(out: Path, args: argparse.Namespace, info: dict[str, str], results: list[RunResult],
                 dms: dict[str, Any], timings: dict[str, float], load_after: str,
                 breakdown: dict[str, Any] | None) -> dict[str, Any]:
    by = {v: [r for r in results if r.variant == v] for v in VARIANTS}
    med = {v: {
        "rps": median([r.rps for r in rs]), "p50": median([r.p50 for r in rs]), "p99": median([r.p99 for r in rs]),
        "cpu_ms": median([r.proxy_cpu_s * 1000 / (r.requests + r.extra["warmup"]) for r in rs]),
        "client_cpu": median([r.client_cpu_s / r.wall_s for r in rs]),
        "failures": sum(r.failures for r in rs),
    } for v, rs in by.items()}
    ratio_noop = med["semula"]["rps"] / med["noop"]["rps"]
    ratio_replay = med["semula"]["rps"] / med["replay"]["rps"]
    cpu_ratio_noop = med["semula"]["cpu_ms"] / med["noop"]["cpu_ms"]
    cpu_ratio_replay = med["semula"]["cpu_ms"] / med["replay"]["cpu_ms"]
    for v, rs in by.items():
        rates = [r.rps for r in rs]
        med[v]["spread"] = (max(rates) - min(rates)) / median(rates) if len(rates) > 1 else 0.0
    p99_dms = dms.get("p99", float("nan"))

    def yes(ok: bool) -> str:
        return "**met**" if ok else "**not met**"

    lines = [
        "# Replay benchmark: semula exact hits vs a no-op addon vs mitmproxy --server-replay",
        "",
        f"Generated by `{' '.join(['scripts/bench_replay.py', *sys.argv[1:]])}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {info['cpu']} |",
        f"| cores | {info['cores']} |",
        f"| OS | {info['os']} |",
        f"| Python | {info['python']} |",
        f"| mitmproxy | {info['mitmproxy']} |",
        f"| httpx (client) / duckdb | {info['httpx']} / {info['duckdb']} |",
        f"| semula code | {info['code']} |",
        f"| load average before / after | {info['loadavg']} / {load_after} |",
        "",
        "The machine is shared and small: the clients and the proxy compete for the same cores, so",
        "absolute numbers are low and noisy; the ratios (same machine, interleaved runs) are the point.",
        "",
        "## Method",
        "",
        f"- **Workload**: {args.requests} distinct `POST {URL}` requests (OpenAI chat completions, "
        f"~{int(statistics.fmean(len(request_body(i)) for i in range(50)))}-byte JSON bodies: a shared system "
        "prompt and a distinct user question, `temperature: 0`), each sent once per run, from "
        f"{args.concurrency} concurrent asyncio workers sharing one `httpx.AsyncClient` (HTTP/1.1 keep-alive, "
        f"at most {args.concurrency} connections, CONNECT tunnel + TLS to the proxy, verify = the mitmproxy CA of the "
        f"benchmark's confdir). Before timing, each run sends {args.warmup} of the same requests to open the "
        "connections (not timed, checked).",
        f"- **Answers**: recorded once from `tests/fakeprovider.py` through `mitmdump -w flows` + `map_remote` "
        f"({timings['record']:.1f} s). All three variants serve exactly these answers; every response is checked "
        "(status 200, body equal to the recorded one; for semula also `x-semula-decision: hit`, `x-semula-tier: exact`).",
        f"- **semula**: `semula proxy --mode replay` on a store of {args.entries} entries (the {args.requests} requests "
        f"are every {args.entries // args.requests}th of them; the others get synthetic answers of the same shape). The entries "
        "are built with semula's own code (`adapter_for(...).canonicalise`, `request_fingerprint`, "
        "`normalised_fingerprint`, the values `Store.upsert_entry` writes) and bulk-inserted into `entries` "
        f"({timings['seed']:.1f} s; `Cache.record` costs ~11 ms a row); before the runs, every benchmark request is "
        "checked to be an exact hit in semula's own `Cache` index holding the recorded answer. The proxy prints its "
        "one line per call to a log file, as it does by default.",
        "- **no-op**: `mitmdump -s scripts/bench_noop_addon.py`: a dict request body bytes → (status, headers, body), "
        "answered in the `request` hook with `Response.make` (the same headers semula stores). The ceiling for an "
        "addon that answers from memory.",
        "- **server-replay**: `mitmdump --server-replay flows --set server_replay_reuse=true` on the recorded flows "
        "(`server_replay_ignore_host/port=true`, because the flows name the fake provider's 127.0.0.1:port; "
        "`server_replay_extra=404`; other options default, e.g. `server_replay_refresh=true`).",
        "- **Same proxy settings**: `flow_detail=0`, `connection_strategy=lazy`, the same `allow_hosts` (semula's "
        "provider hosts), one fresh proxy process per run, nothing goes upstream. After its ready line, each proxy "
        "is left to finish its start-up work (until it uses < 0.1 core for two 0.5 s windows; 'settle s' in the "
        "run tables: semula builds its full-text index in the background) so that the runs measure serving.",
        f"- **Runs**: {args.runs} per variant, interleaved ({' '.join(VARIANTS * min(args.runs, 3))}{' …' if args.runs > 3 else ''}); "
        "the tables give the median of the runs. req/s = requests / wall time of the timed phase; latency = "
        "each request as the client sees it (send → whole body read), nearest-rank percentiles. "
        "Proxy CPU = utime+stime of the proxy process (all threads) over warm-up + timed phase, per request.",
        "- **decision_ms**: semula's call log (`<data dir>/calls/**/*.parquet`, `decision = 'hit'`), rows inside the "
        "timed windows, read after each proxy was stopped with SIGINT (log flushed).",
        "",
        "## Results",
        "",
        "| variant | median req/s | median p50 ms | median p99 ms | proxy CPU ms/req | client CPU (cores) | failures |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v in VARIANTS:
        m = med[v]
        lines.append(f"| {TITLES[v]} | {m['rps']:.0f} | {m['p50']:.1f} | {m['p99']:.1f} | {m['cpu_ms']:.2f} | "
                     f"{m['client_cpu']:.2f} | {m['failures']} |")
    lines += ["", "### Each run", ""]
    for v in VARIANTS:
        lines += [f"**{TITLES[v]}**", "",
                  "| run | req/s | p50 ms | p99 ms | wall s | proxy CPU ms/req | settle s | failures |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in by[v]:
            lines.append(f"| {r.run} | {r.rps:.0f} | {r.p50:.1f} | {r.p99:.1f} | {r.wall_s:.2f} | "
                         f"{r.proxy_cpu_s * 1000 / (r.requests + r.extra['warmup']):.2f} | {r.extra['settle']:.1f} | "
                         f"{r.failures} |")
        lines.append("")
        for r in by[v]:
            if r.failure_example:
                lines += [f"Run {r.run} failure example: `{r.failure_example[:300]}`", ""]
    lines += [
        "## Ratios and targets",
        "",
        "| | value | target | |",
        "|---|---:|---:|---|",
        f"| req/s semula / no-op | {ratio_noop:.2f}× | ≥ 0.90× | {yes(ratio_noop >= 0.9)} |",
        f"| req/s semula / server-replay | {ratio_replay:.2f}× | ≥ 1.00× | {yes(ratio_replay >= 1.0)} |",
        f"| decision_ms p99 (hits) | {p99_dms:.2f} ms | ≤ 2 ms | {yes(p99_dms <= 2.0)} |",
        f"| proxy CPU per request, semula / no-op | {cpu_ratio_noop:.2f}× | | (1.00× = semula costs what the no-op costs) |",
        f"| proxy CPU per request, semula / server-replay | {cpu_ratio_replay:.2f}× | | |",
        "",
        f"semula decision_ms over {dms.get('count', 0)} timed hits: p50 **{dms.get('p50', float('nan')):.3f} ms**, "
        f"p90 {dms.get('p90', float('nan')):.3f} ms, p99 **{p99_dms:.3f} ms**, max {dms.get('max', float('nan')):.3f} ms, "
        f"mean {dms.get('mean', float('nan')):.3f} ms"
        + (f"; other decisions in the timed windows: {dms['others']}" if dms.get("others") else "") + ".",
        "",
    ]
    lines += breakdown_section(breakdown)
    lines += ["## Interpretation", ""]
    lines += interpretation(med, ratio_noop, ratio_replay, dms, breakdown)
    if args.notes and Path(args.notes).exists():
        lines += ["", Path(args.notes).read_text().rstrip(), ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines).rstrip() + "\n")
    return {"ratio_noop": ratio_noop, "ratio_replay": ratio_replay, "med": med}


def breakdown_section(b: dict[str, Any] | None) -> list[str]:
    if b is None:
        return []
    if "error" in b:
        return ["## Where semula's time goes", "", f"The in-process breakdown failed: `{b['error']}`", ""]
    sp, nan = b["split"], float("nan")
    lines = [
        "## Where semula's time goes (in-process, no network)",
        "",
        f"The same {b['n']} requests through semula's hooks called directly in this process (`SemulaAddon` in "
        "`mitmproxy.test.taddons`, the benchmark's store, the request headers httpx sent), and the parts of the "
        f"request hook timed alone; each figure is the best of {b['reps']} passes (ms per request).",
        "",
        "| | ms / request |",
        "|---|---:|",
        f"| semula: requestheaders + request + responseheaders + response hooks, one hit | **{b['hooks_total']:.3f}** |",
        f"| &nbsp;&nbsp;`requestheaders` | {sp['requestheaders']:.3f} |",
        f"| &nbsp;&nbsp;`request` | {sp['request']:.3f} |",
        f"| &nbsp;&nbsp;&nbsp;&nbsp;of which `_decide` (raw request, canonicalise, both fingerprints, match) | "
        f"{sp.get('_decide', nan):.3f} |",
        f"| &nbsp;&nbsp;&nbsp;&nbsp;of which `_serve` (entry from memory, `Response.make`) | {sp.get('_serve', nan):.3f} |",
        f"| &nbsp;&nbsp;&nbsp;&nbsp;of which `_finish` (call-log row + queue put, flow comment, console line) | "
        f"{sp.get('_finish', nan):.3f} |",
        f"| &nbsp;&nbsp;`responseheaders` + `response` | {sp['response']:.3f} |",
        f"| no-op addon: its `request` hook (dict lookup + `Response.make`) | **{b['noop_request']:.3f}** |",
    ]
    lines.append("| *parts, timed alone:* | |")
    for _, label, value, _ in b["parts"]:
        lines.append(f"| {label} | {value:.3f} |")
    lines += [
        "",
        f"The cyclic GC was off during these passes (its cost is below). `request` hook per call in-process: "
        f"p50 {b['request_p50']:.3f} ms, p99 {b['request_p99']:.3f} ms (the hook waits on nothing on a hit: this "
        "p99 is the machine's noise). "
        f"Opening the store (the index and the preloaded answers of all {b['entries']:,} entries) added "
        f"{b['gc_after'][0] - b['gc_before'][0]:,} objects to the ones the cyclic GC tracks (this process: "
        f"{b['gc_before'][0]:,} → {b['gc_after'][0]:,}); a full collection took {b['gc_before'][1]:.0f} ms before and "
        f"{b['gc_after'][1]:.0f} ms after. Full collections are rare, but each stalls the proxy's event loop that long.",
        "",
    ]
    return lines


def interpretation(med: dict[str, dict[str, float]], ratio_noop: float, ratio_replay: float,
                   dms: dict[str, Any], breakdown: dict[str, Any] | None) -> list[str]:
    out = []
    s, n, r = med["semula"], med["noop"], med["replay"]
    out.append(
        f"- Throughput: semula served {s['rps']:.0f} req/s, {ratio_noop:.2f}× the no-op ceiling ({n['rps']:.0f}) and "
        f"{ratio_replay:.2f}× mitmproxy's server replay ({r['rps']:.0f})."
    )
    spread = max(m["spread"] for m in med.values())
    if spread > 0:
        gaps = [abs(1 - ratio_noop), abs(1 - ratio_replay)]
        verdict = ("larger than" if spread > max(gaps) else "comparable to" if spread > min(gaps) else "smaller than")
        out.append(
            f"- Noise: within one variant, req/s varied by up to {spread:.0%} between runs (max − min over the "
            f"median), {verdict} the differences between the variants, so the req/s ratios (and whether they "
            "meet their targets) are not reliable on this machine; the CPU cost per request is steadier."
        )
    out.append(
        f"- Cost per request in the proxy process: semula {s['cpu_ms']:.2f} ms CPU, no-op {n['cpu_ms']:.2f} ms, "
        f"server-replay {r['cpu_ms']:.2f} ms. The difference semula − no-op ({s['cpu_ms'] - n['cpu_ms']:.2f} ms) is "
        "what semula's hooks add per hit on top of mitmproxy's own HTTP/TLS handling; it is a steadier measure than "
        "req/s on a shared machine because it does not depend on what else runs."
    )
    if not math.isnan(dms.get("p99", float("nan"))):
        out.append(
            f"- semula's own decision (parse, canonicalise, two fingerprints, dictionary lookup, build the response) "
            f"takes {dms['p50']:.3f} ms at p50 and {dms['p99']:.3f} ms at p99. On a hit the hook never yields "
            "(the answer is in memory), so the tail is not waiting on the store: it is CPU time plus whatever "
            "interrupts it (GC pauses, the GIL handed to semula's log thread, the OS running other processes on "
            "this shared machine)."
        )
    if s["cpu_ms"] > 0:
        out.append(
            f"- If the proxy process were the only bottleneck, throughput would scale with 1 / CPU per request: "
            f"semula would reach ≈ {n['cpu_ms'] / s['cpu_ms']:.2f}× the no-op and ≈ {r['cpu_ms'] / s['cpu_ms']:.2f}× "
            "server-replay (from the CPU medians; compare with the measured req/s ratios above)."
        )
    if breakdown and "error" not in breakdown:
        extra = (s["cpu_ms"] - n["cpu_ms"]) - (breakdown["hooks_total"] - breakdown["noop_request"])
        if extra > 0.1:
            out.append(
                f"- Of the {s['cpu_ms'] - n['cpu_ms']:.2f} ms of extra proxy CPU per hit, semula's hook code accounts "
                f"for {breakdown['hooks_total'] - breakdown['noop_request']:.2f} ms (in-process, above); the other "
                f"≈ {extra:.2f} ms is spent outside that code — candidates: the call-log writer thread, woken for every "
                "row (a queue put, then a GIL hand-off), mitmproxy dispatching semula's other hooks, and a GC heap "
                f"that the {breakdown['entries']:,} preloaded entries make larger."
            )
        own = sorted(((v, name) for name, _, v, mine in breakdown["parts"] if mine), reverse=True)
        top = ", ".join(f"{name} {v:.3f} ms" for v, name in own[:3])
        out.append(
            f"- In-process, semula's hooks cost {breakdown['hooks_total']:.3f} ms per hit against "
            f"{breakdown['noop_request']:.3f} ms for the no-op's hook. semula's own steps, largest first: {top}."
        )
    busy = max(s["client_cpu"], n["client_cpu"], r["client_cpu"])
    out.append(
        f"- The clients (one Python process) used up to {busy:.2f} cores; with the proxy (one Python event loop) on a "
        "2-core machine, req/s measures the proxy and the client together: a slower proxy leaves the client idle, "
        "so the req/s ratios understate differences in proxy cost; the proxy CPU ratios show them directly."
    )
    return out


# --- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=None, help="untimed requests per run (default 4×concurrency)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmark" / "results" / "replay.md")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 requests, 1000 entries, 1 run")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (store, flows, proxy logs)")
    parser.add_argument("--notes", type=Path, default=None, help="markdown appended to the report")
    parser.add_argument("--no-breakdown", action="store_true", help="skip timing semula's hooks in-process")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.entries, args.runs = 200, 1000, 1
    if args.requests > args.entries:
        parser.error("--requests must not exceed --entries (the requests are a subset of the entries)")
    if args.warmup is None:
        args.warmup = 4 * args.concurrency
    args.warmup = min(args.warmup, args.requests)

    procs = Processes()
    def on_term(*_: Any) -> None:
        raise KeyboardInterrupt

    previous_term = signal.signal(signal.SIGTERM, on_term)
    work = Path(tempfile.mkdtemp(prefix="semula-bench-"))
    info = machine()
    try:
        return _main(args, procs, work, info)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]: stopping the proxies")
        return 130
    finally:
        procs.stop_all()
        signal.signal(signal.SIGTERM, previous_term)
        if args.keep:
            console.print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _main(args: argparse.Namespace, procs: Processes, work: Path, info: dict[str, str]) -> int:
    confdir = work / "confdir"
    data_dir = work / "semula-data"
    ca = ensure_ca(confdir)
    console.print(f"[bold]semula replay benchmark[/bold]: {args.requests} requests, {args.entries} entries, "
                  f"concurrency {args.concurrency}, {args.runs} run(s) per variant · {info['cpu']} · "
                  f"{info['cores']} · load {info['loadavg']}")
    console.print(f"work dir {work}")
    timings: dict[str, float] = {}

    all_bodies = [request_body(i) for i in range(args.entries)]
    step = args.entries // args.requests
    bench_indices = [i * step for i in range(args.requests)]
    bench_bodies = [all_bodies[i] for i in bench_indices]
    if len(set(all_bodies)) != len(all_bodies):
        raise RuntimeError("synthetic bodies are not distinct")

    with console.status("recording the answers through mitmdump -w + map_remote → fake provider"):
        t0 = time.perf_counter()
        flows, recorded = record_flows(procs, work, confdir, ca, bench_bodies, args.concurrency)
        timings["record"] = time.perf_counter() - t0
    console.print(f"recorded {len(recorded)} flows in {timings['record']:.1f} s")

    # The answer each variant must serve (what semula stores: clean headers, redacted body).
    answers: dict[bytes, tuple[int, list[tuple[str, str]], bytes]] = {}
    bench_set = set(bench_indices)
    for i, body in enumerate(all_bodies):
        if i in bench_set:
            status, headers, content = recorded[body]
            answers[body] = (status, clean_headers(headers), content)
        else:
            answers[body] = synthetic_answer(i)
    expected = {b: recorded[b][2] for b in bench_bodies}

    with console.status(f"seeding {args.entries} entries with semula's canonicalisation and fingerprints"):
        timings["seed"] = seed_store(data_dir, all_bodies, answers)
        verify_store(data_dir, bench_bodies, expected)
    console.print(f"seeded {args.entries} entries in {timings['seed']:.1f} s; all {args.requests} benchmark "
                  "requests are exact hits in semula's index")

    answers_pickle = work / "noop-answers.pickle"
    with open(answers_pickle, "wb") as f:
        pickle.dump({b: answers[b] for b in bench_bodies}, f)

    results: list[RunResult] = []
    total = args.runs * len(VARIANTS)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, auto_refresh=False) as progress:
        task = progress.add_task("runs", total=total)
        for run in range(1, args.runs + 1):
            for variant in VARIANTS:
                progress.update(task, description=f"run {run} · {variant}")
                progress.refresh()
                r = run_variant(procs, variant, run, work, confdir, ca, data_dir, flows, answers_pickle,
                                bench_bodies, expected, args.concurrency, args.warmup)
                results.append(r)
                progress.console.print(
                    f"run {run} {variant:<7} {r.rps:7.0f} req/s  p50 {r.p50:6.1f} ms  p99 {r.p99:6.1f} ms  "
                    f"proxy CPU {r.proxy_cpu_s * 1000 / (r.requests + args.warmup):.2f} ms/req  "
                    f"client CPU {r.client_cpu_s / r.wall_s:.2f} cores  failures {r.failures}"
                    + (f"  e.g. {r.failure_example[:160]}" if r.failure_example else ""))
                progress.advance(task)
                progress.refresh()

    dms = decision_ms(data_dir, [r.window for r in results if r.variant == "semula"])
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    breakdown: dict[str, Any] | None = None
    if not args.no_breakdown:
        with console.status("timing semula's hooks in-process"):
            try:
                breakdown = hook_breakdown(data_dir, flows, bench_bodies, answers_pickle, args.entries)
            except Exception as e:  # the proxy numbers stand on their own
                breakdown = {"error": f"{type(e).__name__}: {e}"}
        if "error" in breakdown:
            console.print(f"[yellow]in-process breakdown failed[/yellow]: {breakdown['error']}")
        else:
            console.print(f"in-process: semula hooks {breakdown['hooks_total']:.3f} ms/hit, "
                          f"no-op hook {breakdown['noop_request']:.3f} ms/request")
    summary = write_report(args.out, args, info, results, dms, timings, load_after, breakdown)
    med = summary["med"]
    console.print()
    for v in VARIANTS:
        console.print(f"{TITLES[v]:<32} {med[v]['rps']:7.0f} req/s  p50 {med[v]['p50']:6.1f} ms  "
                      f"p99 {med[v]['p99']:6.1f} ms  proxy CPU {med[v]['cpu_ms']:.2f} ms/req")
    console.print(f"semula / no-op {summary['ratio_noop']:.2f}×   semula / server-replay {summary['ratio_replay']:.2f}×   "
                  f"decision_ms p50 {dms.get('p50', float('nan')):.3f} p99 {dms.get('p99', float('nan')):.3f} ms "
                  f"({dms.get('count', 0)} hits)")
    console.print(f"report: {args.out}")
    failures = sum(r.failures for r in results)
    if failures:
        console.print(f"[red]{failures} requests failed their check[/red] (see the report)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
