#!/usr/bin/env python3
"""The opt-in embedding tier: miss path on vs off, hits, writes, and the serve-threshold sweep.

    .venv/bin/python scripts/bench_embedding.py            # full run: writes benchmark/results/embedding.md (+ .json)
    .venv/bin/python scripts/bench_embedding.py --quick    # smoke run: writes /tmp/semula-bench/*.md (+ .json)

The measuring code is scripts/bench/embedding.py; the results file is rendered by scripts/bench/render.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.embedding import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
