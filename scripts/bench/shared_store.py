"""Many proxies, one Postgres store: errors, visibility, hit throughput, a Postgres restart.

In full: errors, recordings made once, cross-proxy visibility, hit throughput against the DuckDB store,
connections used, and a Postgres restart in the middle.

    .venv/bin/python scripts/bench.py shared_store            # writes benchmark/results/shared-store.md
    .venv/bin/python scripts/bench.py shared_store --quick    # a short smoke run, to /tmp/semula-bench/

A throwaway PostgreSQL from the machine's binaries (tests/support/pg_helpers.py), the HTTPS fake provider
and real `semula proxy` processes; clients are plain httpx through each proxy (threads).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg

from bench.common import RESULTS, machine, pct

import pg_helpers  # noqa: I001  (tests/support: on the path once bench.common is imported)
from e2e_helpers import ssl_context, start_fake_provider, start_proxy, stop_process

URL = "https://api.openai.com/v1/chat/completions"


def body(text: str, stream: bool = False) -> dict:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], "stream": stream}


class Client:
    def __init__(self, proxy) -> None:
        self.http = httpx.Client(proxy=proxy.proxy_url, verify=ssl_context(proxy.ca_path), timeout=60,
                                 headers={"authorization": "Bearer sk-bench-not-a-key"})

    def ask(self, text: str, stream: bool = False) -> tuple[int, dict[str, str]]:
        with self.http.stream("POST", URL, json=body(text, stream)) as r:
            r.read()
            return r.status_code, {k: v for k, v in r.headers.items() if k.startswith("x-semula")}


def visibility(writers: list, observer, samples: int, tag: str) -> list[float]:
    """Record through a writer; poll the replay observer until it is a hit: the delay after the writer's answer."""
    delays = []
    watch = Client(observer)
    for n in range(samples):
        text = f"visibility {tag} {n} of the shared store"
        Client(writers[n % len(writers)]).ask(text)
        done = time.monotonic()
        while True:
            status, headers = watch.ask(text)
            if status == 200 and headers.get("x-semula-decision") == "hit":
                delays.append((time.monotonic() - done) * 1000)
                break
            if time.monotonic() - done > 30:
                delays.append(float("inf"))
                break
            time.sleep(0.01)
    return delays


def mixed_load(proxies: list, clients_each: int, seconds: float, known: list[str], tag: str,
               restart: pg_helpers.PostgresServer | None, url: str) -> dict:
    """`clients_each` threads per proxy: 70 % hits, 20 % new calls, 10 % streams; one restart half-way."""
    stop = threading.Event()
    lock = threading.Lock()
    counts: Counter = Counter()
    errors: list[str] = []
    acknowledged: dict[int, str] = {}  # entry id (x-semula-entry on a recorded miss) -> prompt
    connections: list[int] = []

    def client(p: int, c: int) -> None:
        rng = random.Random(p * 1000 + c)
        me = Client(proxies[p])
        n = 0
        while not stop.is_set():
            roll = rng.random()
            if roll < 0.7:
                text, stream = rng.choice(known), False
            elif roll < 0.9:
                text, stream = f"new {tag} {p}-{c}-{n}", False
            else:
                text, stream = f"stream {tag} {p}-{c}-{n % 5}", True
            n += 1
            try:
                status, headers = me.ask(text, stream)
            except httpx.HTTPError as e:
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            with lock:
                counts[headers.get("x-semula-decision", "?")] += 1
                counts["requests"] += 1
                if status != 200:
                    errors.append(f"status {status}")
                if headers.get("x-semula-decision") == "miss" and headers.get("x-semula-entry") and not stream:
                    acknowledged[int(headers["x-semula-entry"])] = text

    def sample_connections() -> None:
        while not stop.is_set():
            try:
                with psycopg.connect(url, connect_timeout=2) as con:
                    connections.append(con.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'semula'").fetchone()[0])
            except psycopg.Error:
                pass
            stop.wait(0.5)

    threads = [threading.Thread(target=client, args=(p, c)) for p in range(len(proxies)) for c in range(clients_each)]
    threads.append(threading.Thread(target=sample_connections))
    started = time.monotonic()
    for t in threads:
        t.start()
    restart_note = "none"
    if restart is not None:
        time.sleep(seconds / 2)
        t0 = time.monotonic()
        restart.stop("fast")
        restart.start()
        restart_note = f"pg_ctl stop -m fast + start at {seconds / 2:.0f} s, down {time.monotonic() - t0:.1f} s"
        time.sleep(max(0.0, seconds - (time.monotonic() - started)))
    else:
        time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    with psycopg.connect(url) as con:
        found = {i: t for i, t in con.execute(
            "SELECT id, last_text FROM entries WHERE id = ANY(%s)", [list(acknowledged)]).fetchall()}
    lost = [i for i, text in acknowledged.items() if found.get(i) != text]
    return {"counts": dict(counts), "errors": errors, "elapsed": elapsed, "acknowledged": len(acknowledged),
            "lost": len(lost), "connections_max": max(connections or [0]), "restart": restart_note}


def recorded_once(proxies: list, url: str, rounds: int, tag: str) -> dict:
    """The same new request sent to every proxy at once, `rounds` times: entries per request, upstream calls."""
    per_request = []
    for n in range(rounds):
        text = f"all at once {tag} {n}"
        barrier = threading.Barrier(len(proxies))
        clients = [Client(p) for p in proxies]

        def send(c: Client) -> None:
            barrier.wait()
            c.ask(text)

        threads = [threading.Thread(target=send, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with psycopg.connect(url) as con:
            per_request.append(con.execute("SELECT count(*) FROM entries WHERE last_text = %s", [text]).fetchone()[0])
    return {"rounds": rounds, "entries_per_request": dict(Counter(per_request))}


def hit_throughput(proxy, prompts: list[str], clients: int, seconds: float) -> float:
    stop = threading.Event()
    done = Counter()
    lock = threading.Lock()

    def run(c: int) -> None:
        me, rng, n = Client(proxy), random.Random(c), 0
        while not stop.is_set():
            status, headers = me.ask(rng.choice(prompts))
            n += status == 200 and headers.get("x-semula-decision") == "hit"
        with lock:
            done["hits"] += n

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return done["hits"] / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run, to /tmp/semula-bench/")
    parser.add_argument("--proxies", type=int, default=4)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args(argv)
    seconds, samples, rounds, hit_seconds = (8, 10, 5, 4) if args.quick else (40, 40, 20, 15)
    work = Path(tempfile.mkdtemp(prefix="semula-bench-shared-"))
    (work / "conf").mkdir()
    server = pg_helpers.start_postgres()
    fake = start_fake_provider(work / "fakecerts")
    started = []
    tag = f"{time.time_ns() % 10**9}"
    try:
        url = server.new_database()

        def proxy(name: str, mode: str, store: str | None):
            (work / name).mkdir()
            extra = ("--store", store) if store else ()
            handle = start_proxy(mode=mode, data_dir=work / name / "data", confdir=work / "conf",
                                 upstream_port=fake.port, extra_args=extra, timeout=120)
            started.append(handle)
            return handle

        proxies = [proxy(f"p{i}", "auto", url) for i in range(args.proxies)]
        observer = proxy("observer", "replay", url)
        known = [f"known {tag} question {i} about the shared store" for i in range(50)]
        for i, text in enumerate(known):
            Client(proxies[i % len(proxies)]).ask(text)
        delays = visibility(proxies, observer, samples, tag)
        once = recorded_once(proxies, url, rounds, tag)
        load = mixed_load(proxies, args.clients, seconds, known, tag, server, url)
        duck = proxy("duck", "auto", None)
        for text in known:
            Client(duck).ask(text)
        pg_hits = hit_throughput(proxies[0], known, args.clients, hit_seconds)
        duck_hits = hit_throughput(duck, known, args.clients, hit_seconds)
    finally:
        for handle in started:
            handle.stop()
        stop_process(fake.proc)
        pg_helpers.discard(server)
    write_results(args, machine(postgres=str(server.bindir)), delays, once, load, pg_hits, duck_hits)
    return 0


def write_results(args, about: dict, delays: list[float], once: dict, load: dict, pg_hits: float,
                  duck_hits: float) -> None:
    counts = load["counts"]
    errors = Counter(e.split(":")[0] for e in load["errors"])
    lines = [
        "# Shared store: many proxies on one Postgres", "",
        "`scripts/bench.py shared_store" + (" --quick" if args.quick else "") + "`: a throwaway PostgreSQL 15, the "
        "HTTPS fake provider, real `semula proxy` processes and httpx clients, all on this one machine.", "",
        "| machine | |", "|---|---|", *[f"| {k} | {v} |" for k, v in about.items()], "",
        f"## Mixed load: {args.proxies} proxies × {args.clients} clients, {load['elapsed']:.0f} s, "
        "70 % hits, 20 % new calls, 10 % streams", "",
        "| figure | value |", "|---|---|",
        f"| requests | {counts.get('requests', 0)} ({counts.get('requests', 0) / load['elapsed']:.0f}/s over all proxies) |",
        f"| decisions | {', '.join(f'{k} {v}' for k, v in sorted(counts.items()) if k != 'requests')} |",
        f"| errors (non-200 or transport) | {len(load['errors'])} {dict(errors) if errors else ''} |",
        f"| Postgres restart | {load['restart']} |",
        f"| recordings acknowledged (x-semula-entry on a miss) | {load['acknowledged']} |",
        f"| acknowledged and then lost | {load['lost']} |",
        f"| Postgres connections used (max sampled; {args.proxies} proxies + the replay observer, "
        f"each a pool of 1–4 and one LISTEN) | {load['connections_max']} |", "",
        f"## The same new request to all {args.proxies} proxies at once", "",
        f"{once['rounds']} rounds; entries per request: {once['entries_per_request']} (one entry each: "
        "`INSERT … ON CONFLICT`). Each proxy that missed still went upstream once: proxies do not coalesce "
        "each other's in-flight calls, only their own.", "",
        "## Cross-proxy visibility", "",
        f"Recorded through one proxy, polled (every 10 ms) through a replay proxy until it is a hit; "
        f"{len(delays)} recordings.", "",
        "| p50 | p99 | max |", "|---|---|---|",
        f"| {pct(delays, 50):.0f} ms | {pct(delays, 99):.0f} ms | {max(delays):.0f} ms |", "",
        f"## Hit throughput of one proxy, {args.clients} clients, side by side", "",
        "| store | hits/s | ratio |", "|---|---|---|",
        f"| DuckDB file | {duck_hits:.0f} | 1.00 |",
        f"| Postgres | {pg_hits:.0f} | {pg_hits / duck_hits if duck_hits else float('nan'):.2f} |", "",
        "Hits are served from each proxy's memory on both stores; the store is only read for an answer not "
        "in the answer cache. The machine is shared (2 cores, other jobs running): read ratios, not absolutes.",
    ]
    out = (Path(tempfile.gettempdir()) / "semula-bench" if args.quick else RESULTS) / "shared-store.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out.with_suffix(".json")).write_text(json.dumps({"delays_ms": delays, "once": once, "load": {
        k: v for k, v in load.items() if k != "errors"}, "errors": load["errors"][:50], "pg_hits": pg_hits,
        "duck_hits": duck_hits}, indent=1, default=str) + "\n", encoding="utf-8")
    print("\n".join(lines))
