"""semula installed as its users install it: a built wheel in a clean virtual environment.

The rest of the suite runs semula from the source tree (an editable install, PYTHONPATH); a file missing
from the wheel, a dependency used but not declared, or an entry point that names a moved module would pass
there and fail for every user. Here the wheel is built by `python -m build` from a copy of the sources and
installed into a new venv holding only its runtime dependencies (and pytest, for the plugin): `semula
--version`, `semula proxy` up to its ready line, and the pytest plugin's options in `pytest --help`. A
second venv holds the wheel with its `analysis` extra: `semula report` runs the notebooks the wheel carries
(analysis/ copied in at build time by setup.py), with no source tree in sight.

The wheel is built as a release is: `python -m build` makes the sdist, then the wheel from the sdist, so a
file missing from the sdist (MANIFEST.in) fails here too.

The dependencies come from a wheelhouse kept between runs ($SEMULA_TEST_WHEELHOUSE, else
~/.cache/semula/test-wheelhouse): the first run downloads them (about a minute), later runs install offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from e2e_helpers import READY_MARKER, REPO, OutputPump, clean_env, free_port, stop_process

pytestmark = pytest.mark.e2e

WHEELHOUSE = Path(os.environ.get("SEMULA_TEST_WHEELHOUSE", Path.home() / ".cache" / "semula" / "test-wheelhouse"))
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def run(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def build_wheel(tmp: Path, env: dict[str, str]) -> Path:
    """`python -m build` (sdist, then the wheel from it) from a copy of the sources (the build writes into them)."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy2(REPO / name, source / name)
    for folder in ("addon", "analysis"):
        shutil.copytree(REPO / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".ipynb_checkpoints"))
    run([sys.executable, "-m", "build", "--outdir", str(tmp / "dist"), str(source)], env=env, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("semula-*.whl")
    return wheel


def install(venv: Path, requirements: list[str], env: dict[str, str], cwd: Path) -> None:
    """Install into the venv from the wheelhouse alone; on a missing wheel fill the wheelhouse and retry.
    The venv has no pip of its own (the test's pip installs into it: `pip --python`)."""
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    offline = [*pip, "install", "-q", "--no-compile", "--no-index", "--find-links", str(WHEELHOUSE), *requirements]
    if WHEELHOUSE.is_dir() and subprocess.run(offline, env=env, cwd=cwd, capture_output=True).returncode == 0:
        return
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "pip", "download", "-q", "-d", str(WHEELHOUSE), *requirements], env=env, cwd=cwd)
    for own in WHEELHOUSE.glob("semula-*"):
        own.unlink()  # the wheel under test is always the one just built
    run(offline, env=env, cwd=cwd)


def build_env() -> dict[str, str]:
    # Nothing of the source tree or the test's venv may leak in: no PYTHONPATH, a working folder outside the repo.
    return {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("build"), build_env())


def new_venv(tmp: Path, requirements: list[str]) -> Path:
    """A clean venv holding `requirements` and their dependencies: its bin/ folder."""
    env = build_env()
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env, cwd=tmp)
    install(venv, requirements, env, tmp)
    return venv / "bin"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The freshly built wheel with its runtime dependencies only (and pytest, for the plugin)."""
    return new_venv(tmp_path_factory.mktemp("install"), [str(wheel), "pytest"])


@pytest.fixture(scope="module")
def installed_with_analysis(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel with its `analysis` extra, in a venv of its own: the other venv stays runtime-only."""
    return new_venv(tmp_path_factory.mktemp("install-analysis"), [f"{wheel}[analysis]"])


def venv_env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(VIRTUAL_ENV=str(bin_dir.parent), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
               PYTHONUNBUFFERED="1", SEMULA_RECORDINGS="off")
    return env


def test_the_package_comes_from_the_venv(installed: Path, tmp_path: Path) -> None:
    found = run([str(installed / "python"), "-c", "import semula; print(semula.__file__)"],
                env=venv_env(installed), cwd=tmp_path).stdout.strip()
    assert Path(found).is_relative_to(installed.parent), found


def test_version(installed: Path, tmp_path: Path) -> None:
    result = run([str(installed / "semula"), "--version"], env=venv_env(installed), cwd=tmp_path)
    assert result.stdout.strip() == f"semula, version {VERSION}"


def test_proxy_starts(installed: Path, tmp_path: Path) -> None:
    argv = [str(installed / "semula"), "proxy", "--mode", "replay", "--listen-host", "127.0.0.1",
            "--listen-port", str(free_port()), "--data-dir", str(tmp_path / "data"),
            "--set", f"confdir={tmp_path / 'mitmproxy'}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=venv_env(installed), cwd=tmp_path, start_new_session=True)
    assert proc.stdout is not None
    pump = OutputPump(proc.stdout)
    try:
        ready = pump.wait_for(lambda line: line.startswith(READY_MARKER), timeout=120)
        assert ready is not None, f"no ready line from the installed semula proxy:\n{pump.text()}"
    finally:
        stop_process(proc)
        pump.join()
    assert "Traceback" not in pump.text(), pump.text()


def test_pytest_plugin_loads(installed: Path, tmp_path: Path) -> None:
    result = run([str(installed / "python"), "-m", "pytest", "--help"], env=venv_env(installed), cwd=tmp_path)
    for option in ("--semula=", "--semula-recordings", "--semula-scope"):
        assert option in result.stdout, result.stdout


def test_report_runs_the_notebooks_the_wheel_carries(installed_with_analysis: Path, tmp_path: Path) -> None:
    bin_dir, env = installed_with_analysis, venv_env(installed_with_analysis)
    found = run([str(bin_dir / "python"), "-c", "from semula.reporting.report import analysis_dir; print(analysis_dir())"],
                env=env, cwd=tmp_path).stdout.strip()
    assert Path(found).is_relative_to(bin_dir.parent), found  # the wheel's copy, not the repo's analysis/
    data_dir = tmp_path / "data"
    run([str(bin_dir / "python"), str(REPO / "scripts" / "make_demo_calls.py"), "--data-dir", str(data_dir),
         "--days", "2", "--seed", "3", "--end", "2025-06-30"], env=env, cwd=tmp_path)
    assert list((data_dir / "calls").rglob("*.parquet"))
    out = tmp_path / "out" / "report.html"
    result = run([str(bin_dir / "semula"), "report", "--data-dir", str(data_dir), "--out", str(out), "--quiet"],
                 env=env, cwd=tmp_path)
    assert result.stdout.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    for section in ("overview", "savings", "thresholds", "review-queue"):
        assert f'id="{section}"' in page
    assert 'class="banner failed"' not in page and "Traceback" not in page
    assert '<div class="label">calls logged</div>' in page and "No calls logged yet" not in page
    assert "data:image/png;base64," in page
