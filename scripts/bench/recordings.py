"""How long a clean CI checkout takes to load N committed recordings into an empty data dir.

Writes benchmark/results/recordings.md: the export time, the first (cold) load and the second
(unchanged, incremental) load, with the machine and the commit.

    .venv/bin/python scripts/bench.py recordings [--entries 10000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS, machine
from entries import chat, new_entry  # tests/support, on the path through bench.common
from semula.core.settings import ProjectSettings
from semula.recordings.folder import RecordingsFolder
from semula.store.selection import StoreSpec, open_store

ANSWER = {"id": "chatcmpl-x", "object": "chat.completion", "model": "gpt-4o-mini",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "An answer of a few words. " * 8},
                       "finish_reason": "stop"}], "usage": {"prompt_tokens": 40, "completion_tokens": 30}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS / "recordings.md")
    args = parser.parse_args(argv)
    settings = ProjectSettings()
    body = json.dumps(ANSWER).encode()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = open_store(StoreSpec.parse(None, tmp / "local"))
        for i in range(args.entries):
            prompt = f"Question {i}: summarise ticket {i * 7919 % 100003} for the {i % 13}th team, briefly."
            store.upsert_entry(new_entry(chat(prompt), "bench", body=body))
        started = time.perf_counter()
        RecordingsFolder(tmp / "rec", tmp / "local").export(store)
        export_s = time.perf_counter() - started
        store.close()
        size = sum(p.stat().st_size for p in (tmp / "rec").rglob("*.json"))
        fresh = open_store(StoreSpec.parse(None, tmp / "ci"))
        started = time.perf_counter()
        first = RecordingsFolder(tmp / "rec", tmp / "ci").sync(fresh, lambda p: settings)
        cold_s = time.perf_counter() - started
        started = time.perf_counter()
        second = RecordingsFolder(tmp / "rec", tmp / "ci").sync(fresh, lambda p: settings)
        warm_s = time.perf_counter() - started
        fresh.close()
    lines = [
        "# Loading committed recordings into an empty data dir",
        "",
        f"`scripts/bench.py recordings --entries {args.entries}`: a store of {args.entries:,} chat recordings is "
        "exported to a recordings folder; then a fresh data dir (a clean CI checkout) loads the folder, "
        "and loads it again (nothing changed: the incremental path). Target: ≤ 10 s for 10,000 on 2 cores.",
        "",
        "| step | seconds | files |",
        "|---|---:|---:|",
        f"| export (store → files) | {export_s:.2f} | {args.entries:,} |",
        f"| first load (files → empty store) | {cold_s:.2f} | {first.loaded:,} loaded |",
        f"| second load (unchanged) | {warm_s:.2f} | {second.unchanged:,} unchanged |",
        "",
        f"Folder size: {size / 1e6:.1f} MB.",
        "",
        "| machine | |", "|---|---|", *(f"| {k} | {v} |" for k, v in machine().items()),
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
