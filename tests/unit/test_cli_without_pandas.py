"""semula's own processes never import pandas (DuckDB's client would, at the first bound query: ~0.35 s
of CPU at every proxy start); the pytest plugin's process, the user's, keeps it importable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # fresh interpreters: what a new process imports: the whole suite runs it, --quick does not

PROBE = """
import atexit, builtins, sys
atexit.register(lambda: print("pandas:", "loaded" if "pandas" in sys.modules else "absent", file=sys.stderr))
atexit.register(lambda: print("refused by __import__:", getattr(builtins.__import__, "refuses_pandas", False),
                              file=sys.stderr))
sys.argv = ["semula", *sys.argv[1:]]
from semula.cli import run
run()
"""


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)


def test_a_store_command_binds_queries_without_importing_pandas(tmp_path: Path) -> None:
    done = probe("config", "set", "tail_n", "3", "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert "pandas: absent" in done.stderr, done.stderr
    # DuckDB asks at every query: refused where it asks (`__import__`), not behind the import system's locks
    assert "refused by __import__: True" in done.stderr, done.stderr
    shown = probe("config", "show", "--data-dir", str(tmp_path / "data"))
    assert shown.returncode == 0 and "3" in shown.stdout, shown.stdout + shown.stderr


def test_the_plugins_process_keeps_pandas_importable() -> None:
    import builtins
    import importlib

    import semula.cli  # importing the CLI in a process (the plugin, CliRunner) changes nothing

    assert not any(isinstance(f, semula.cli._NoPandas) for f in sys.meta_path)
    assert not getattr(builtins.__import__, "refuses_pandas", False)
    assert importlib.util.find_spec("pandas") is not None
