"""semula's own processes never import pandas (DuckDB's client would, at the first bound query: ~0.35 s
of CPU at every proxy start); the pytest plugin's process, the user's, keeps it importable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import atexit, sys
atexit.register(lambda: print("pandas:", repr(sys.modules.get("pandas", "absent"))[:20], file=sys.stderr))
sys.argv = ["semula", *sys.argv[1:]]
from semula.cli import run
run()
"""


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)


def test_a_store_command_binds_queries_without_importing_pandas(tmp_path: Path) -> None:
    done = probe("config", "set", "tail_n", "3", "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert "pandas: None" in done.stderr, done.stderr
    shown = probe("config", "show", "--data-dir", str(tmp_path / "data"))
    assert shown.returncode == 0 and "3" in shown.stdout, shown.stdout + shown.stderr


def test_the_report_and_other_processes_keep_pandas_importable() -> None:
    done = probe("report", "--help")
    assert done.returncode == 0, done.stderr
    assert "pandas: None" not in done.stderr, done.stderr
    import semula.cli  # noqa: F401  (importing the CLI in a process changes nothing)

    assert sys.modules.get("pandas", "absent") is not None
