#!/usr/bin/env python3
"""A pytest suite replayed through semula (pytest plugin, semula exec) vs vcrpy cassettes vs no recording.

    .venv/bin/python scripts/bench_suite.py                  # 500 tests, 3 rounds: benchmark/results/suite.md (+ .json)
    .venv/bin/python scripts/bench_suite.py --tests 5000     # benchmark/results/suite-5000.md
    .venv/bin/python scripts/bench_suite.py --tests 50 --rounds 1 --out /tmp/suite.md   # smoke run

The measuring code is scripts/bench/suite.py; the generated suite is scripts/bench/suite_files.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.suite import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
