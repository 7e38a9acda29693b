"""The type check stays a check: scripts/test runs mypy over addon/semula before any test, and its settings
(pyproject.toml [tool.mypy]) switch no error off wholesale.

mypy itself runs in scripts/test (cached: ~1 s warm, ~20 s cold), not here, so a suite run pays for it once.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mypy_config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]


def test_scripts_test_type_checks_before_any_test() -> None:
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    mypy, pytest_run = script.index('"$VENV/bin/python" -m mypy'), script.index("-m pytest")
    assert mypy < pytest_run, "mypy runs first, in both the full and the --quick run"
    assert script.index('if [[ "${1:-}" == "--quick" ]]') > mypy


def test_the_type_check_covers_the_package_and_switches_no_error_off_wholesale() -> None:
    config = _mypy_config()
    assert config["files"] == ["addon/semula"]
    for blanket in ("ignore_errors", "disable_error_code", "follow_imports", "allow_untyped_defs"):
        assert blanket not in config, f"[tool.mypy] {blanket}: fix the code or ignore one line, with its reason"
    assert config["check_untyped_defs"] and config["disallow_untyped_defs"] and config["warn_unused_ignores"]
    for override in config.get("overrides", []):
        assert set(override) <= {"module", "ignore_missing_imports"}, (
            f"an override may only say a third-party module has no types: {override}")


def test_every_type_ignore_names_its_error_code() -> None:
    bare = [f"{path.relative_to(ROOT)}:{number}" for path in (ROOT / "addon" / "semula").rglob("*.py")
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if "# type: ignore" in line and "# type: ignore[" not in line]
    assert not bare, f"a `# type: ignore` without its error code hides every error on the line: {bare}"


@pytest.mark.slow
def test_mypy_passes_on_the_package() -> None:
    """What scripts/test runs (slow: a cold cache takes ~20 s; the whole suite includes it)."""
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
