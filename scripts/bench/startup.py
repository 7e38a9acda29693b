"""Start-up and stop of the proxy: `semula proxy`, `semula exec` and the pytest plugin, cold and reused.

Each round spawns the command and times, from outside:
- proxy: spawn → its "semula ready" line (the line `session/run.py` waits for) with the port answering,
  then SIGINT → exit (the call log flushed by mitmproxy's `done` hooks);
- exec: spawn → the child's first line (`semula exec -- python -c ...` prints a timestamp; the child's own
  Python start-up, measured alone, is subtracted), then the child's exit → exec's exit;
- plugin: `pytest --semula=replay` on a one-test file: spawn → the test's body (pytest's own start-up
  without the plugin, measured alone, subtracted), then the test's body → exit (ditto).
Cold: a fresh data dir each round; reused: the same data dir every round (its store and logs exist).
With `--recordings N`, the proxy alone on a recordings folder of N files (`semula export` of the lexical
benchmark's entries): cold as a clean clone's CI loads it, reused as a developer's next run; each round
also stops a proxy right after its ready line, while it still loads (a Ctrl-C, a suite that fails at once).
The CA is made once beforehand (a fresh confdir's CA is a cost of the very first run only), and the
`python -X importtime` of `semula proxy`'s import chain is listed, heaviest first.

    .venv/bin/python scripts/bench.py startup [--rounds N] [--only proxy,exec,plugin]   # writes benchmark/results/startup.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, RESULTS, ensure_ca, free_port, machine, pct

ENV = {**os.environ, "PYTHONPATH": str(REPO / "addon")}
# The child stamps when it starts (ready), then waits as a first call would for the store to be open
# (the line the proxy prints then, in its console file) and stamps again: its exit is the stop's start.
STORE_OPEN = ("semula: store open", "semula: recordings ", "semula: NOT recording")
WAIT_STORE = (f"import os, pathlib, time\nprint('STAMP', time.time(), flush=True)\n"
              f"log = pathlib.Path(os.environ['BENCH_STARTUP_DATA_DIR'], 'proxy.log')\n"
              f"while not (log.exists() and any(m in log.read_text() for m in {STORE_OPEN!r})):\n"
              f"    time.sleep(0.005)\n"
              f"print('OPENED', time.time(), flush=True)\n")
STAMP = WAIT_STORE
OPEN_AFTER_READY: list[float] = []  # proxy rounds: ready line → store-open line (what a first call may wait)
TEST_FILE = "def test_one():\n" + "".join(f"    {line}\n" for line in WAIT_STORE.splitlines())


def _wait_line(proc: subprocess.Popen, marker: str | tuple[str, ...], timeout: float = 60.0) -> tuple[float, str]:
    """Read the child's merged output until a line containing `marker` (or one of them); its arrival
    time and the line."""
    deadline = time.monotonic() + timeout
    markers = (marker,) if isinstance(marker, str) else marker
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        if any(m in line for m in markers):
            return time.time(), line
        if time.monotonic() > deadline:
            break
    raise RuntimeError(f"{proc.args[:6]}: no {marker!r} line (exit {proc.poll()})")


def _port_answers(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def proxy_round(data_dir: Path, confdir: Path, recordings: Path | None = None, opens: list[float] | None = None,
                early: bool = False) -> tuple[float, float]:
    """(spawn → ready, SIGINT → exit): the stop once the store is open (its time after ready appended to
    `opens`), or right after ready (`early`)."""
    port = free_port()
    started = time.time()
    folder = ["--set", f"semula_recordings={recordings}"] if recordings is not None else []
    proc = subprocess.Popen([sys.executable, "-m", "semula", "proxy", "--mode", "replay", "--listen-port", str(port),
                             "--data-dir", str(data_dir), "--set", f"confdir={confdir}", *folder],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV, cwd=data_dir.parent)
    try:
        _wait_line(proc, "semula ready")
        while not _port_answers(port):
            time.sleep(0.005)
        ready = time.time() - started
        if not early:
            opened, _ = _wait_line(proc, STORE_OPEN, timeout=600)
            (OPEN_AFTER_READY if opens is None else opens).append(opened - started - ready)
        stopping = time.time()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        return ready, time.time() - stopping
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _stamped(argv: list[str], cwd: Path, data_dir: Path) -> tuple[float, float]:
    """Spawn argv whose child prints STAMP <time> at its start or body, then OPENED <time> once the
    store is open: (spawn → stamp, opened → exit)."""
    started = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**ENV, "BENCH_STARTUP_DATA_DIR": str(data_dir)}, cwd=cwd)
    try:
        _, line = _wait_line(proc, "STAMP ")
        stamp = float(line.split("STAMP ", 1)[1].split()[0])
        _, line = _wait_line(proc, "OPENED ")
        opened = float(line.split("OPENED ", 1)[1].split()[0])
        out, _ = proc.communicate(timeout=60)
        if proc.returncode:
            raise RuntimeError(f"{argv[:6]} exited {proc.returncode}: {out.decode(errors='replace')[-2000:]}")
        return stamp - started, time.time() - opened
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def exec_round(data_dir: Path, confdir: Path) -> tuple[float, float]:
    return _stamped([sys.executable, "-m", "semula", "exec", "--mode", "replay", "--data-dir", str(data_dir),
                     "--set", f"confdir={confdir}", "--", sys.executable, "-c", STAMP], data_dir.parent, data_dir)


def plugin_round(data_dir: Path, confdir: Path, plugin: bool = True) -> tuple[float, float]:
    test = data_dir.parent / "test_one.py"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", str(test)]
    if plugin:
        argv += ["--semula=replay", f"--semula-data-dir={data_dir}", f"--semula-set=confdir={confdir}"]
    return _stamped(argv, data_dir.parent, data_dir)


def measure(name: str, rounds: int, work: Path, confdir: Path) -> dict[str, list[float]]:
    run = {"proxy": proxy_round, "exec": exec_round, "plugin": plugin_round}[name]
    out: dict[str, list[float]] = {"cold ready": [], "cold stop": [], "reused ready": [], "reused stop": []}
    reused = work / f"{name}-reused" / "data"
    reused.parent.mkdir()
    (reused.parent / "test_one.py").write_text(TEST_FILE)
    run(reused, confdir)  # the reused dir's first (cold) run is not counted
    for i in range(rounds):
        cold = work / f"{name}-cold-{i}" / "data"
        cold.parent.mkdir()
        (cold.parent / "test_one.py").write_text(TEST_FILE)
        for kind, data_dir in (("cold", cold), ("reused", reused)):  # interleaved: the load hits both alike
            ready, stop = run(data_dir, confdir)
            out[f"{kind} ready"].append(ready)
            out[f"{kind} stop"].append(stop)
        shutil.rmtree(cold.parent, ignore_errors=True)
        print(f"{name} round {i + 1}: " + " · ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in out.items()),
              flush=True)
    return out


def exported_folder(n: int, work: Path) -> Path:
    """A recordings folder of `n` files: the lexical benchmark's entries stored, then `semula export`."""
    from bench import common

    _, _, entries = common.workload(n)
    store, _, _ = common.seeded_store(work / "seed", entries)
    store.close()
    folder = work / "recordings"
    subprocess.run([sys.executable, "-m", "semula", "export", str(folder), "--data-dir", str(work / "seed")],
                   env=ENV, check=True, capture_output=True, timeout=600)
    return folder


def folder_rounds(n: int, rounds: int, work: Path, confdir: Path) -> dict[str, list[float]]:
    """The proxy on a folder of n recordings, cold and reused: ready, the load after ready, the stop once
    loaded, and the stop right after ready (interleaved)."""
    folder = exported_folder(n, work)
    out: dict[str, list[float]] = {}
    reused = work / "folder-reused" / "data"
    reused.parent.mkdir()
    proxy_round(reused, confdir, folder)  # the reused dir's first (cold) load is not counted
    for i in range(rounds):
        for kind in ("cold", "reused"):
            for early in (False, True):
                data_dir = reused if kind == "reused" else work / f"folder-cold-{i}-{early}" / "data"
                data_dir.parent.mkdir(exist_ok=True)
                opens: list[float] = []
                ready, stop = proxy_round(data_dir, confdir, folder, opens, early)
                when = "right after ready" if early else "once loaded"
                out.setdefault(f"{kind} ready", []).append(ready)
                out.setdefault(f"{kind} load after ready", []).extend(opens)
                out.setdefault(f"{kind} stop {when}", []).append(stop)
                if kind == "cold":
                    shutil.rmtree(data_dir.parent, ignore_errors=True)
        print(f"folder round {i + 1}: " + " · ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in out.items()),
              flush=True)
    return out


def render_folder(n: int, out: dict[str, list[float]], rounds: int) -> list[str]:
    return ["", f"## The proxy on a recordings folder of {n:,} files", "",
            f"{rounds} rounds (cold: a fresh data dir, as a clean clone's CI; reused: the same one), seconds. "
            "*Load after ready*: the ready line → the line saying the recordings are loaded (a first call "
            "waits for it); *stop right after ready*: SIGINT while the folder still loads.", "",
            "| measure | median | p90 | max |", "|---|---|---|---|",
            *(f"| {k} | {statistics.median(v):.3f} | {pct(v, 90):.3f} | {max(v):.3f} |" for k, v in out.items()), ""]


def baselines(rounds: int, work: Path) -> dict[str, tuple[float, float]]:
    """What the child alone costs: Python's start for exec, pytest's start and end without the plugin."""
    opened = work / "data"  # no proxy: its console file says the store is open from the start
    opened.mkdir(exist_ok=True)
    (opened / "proxy.log").write_text(STORE_OPEN[0] + "\n")
    python = [_stamped([sys.executable, "-c", STAMP], work, opened) for _ in range(rounds)]
    (work / "test_one.py").write_text(TEST_FILE)
    pytest_only = [plugin_round(work / "data", work, plugin=False) for _ in range(rounds)]
    median = statistics.median
    return {"exec": (median(p[0] for p in python), median(p[1] for p in python)),
            "plugin": (median(p[0] for p in pytest_only), median(p[1] for p in pytest_only))}


def importtime(work: Path) -> list[tuple[int, int, str]]:
    """`python -X importtime -m semula proxy --help`: (cumulative µs, self µs, module), heaviest first."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "semula", "proxy", "--help"], env=ENV,
                          cwd=work, capture_output=True, text=True, timeout=120)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self" not in line:
            own, cumulative, module = (part.strip() for part in line[len("import time:"):].split("|"))
            rows.append((int(cumulative), int(own), module))
    return sorted(rows, reverse=True)


def render(figures: dict[str, dict[str, list[float]]], base: dict[str, tuple[float, float]],
           imports: list[tuple[int, int, str]], rounds: int, info: dict[str, str]) -> str:
    lines = ["# Start-up and stop", "", "| | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in info.items()), "",
             f"{rounds} rounds, cold and reused interleaved; seconds. Target: ready ≤ 0.8 s, stop ≤ 0.3 s "
             "(issue 35). exec and plugin: the child's own start and end (Python alone, pytest without "
             "the plugin) subtracted.", "",
             "| command | cold ready median | p90 | cold stop median | p90 | reused ready median | p90 | "
             "reused stop median | p90 |", "|---|---|---|---|---|---|---|---|---|"]
    for name, out in figures.items():
        start_base, stop_base = base.get(name, (0.0, 0.0))
        cells = []
        for key in ("cold ready", "cold stop", "reused ready", "reused stop"):
            values = [v - (start_base if "ready" in key else stop_base) for v in out[key]]
            cells += [f"{statistics.median(values):.3f}", f"{pct(values, 90):.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if OPEN_AFTER_READY:
        lines += ["", f"The store opens {statistics.median(OPEN_AFTER_READY):.3f} s (median; p90 "
                      f"{pct(OPEN_AFTER_READY, 90):.3f}) after the proxy's ready line, beside the client's own start; "
                      "a call that comes first waits for it. Each stop is timed once the store is open, as at the "
                      "end of a real run: a stop sent while it still opens waits for it."]
    if base:
        lines += ["", "Subtracted (median s, start · end): " + "; ".join(
            f"{k} {a:.3f} · {b:.3f}" for k, (a, b) in base.items())]
    total = imports[0][0] if imports else 0
    lines += ["", f"## Imports of `semula proxy` (python -X importtime, top 25 of {total / 1e6:.2f} s cumulative)",
              "", "| module | cumulative ms | self ms |", "|---|---|---|",
              *(f"| {m} | {c / 1000:.1f} | {s / 1000:.1f} |" for c, s, m in imports[:25]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="proxy,exec,plugin", help="comma-separated: proxy, exec, plugin")
    parser.add_argument("--out", type=Path, default=RESULTS / "startup.md")
    parser.add_argument("--recordings", type=int, default=0,
                        help="also the proxy on a folder of this many recordings (0: skip)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    info = machine()
    work = Path(tempfile.mkdtemp(prefix="semula-bench-startup-"))
    try:
        confdir = work / "conf"
        ensure_ca(confdir)
        base = baselines(max(3, args.rounds // 2), work) if {"exec", "plugin"} & set(names) else {}
        figures = {name: measure(name, args.rounds, work, confdir) for name in names}
        text = render(figures, {k: v for k, v in base.items() if k in names}, importtime(work), args.rounds, info)
        if args.recordings:
            text += "\n".join(render_folder(args.recordings, folder_rounds(args.recordings, args.rounds, work,
                                                                           confdir), args.rounds))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0
