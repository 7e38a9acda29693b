#!/usr/bin/env python3
"""Replay throughput of semula's exact-hit path vs a no-op addon vs mitmproxy --server-replay.

    .venv/bin/python scripts/bench_replay.py            # full run: writes benchmark/results/replay.md (+ .json)
    .venv/bin/python scripts/bench_replay.py --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

The measuring code is scripts/bench/replay.py; the results file is rendered by scripts/bench/render.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.replay import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
