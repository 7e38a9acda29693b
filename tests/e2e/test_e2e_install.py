"""semula installed as its users install it: a built wheel in a clean virtual environment.

The rest of the suite runs semula from the source tree (an editable install, PYTHONPATH); a file missing
from the wheel, a dependency used but not declared, or an entry point that names a moved module would pass
there and fail for every user. Here the wheel is built by `python -m build` from a copy of the sources and
installed into a new venv holding only its runtime dependencies (and pytest, for the plugin): `semula
--version`, `semula proxy` up to its ready line, the pytest plugin's options in `pytest --help`, and the
notebooks `semula report` runs (analysis/ copied in at build time by setup.py), found inside the venv.

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


def test_the_wheel_carries_the_notebooks_the_report_runs(installed: Path, tmp_path: Path) -> None:
    """The report's notebooks come from inside the venv (setup.py copied them in), not the repo's analysis/.
    Running them needs the `analysis` extra; tests/slow/test_report.py runs them (from the checkout's copy,
    the same files), so here the runtime-only venv says what to install instead."""
    env = venv_env(installed)
    found = run([str(installed / "python"), "-c",
                 "from semula.reporting.report import analysis_dir; print(analysis_dir())"],
                env=env, cwd=tmp_path).stdout.strip()
    assert Path(found).is_relative_to(installed.parent), found
    assert sorted(p.name for p in Path(found).iterdir() if p.suffix in (".ipynb", ".py")) == sorted(
        p.name for p in (REPO / "analysis").iterdir() if p.suffix == ".ipynb" or p.name == "semula_logs.py")
    refused = subprocess.run([str(installed / "semula"), "report", "--data-dir", str(tmp_path / "data"),
                              "--out", str(tmp_path / "report.html")],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "pip install 'semula[analysis]'" in refused.stdout + refused.stderr, refused
