#!/usr/bin/env python3
"""Calibrated serve mode on held-out verdicts

    .venv/bin/python scripts/bench_calibration.py                  # writes benchmark/results/calibration.md (+ .json)
    .venv/bin/python scripts/bench_calibration.py --no-embeddings  # the lexical tier alone

The measuring code is scripts/bench/calibration.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.calibration import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
