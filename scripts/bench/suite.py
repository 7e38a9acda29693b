"""What a user compares: a whole pytest suite replayed through semula vs in-process vcrpy cassettes.

A generated suite of N tests (scripts/bench/suite_files.py), each making one or two openai SDK calls,
runs four ways, interleaved over R rounds (the order rotating): pytest-recording cassettes replayed
with `--record-mode=none`; `pytest --semula=replay`; `semula exec --mode replay -- pytest`; and the
local fake provider called directly, nothing recorded. Cassettes and recordings are made once
beforehand against the same fake. The proxy's start-up (and stop) is also timed alone each round,
through the code the plugin and exec use (session/run.py). Writes benchmark/results/suite.md (+ .json).

    .venv/bin/python scripts/bench.py suite                  # 500 tests, 3 rounds: benchmark/results/suite.md (+ .json)
    .venv/bin/python scripts/bench.py suite --tests 5000     # benchmark/results/suite-5000.md
    .venv/bin/python scripts/bench.py suite --tests 50 --rounds 1 --out /tmp/suite.md   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.common import log
from bench.suite_files import write_suite

VARIANTS = ("vcrpy", "semula pytest", "semula exec", "semula pytest all", "semula exec all", "direct")
TITLES = {"vcrpy": "pytest-recording (vcrpy) cassettes, `--record-mode=none`",
          "semula pytest": "`pytest --semula=replay`", "semula exec": "`semula exec --mode replay -- pytest`",
          "semula pytest all": "`pytest --semula=replay --semula-intercept-all`",
          "semula exec all": "`semula exec --intercept-all --mode replay -- pytest`",
          "direct": "the local fake provider, no recording"}
SEMULA = ("semula pytest", "semula exec", "semula pytest all", "semula exec all")
DROPPED_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY",
               "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PYTEST_ADDOPTS")


class Bench:
    """The work dir, the fake provider, and how each variant's pytest is started and checked."""

    def __init__(self, work: Path, tests: int, fake_port: int) -> None:
        self.work, self.tests, self.fake_port = work, tests, fake_port
        self.suite, self.data_dir, self.recordings = work / "suite", work / "semula-data", work / "semula-recordings"
        self.confdir, self.fake_ca = work / "confdir", work / "fakecerts" / "fake-ca.pem"
        self.calls = 0

    def env(self, to_fake: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SEMULA_", "OPENAI_")) and k not in DROPPED_ENV}
        env["OPENAI_API_KEY"] = "sk-bench-not-a-real-key"
        if to_fake:  # the fake's URL and CA; semula's variants call api.openai.com through the proxy
            env.update(BENCH_BASE_URL=f"https://127.0.0.1:{self.fake_port}/v1", SSL_CERT_FILE=str(self.fake_bundle()))
        return env

    def fake_bundle(self) -> Path:
        """The public roots (certifi's, what the SDK loads by default) plus the fake's CA: every client then loads
        a bundle of the size semula's (public roots plus its CA) has. With the fake's CA alone, each of the
        suite's 300 SSL contexts loaded 1 certificate instead of ~118, 32 ms less apiece (cProfile), which
        the vcrpy and direct variants gained over semula's and no user's machine has."""
        import certifi

        bundle = self.work / "fake-bundle.pem"
        if not bundle.exists():
            bundle.write_text(Path(certifi.where()).read_text() + self.fake_ca.read_text())
        return bundle

    def semula_sets(self, upstream: bool) -> list[str]:
        sets = [f"confdir={self.confdir}"]
        if upstream:  # recording: api.openai.com is the fake
            sets += [f"map_remote=|//api.openai.com/|//127.0.0.1:{self.fake_port}/", "ssl_insecure=true"]
        return sets

    def command(self, variant: str) -> tuple[list[str], dict[str, str]]:
        pytest = [sys.executable, "-m", "pytest", "-q", str(self.suite)]
        semula_dirs = [f"--semula-data-dir={self.data_dir}", f"--semula-recordings={self.recordings}"]
        commands = {
            "vcrpy record": ([*pytest, "--record-mode=once"], self.env(True)),
            "vcrpy": ([*pytest, "--record-mode=none"], self.env(True)),
            "semula record": ([*pytest, "-p", "no:recording", "--semula=auto", *semula_dirs,
                               *(f"--semula-set={s}" for s in self.semula_sets(True))], self.env(False)),
            "semula pytest": ([*pytest, "-p", "no:recording", "--semula=replay", *semula_dirs,
                               *(f"--semula-set={s}" for s in self.semula_sets(False))], self.env(False)),
            "semula exec": ([sys.executable, "-m", "semula", "exec", "--mode", "replay", "--data-dir",
                             str(self.data_dir), "--recordings", str(self.recordings),
                             *(a for s in self.semula_sets(False) for a in ("--set", s)),
                             "--", *pytest, "-p", "no:recording"], self.env(False)),
            "direct": ([*pytest, "-p", "no:recording"], self.env(True)),
        }
        commands["semula pytest all"] = ([*commands["semula pytest"][0], "--semula-intercept-all"], self.env(False))
        argv = commands["semula exec"][0]
        commands["semula exec all"] = ([*argv[:4], "--intercept-all", *argv[4:]], self.env(False))
        return commands[variant]

    def run(self, variant: str) -> dict[str, Any]:
        """One timed pytest run; raises unless every test passed (and, for semula, every call was a hit)."""
        argv, env = self.command(variant)
        cpu0, t0 = children_cpu(), time.perf_counter()
        result = subprocess.run(argv, cwd=self.suite, env=env, capture_output=True, text=True, timeout=3600)
        wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
        output = result.stdout + result.stderr
        passed = re.search(r"(\d+) passed", output)
        if result.returncode != 0 or passed is None or int(passed.group(1)) != self.tests:
            raise RuntimeError(f"{variant}: exit {result.returncode}, {passed and passed.group(0)} of {self.tests}:\n"
                               f"{output[-4000:]}")
        hits = re.search(r"semula: (\d+) calls? · (\d+) hits?", output)
        if variant in SEMULA and (hits is None or int(hits.group(2)) != self.calls):
            raise RuntimeError(f"{variant}: expected {self.calls} hits, the summary says {hits and hits.group(0)}:\n"
                               f"{output[-3000:]}")
        return {"variant": variant, "wall_s": wall, "cpu_s": cpu, "summary": hits.group(0) if hits else None}

    def startup(self) -> dict[str, float]:
        """The replay proxy's start-up (to ready) and stop, alone, as the plugin and exec open it."""
        from semula.session.run import open_session

        sets = (f"semula_recordings={self.recordings}", *self.semula_sets(False))
        cpu0, t0 = children_cpu(), time.perf_counter()
        session = open_session("replay", "127.0.0.1", 0, self.data_dir, "default", sets, 120.0, lambda _: None)
        ready = time.perf_counter() - t0
        t1 = time.perf_counter()
        session.stop()
        return {"variant": "start-up", "ready_s": ready, "stop_s": time.perf_counter() - t1,
                "cpu_s": children_cpu() - cpu0}


def children_cpu() -> float:
    """user + system CPU seconds of every waited-for descendant: pytest, and the proxy it or exec started."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def measure(args: argparse.Namespace, procs: common.Processes, work: Path) -> dict[str, Any]:
    # No pause at a stream's end: the direct variant times the SDK and the network, not a sleep.
    _, fake_port = common.start_fake_provider(procs, work, "--stream-end-pause", "0")
    bench = Bench(work, args.tests, fake_port)
    kinds = write_suite(bench.suite, args.tests)
    bench.calls = kinds.pop("calls")
    common.ensure_ca(bench.confdir)
    log(f"suite of {args.tests} tests ({bench.calls} calls) in {bench.suite}")
    record = {}
    for variant in ("vcrpy record", "semula record"):
        record[variant] = bench.run(variant)["wall_s"]
        log(f"{variant}: {record[variant]:.1f} s")
    cassettes = len(list((bench.suite / "cassettes").glob("**/*.yaml")))
    recordings = len([p for p in bench.recordings.glob("**/*") if p.is_file()])
    rounds: list[list[dict[str, Any]]] = []
    order = [*VARIANTS, "start-up"]
    for r in range(args.rounds):
        rotated = order[r % len(order):] + order[:r % len(order)]  # no variant always goes first
        results = []
        for variant in rotated:
            results.append(bench.startup() if variant == "start-up" else bench.run(variant))
            x = results[-1]
            log(f"round {r + 1} {variant:<13} " + (f"ready {x['ready_s']:.2f} s, stop {x['stop_s']:.2f} s"
                                                   if variant == "start-up" else f"{x['wall_s']:.2f} s"))
        rounds.append(results)
    return {"params": {"tests": args.tests, "rounds": args.rounds, "calls": bench.calls, "kinds": kinds},
            "record_s": record, "cassettes": cassettes, "recording_files": recordings,
            "rounds": rounds, "figures": figures(rounds, args.tests), "load_after": common.loadavg()}


def figures(rounds: list[list[dict[str, Any]]], tests: int) -> dict[str, Any]:
    """Per variant min/median/max wall; ratios and per-test costs computed per round, then summarised."""
    by_round = [{x["variant"]: x for x in results} for results in rounds]
    wall = {v: spread([r[v]["wall_s"] for r in by_round]) for v in VARIANTS}
    cpu = {v: spread([r[v]["cpu_s"] for r in by_round]) for v in [*VARIANTS, "start-up"]}
    cpu_ratio = {v: spread([r[v]["cpu_s"] / r["vcrpy"]["cpu_s"] for r in by_round]) for v in VARIANTS}
    ready = spread([r["start-up"]["ready_s"] for r in by_round])
    stop = spread([r["start-up"]["stop_s"] for r in by_round])
    ratio = {v: spread([r[v]["wall_s"] / r["vcrpy"]["wall_s"] for r in by_round]) for v in VARIANTS}
    per_test_ms = {v: spread([(r[v]["wall_s"] - r["vcrpy"]["wall_s"]) * 1000 / tests for r in by_round])
                   for v in VARIANTS}
    after_startup = {v: spread([(r[v]["wall_s"] - r["start-up"]["ready_s"] - r["start-up"]["stop_s"]
                                 - r["vcrpy"]["wall_s"]) * 1000 / tests for r in by_round]) for v in SEMULA}
    return {"wall_s": wall, "cpu_s": cpu, "cpu_ratio_to_vcrpy": cpu_ratio, "ready_s": ready, "stop_s": stop,
            "ratio_to_vcrpy": ratio,
            "extra_ms_per_test_vs_vcrpy": per_test_ms, "extra_ms_per_test_vs_vcrpy_without_startup": after_startup}


def spread_text(s: dict[str, float], digits: int = 2, unit: str = "") -> str:
    return f"{s['median']:.{digits}f}{unit} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def render(d: dict[str, Any]) -> str:
    from bench.render import head, table

    p, fg = d["params"], d["figures"]
    kinds = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in p["kinds"].items())
    out = head(f"Suite benchmark: {p['tests']:,} pytest tests replayed through semula vs vcrpy cassettes", d,
               "the per-round ratios (same machine, interleaved runs) are the point.") + [
        "## Method", "",
        f"- A generated suite of {p['tests']:,} tests in files of 100 (`scripts/bench/suite_files.py`): {kinds}; "
        f"{p['calls']:,} openai SDK calls in all (sync client shared per session, async clients per test). The "
        "same files run every way; each module carries pytest-recording's `vcr` marker (inert under "
        "`-p no:recording`).",
        f"- Made once beforehand against `tests/support/fakeprovider.py` (stream end pause 0): {d['cassettes']:,} cassettes "
        f"with `--record-mode=once` ({d['record_s']['vcrpy record']:.1f} s; `vcr_config` matches on the body too, as "
        f"semula does, and filters `authorization`), and {d['recording_files']:,} recording files with "
        f"`pytest --semula=auto` ({d['record_s']['semula record']:.1f} s, `map_remote` to the fake).",
        "- Timed, each a fresh `python -m pytest -q` process, wall time from spawn to exit (so semula's include the "
        "proxy's start-up and stop): " + "; ".join(f"**{v}**: {TITLES[v]}" for v in VARIANTS) + ". Every run must "
        "pass every test, and semula's summary must count every call as a hit. The replay proxies use the data dir "
        "the recording run left (a developer's re-run; a fresh CI checkout also imports the folder first).",
        f"- **start-up**: `session.run.open_session` (what the plugin and exec call) to ready, and its `stop`, timed "
        f"alone in the benchmark's process. {p['rounds']} rounds; the order of the seven rotates each round. Ratios "
        "and per-test costs are computed within each round, then summarised: median (min–max over rounds).", "",
        "## Results", "",
        table(["variant", "wall s", "wall ÷ vcrpy", "extra wall ms per test vs vcrpy", "wall ms per test", "CPU s",
               "CPU ÷ vcrpy"],
              [[TITLES[v], spread_text(fg["wall_s"][v]), spread_text(fg["ratio_to_vcrpy"][v], unit="×"),
                spread_text(fg["extra_ms_per_test_vs_vcrpy"][v], 2),
                f"{fg['wall_s'][v]['median'] * 1000 / p['tests']:.2f}", spread_text(fg["cpu_s"][v]),
                spread_text(fg["cpu_ratio_to_vcrpy"][v], unit="×")] for v in VARIANTS]), "",
        "- CPU = user + system seconds of the run's whole process tree (pytest, and for semula the proxy and exec; "
        "`getrusage(RUSAGE_CHILDREN)`): steadier than wall time on a loaded machine, but it does not see the fake "
        "provider's CPU in *direct*, nor time spent waiting.",
        f"- semula proxy start-up to ready: {spread_text(fg['ready_s'], unit=' s')}; stop (call log flushed, summary "
        f"read): {spread_text(fg['stop_s'], unit=' s')}; CPU of the two: "
        f"{spread_text(fg['cpu_s']['start-up'], unit=' s')}.",
        "- Extra ms per test vs vcrpy once the start-up and stop are taken out: "
        + "; ".join(f"{TITLES[v]} {spread_text(fg['extra_ms_per_test_vs_vcrpy_without_startup'][v])}" for v in SEMULA)
        + ".", "- Target (issue 35): semula's replay at most 1.0× vcrpy's wall time at 500 tests: "
        + ", ".join(f"{TITLES[v]} {fg['ratio_to_vcrpy'][v]['median']:.2f}×" for v in SEMULA)
        + f" (median of the per-round ratios, at {p['tests']:,} tests). `--intercept-all` decrypts every HTTPS host, "
        "so clients trust semula's CA alone: each SSL context an SDK client builds loads 1 certificate instead of "
        "the public roots' ~140 (docs/performance.md says what it costs).", "", "Each round:", "",
        table(["round", *(f"{v} wall / CPU s" for v in VARIANTS), "start-up ready / stop / CPU s"],
              [[i + 1, *(f"{x[v]['wall_s']:.2f} / {x[v]['cpu_s']:.2f}" for v in VARIANTS),
                f"{x['start-up']['ready_s']:.2f} / {x['start-up']['stop_s']:.2f} / {x['start-up']['cpu_s']:.2f}"]
               for i, x in enumerate({y["variant"]: y for y in rr} for rr in d["rounds"])]), "",
        f"Load average after the run: {d['load_after']}.", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the order rotates)")
    parser.add_argument("--out", type=Path, default=None, help="results markdown (default benchmark/results/suite.md; "
                                                               "suite-<N>.md for other sizes)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (suite, cassettes, recordings)")
    parser.add_argument("--render", type=Path, default=None, metavar="JSON",
                        help="only re-render a saved JSON of figures into its .md")
    args = parser.parse_args(argv)
    if args.render:
        data = json.loads(args.render.read_text())
        data["figures"] = figures(data["rounds"], data["params"]["tests"])
        args.render.with_suffix(".md").write_text(render(data), encoding="utf-8")
        return 0
    import mitmproxy.version
    import openai
    import vcr

    info = common.machine(mitmproxy=mitmproxy.version.VERSION, openai=openai.__version__, vcrpy=vcr.__version__)

    def body(procs: common.Processes, work: Path) -> int:
        data = {"benchmark": "suite", "command": common.command("suite", argv),
                "machine": info, **measure(args, procs, work)}
        out = args.out or common.RESULTS / ("suite.md" if args.tests == 500 else f"suite-{args.tests}.md")
        common.write_json(out.with_suffix(".json"), data)
        out.write_text(render(data), encoding="utf-8")
        log(f"wrote {out} (+ .json)")
        return 0

    return common.run_in_work_dir(body, "semula-bench-suite-", args.keep, "stopping the fake provider")
