"""`semula drift` with a key that is set but looks like a placeholder says so, naming the variable and never
showing its value (it said "no real API key in the environment", which sent a new user looking for an unset
variable)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import semula_fork
import pytest

from test_cli_pipe_output import har

pytestmark = pytest.mark.slow  # runs `semula import` and `semula drift` processes: the whole suite runs it, --quick does not

PLACEHOLDER = "sk-test-0123456789abcdef"


def drift(tmp_path: Path, key: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "SEMULA_MODE"}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    folder = tmp_path / "recordings"
    if not folder.exists():
        imported = semula_fork.run([sys.executable, "-m", "semula", "import", "--from", "har",
                                     str(har(tmp_path / "calls.har")), "--recordings", str(folder),
                                     "--data-dir", str(tmp_path / "data")], env=env, timeout=120)
        assert imported.returncode == 0, imported.stderr
    return semula_fork.run([sys.executable, "-m", "semula", "drift", "--recordings", str(folder)], env=env, timeout=120)


def test_a_placeholder_key_is_named_as_one_and_never_shown(tmp_path: Path) -> None:
    done = drift(tmp_path, PLACEHOLDER)
    assert done.returncode != 0
    assert "$OPENAI_API_KEY is set but looks like a placeholder" in done.stderr, done.stderr
    assert "in the environment" not in done.stderr
    assert PLACEHOLDER not in done.stdout + done.stderr and "0123456789" not in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unset_key_is_named_as_unset(tmp_path: Path) -> None:
    done = drift(tmp_path, None)
    assert done.returncode != 0
    assert "no real key in $OPENAI_API_KEY" in done.stderr and "placeholder" not in done.stderr, done.stderr
