"""`scripts/bench.py embedding` still runs against the current API: its smallest path, end to end.

The bench is not run by the suite otherwise, so a refactor that removes a name it uses (as one did
with `put_vectors`) would only show the next time someone measures. This runs the entry point as
a subprocess on a tiny store with the shared model; it checks what ran, never how fast.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from shared_paths import REPO, shared_dir

FOLDER = (shared_dir() or REPO / "nonexistent") / "models" / "all-MiniLM-L6-v2-onnx"
SIZE, QUERIES = 20, 4

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not FOLDER.is_dir(), reason=f"shared model missing at {FOLDER}")]


def test_smallest_run_writes_its_figures(tmp_path):
    out = tmp_path / "embedding.md"
    argv = [sys.executable, str(REPO / "scripts" / "bench.py"), "embedding", "--quick", "--sizes", str(SIZE),
            "--queries", str(QUERIES), "--embed-limit", str(SIZE), "--dev-limit", "12", "--out", str(out)]
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]

    figures = json.loads(out.with_suffix(".json").read_text())
    (size,) = figures["sizes"]
    assert size["vectors"] == SIZE  # every stored vector reached the tier's index
    assert sum(size["outcomes"]["on"].values()) == sum(size["outcomes"]["off"].values()) == QUERIES
    assert size["hit_model_calls"] == 0  # exact hits never touch the model
    assert figures["sweep"]["dev_pairs"] == 12
    assert out.read_text().startswith("# Embedding tier benchmark")
