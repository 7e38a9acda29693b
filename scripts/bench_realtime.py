#!/usr/bin/env python3
"""Realtime replay latency per turn and the size of a recording with 30 s of audio.

    .venv/bin/python scripts/bench_realtime.py     # writes benchmark/results/realtime.md

The measuring code is scripts/bench/realtime.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.realtime import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
