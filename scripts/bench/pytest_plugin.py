"""What the pytest plugin costs: inactive (installed, no --semula) and active in replay mode.

Runs a generated suite of trivial tests (no calls) with `-p no:semula`, with the plugin inactive,
and with `--semula=replay`, interleaved, in one run (ratios); then times the question the active
plugin asks the proxy after each test (new refusals?). Writes benchmark/results/pytest_plugin.md.

    .venv/bin/python scripts/bench.py pytest_plugin [--tests 500] [--rounds 4] [--questions 500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common

VARIANTS = {
    "without the plugin (-p no:semula)": ["-p", "no:semula"],
    "plugin inactive (no --semula)": [],
    "plugin active (--semula=replay)": ["--semula=replay"],
}


def run(work: Path, suite: Path, variant: list[str], run_id: str) -> float:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite), *variant]
    if "--semula=replay" in variant:
        args += [f"--semula-data-dir={work / f'data-{run_id}'}", f"--semula-recordings={work / 'none'}",
                 f"--semula-set=confdir={work / 'conf'}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMULA_")}
    started = time.perf_counter()
    result = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"pytest failed ({' '.join(variant)}):\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    return elapsed


def question_latency(work: Path, questions: int) -> list[float]:
    """Seconds per `refusals.since` question to a running replay proxy, as the plugin asks it."""
    from semula.session.run import open_session
    from semula.admin.client import call
    from semula.admin.protocol import read_admin_info

    data_dir = work / "data-latency"
    session = open_session("replay", "127.0.0.1", 0, data_dir, "default",
                           (f"semula_recordings={work / 'none'}", f"confdir={work / 'conf'}"), 120.0, lambda _: None)
    try:
        info = read_admin_info(data_dir)
        seconds = []
        for _ in range(questions):
            started = time.perf_counter()
            call(data_dir, "refusals.since", {"after": 0, "tag": None}, timeout=10, info=info)
            seconds.append(time.perf_counter() - started)
        return seconds
    finally:
        session.stop()


def import_ms(repeats: int = 5) -> float:
    """What the inactive plugin costs at most: importing it (pytest itself already imported), median ms."""
    code = ("import time, pytest; t = time.perf_counter(); import semula.pytest_plugin, semula.core.modes; "
            "print((time.perf_counter() - t) * 1000)")
    return statistics.median(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                  check=True).stdout) for _ in range(repeats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--questions", type=int, default=500)
    options = parser.parse_args(argv)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="semula-bench-pytest-") as tmp:
        work = Path(tmp)
        suite = work / "test_suite.py"
        suite.write_text("".join(f"def test_{i}():\n    pass\n\n" for i in range(options.tests)))
        for round_no in range(options.rounds):
            order = list(VARIANTS.items())  # alternate the order: no variant always runs first
            for name, variant in order if round_no % 2 == 0 else reversed(order):
                times[name].append(run(work, suite, variant, str(round_no)))
        latency = sorted(question_latency(work, options.questions))
    plugin_import_ms = import_ms()
    median = {name: statistics.median(values) for name, values in times.items()}
    base = median["without the plugin (-p no:semula)"]
    q50, q90 = latency[len(latency) // 2] * 1000, latency[int(len(latency) * 0.9)] * 1000
    lines = ["# pytest plugin overhead", "",
             f"A generated suite of {options.tests} trivial tests (no calls), {options.rounds} interleaved rounds (order alternating), "
             "medians of wall time; `scripts/bench.py pytest_plugin`. The active plugin's cost is one proxy "
             "start-up and stop per session, plus, in replay mode, one question to the proxy's admin endpoint per "
             "passing test (at its teardown: new refusals? and the next test; after the call phase the plugin "
             "reads the last refusal's number from a file and asks only when it changed).", "",
             "| variant | wall (s) | ratio to without |", "|---|---|---|"]
    for name in VARIANTS:
        lines.append(f"| {name} | {median[name]:.2f} | {median[name] / base:.2f} |")
    lines += ["", f"- importing the plugin (all an inactive plugin adds, with its options and marker): "
                  f"{plugin_import_ms:.1f} ms; a wall-time gap beyond that is the machine's noise (see the load)",
              f"- one admin question (`refusals.since`), {options.questions} asked in a row: median "
                  f"{q50:.2f} ms, p90 {q90:.2f} ms; per passing test about {q50:.2f} ms", "",
              "## Machine", ""]
    lines += [f"- {key}: {value}" for key, value in common.machine().items()]
    out = common.RESULTS / "pytest_plugin.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())
    return 0
