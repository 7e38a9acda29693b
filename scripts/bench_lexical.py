#!/usr/bin/env python3
"""The lexical near-match tier

    .venv/bin/python scripts/bench_lexical.py            # full run: writes  miss-path cost, FTS build, write -> findable, sweep + semula eval.:benchmark/results/lexical.md (+ .json)
    .venv/bin/python scripts/bench_lexical.py --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

The measuring code is scripts/bench/lexical.py; the results file is rendered by scripts/bench/render.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.lexical import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
