"""Misses at once through a real proxy, and its start-up: `semula proxy --mode auto` on a seeded store,
the fake provider upstream, `clients` httpx clients each sending one distinct miss per round at the same
moment; decision_ms is read from the proxy's own call log. Start-up: spawn → first request served (an
exact hit), and the proxy's RSS once it is idle."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import ssl
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import common
from bench.common import PROJECT, SYSTEM_PROMPTS, pct

HOST, PATH = "api.openai.com", "/v1/chat/completions"
URL = f"https://{HOST}{PATH}"


def body_for(prompt: str, variant: int) -> bytes:
    """The HTTP body `common.canonical_for(prompt, variant)` canonicalises."""
    return json.dumps({"model": ("gpt-4o-mini", "gpt-4o")[variant % 2], "temperature": 0, "messages": [
        {"role": "system", "content": SYSTEM_PROMPTS[variant % 2]}, {"role": "user", "content": prompt}]}).encode()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def seed(data_dir: Path, entries: list[Any]) -> float:
    """Bulk-seed and build the full-text index once, as a proxy that ran before would have left it."""
    from semula.engine.engine import Engine

    t0 = time.perf_counter()
    store, _, _ = common.seeded_store(data_dir, entries)
    engine = Engine.open(store)
    try:
        common.settle_index(engine)
    finally:
        engine.close()
    return time.perf_counter() - t0


async def send(client: Any, body: bytes) -> str:
    r = await client.post(URL, content=body, headers={"content-type": "application/json",
                                                      "authorization": "Bearer sk-bench"})
    return r.headers.get("x-semula-decision", str(r.status_code))


async def first_served(port: int, ca: Path, body: bytes, deadline: float) -> float:
    """Seconds until the proxy answers `body` (polled; the caller started the clock at spawn)."""
    import httpx

    while time.monotonic() < deadline:
        if common.port_open(port):
            try:
                async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", timeout=30.0,
                                             verify=ssl.create_default_context(cafile=str(ca))) as client:
                    if await send(client, body) == "hit":
                        return time.monotonic()
            except httpx.HTTPError:
                pass
        await asyncio.sleep(0.02)
    raise RuntimeError("the proxy served nothing before the deadline")


async def bursts(port: int, ca: Path, rounds: list[list[bytes]]) -> tuple[list[tuple[datetime, datetime]], dict[str, int]]:
    """Each round: every client sends its miss at the same moment; returns the rounds' time windows."""
    import httpx

    windows, outcomes = [], {}
    async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}", timeout=120.0,
                                 verify=ssl.create_default_context(cafile=str(ca)),
                                 limits=httpx.Limits(max_connections=len(rounds[0]))) as client:
        for bodies in rounds:
            begin = datetime.now(UTC)
            for decision in await asyncio.gather(*(send(client, b) for b in bodies)):
                outcomes[decision] = outcomes.get(decision, 0) + 1
            windows.append((begin, datetime.now(UTC)))
            await asyncio.sleep(1.0)  # let the recordings of this round land before the next
    return windows, outcomes


def logged_decisions(data_dir: Path, windows: list[tuple[datetime, datetime]]) -> list[float]:
    import pyarrow.dataset as ds

    files = [str(f) for f in sorted((data_dir / "calls").glob("**/*.parquet"))]
    rows = ds.dataset(files, format="parquet").to_table(columns=["ts", "decision", "decision_ms"]).to_pylist()
    return [r["decision_ms"] for r in rows if r["decision"] != "hit" and r["decision_ms"] is not None
            and any(b.replace(tzinfo=None) <= r["ts"].replace(tzinfo=None) <= e.replace(tzinfo=None) for b, e in windows)]


def run(size: int, prompts: list[str], entries: list[Any], vocab: Any, clients: int = 64,
        n_rounds: int = 3, seeded: Path | None = None, sample_from: int | None = None) -> dict[str, Any]:
    """Start-up and concurrent misses at one store size (`seeded`: a copy of that store instead of seeding;
    `sample_from`: paraphrase only the first so many prompts)."""
    procs = common.Processes()
    rng = random.Random(7000 + size)
    with tempfile.TemporaryDirectory(prefix=f"semula-bench-conc-{size}-") as tmp:
        work = Path(tmp)
        data_dir, confdir = work / "data", work / "conf"
        ca = common.ensure_ca(confdir)
        if seeded is not None:
            shutil.copytree(seeded, data_dir)
            seed_s = None
        else:
            seed_s = seed(data_dir, entries[:size])
        try:
            fake, fake_port = common.start_fake_provider(procs, work)
            port, log_path = common.free_port(), work / "semula.log"
            remote = [a for h in ("api.openai.com",) for a in ("--set", f"map_remote=|//{h}/|//127.0.0.1:{fake_port}/")]
            spawned = time.monotonic()
            proc = procs.start([sys.executable, "-m", "semula", "proxy", "--mode", "auto", "--listen-host", "127.0.0.1",
                                "--listen-port", str(port), "--data-dir", str(data_dir), "--project", PROJECT,
                                "--set", f"confdir={confdir}", "--set", "ssl_insecure=true", *remote],
                               # no recordings folder: it would be written in the repository root and synced in at each start
                               log_path, {"PYTHONPATH": str(common.REPO / "addon"), "SEMULA_RECORDINGS": "off"})
            served_at = asyncio.run(first_served(port, ca, body_for(prompts[0], 0), spawned + 120))
            ready_s = served_at - spawned
            common.wait_idle(proc.pid, timeout=120)
            rss_idle = rss_mb(proc.pid)
            picks = rng.sample(range(sample_from or size), clients * n_rounds)
            rounds = []
            for r in range(n_rounds):
                bodies = []
                for k, i in enumerate(picks[r * clients:(r + 1) * clients]):
                    if k % 3 == 2:  # 1/3 unrelated prompts, 2/3 paraphrases of stored ones, as the single-miss mix
                        bodies.append(body_for(vocab.prompt(random.Random(90_000_000 + size + r * clients + k)), i))
                    else:
                        bodies.append(body_for(vocab.paraphrase(prompts[i], rng), i))
                rounds.append(bodies)
            asyncio.run(bursts(port, ca, [[body_for(vocab.prompt(random.Random(80_000_000 + k)), k)
                                           for k in range(8)]]))  # warm-up: connections, first misses
            windows, outcomes = asyncio.run(bursts(port, ca, rounds))
            rss_after = rss_mb(proc.pid)
            # a generous stop: the call log is flushed at shutdown, after the rebuild the bursts started
            procs.stop(proc, timeout=300)
            procs.stop(fake)
            ms = logged_decisions(data_dir, windows)
        finally:
            procs.stop_all()
    common.log(f"  {size}: ready {ready_s:.2f} s, RSS {rss_idle:.0f} MB; {clients} at once: decision p99 "
               f"{pct(ms, 99):.1f} ms over {len(ms)} misses")
    return {"seed_s": seed_s, "ready_s": ready_s, "rss_idle_mb": rss_idle, "rss_after_mb": rss_after,
            "clients": clients, "rounds": n_rounds, "outcomes": outcomes, "decisions": len(ms),
            "decision_ms": common.summary(ms) | {"max": max(ms) if ms else None}}
