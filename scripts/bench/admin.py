"""The admin endpoint's cost per call: a fresh connection against the plugin's kept-alive client.

A fresh urllib connection (`admin.client.call`) against the kept-alive `AdminClient` the pytest plugin
uses (3-4 calls per test), side by side in each round.

    .venv/bin/python scripts/bench.py admin [--calls N] [--rounds R]    # writes benchmark/results/admin.md
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS, machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    from semula.admin.client import AdminClient, call
    from semula.admin.server import AdminServer

    data_dir = Path(tempfile.mkdtemp(prefix="semula-bench-admin-"))
    server = AdminServer(data_dir, lambda method, params: {"last": 1, "refusals": []}, {})
    fresh, kept = [], []
    try:
        for _ in range(args.rounds):
            started = time.perf_counter()
            for _ in range(args.calls):
                call(data_dir, "refusals.since", {"after": 0}, info=server.info)
            fresh.append((time.perf_counter() - started) / args.calls * 1e6)
            client = AdminClient(data_dir, server.info)
            started = time.perf_counter()
            for _ in range(args.calls):
                client.call("refusals.since", {"after": 0})
            kept.append((time.perf_counter() - started) / args.calls * 1e6)
            client.close()
    finally:
        server.close()
    ratios = [f / k for f, k in zip(fresh, kept)]
    lines = ["# Admin endpoint: per-call cost", "", "| | value |", "|---|---|",
             *(f"| {k} | {v} |" for k, v in machine().items()), "",
             f"{args.rounds} rounds of {args.calls} calls each way, in one process against one in-process server.", "",
             "| round | fresh connection (µs/call) | kept-alive (µs/call) | ratio |", "|---|---|---|---|",
             *(f"| {i + 1} | {f:.0f} | {k:.0f} | {r:.2f}× |" for i, (f, k, r) in enumerate(zip(fresh, kept, ratios))),
             "", f"Median ratio {statistics.median(ratios):.2f}× (range {min(ratios):.2f}–{max(ratios):.2f}×). "
             "The pytest plugin makes 3-4 such calls per test.", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "admin.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0
