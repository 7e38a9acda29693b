"""The type check stays a check: scripts/test runs mypy over addon/semula in every run, and its settings
(pyproject.toml [tool.mypy]) switch no error off wholesale.

mypy itself runs in scripts/test (cached: ~1 s warm, ~20 s cold), not here, so a suite run pays for it once.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _mypy_config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]


def test_scripts_test_type_checks_in_both_runs() -> None:
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    quick, beside = [i for i in range(len(script)) if script.startswith('"$VENV/bin/python" -m mypy', i)]
    first_pytest = script.index("-m pytest")
    assert quick < first_pytest and beside < first_pytest, "--quick checks first; a whole run starts mypy beside"
    assert script.index("if (( quick ))") < quick, "the first check is --quick's, before its tests"
    assert script.index('wait "$mypy_pid"') > script.rindex("-m pytest"), "a whole run fails on mypy's verdict"


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
