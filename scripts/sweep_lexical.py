#!/usr/bin/env python3
"""Tuning tables of the lexical tier and its guard on the request-pair corpora.

    .venv/bin/python scripts/sweep_lexical.py            # full run: writes benchmark/results/sweep.md (+ .json)
    .venv/bin/python scripts/sweep_lexical.py --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

The measuring code is scripts/bench/sweep.py; the results file is rendered by scripts/bench/render.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.sweep import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
