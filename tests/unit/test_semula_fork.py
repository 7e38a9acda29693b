"""tests/support/semula_fork.py: a forked `semula` command answers as a process of its own would (output,
errors, exit code, environment, working directory), and a fork that hangs is killed at its timeout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import semula_fork

from e2e_helpers import clean_env, semula_cmd

pytestmark = pytest.mark.slow  # starts processes: the whole suite runs it, --quick does not


def both(*args: str, env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], ...]:
    argv = [*semula_cmd(), *args]
    forked = semula_fork.run(argv, env=env, cwd=cwd, timeout=60)
    own = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
    return forked, own


@pytest.mark.parametrize("args", [("--version",), ("entries", "list", "--no-such-option"),
                                  ("config", "show", "--data-dir", "data", "--json")])
def test_a_forked_command_answers_as_its_own_process_does(tmp_path: Path, args: tuple[str, ...]) -> None:
    forked, own = both(*args, env=clean_env(COLUMNS="100"), cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (own.returncode, own.stdout, own.stderr)


def test_the_environment_and_the_folder_are_the_callers(tmp_path: Path) -> None:
    printed = []
    for key in (None, "sk-a-real-looking-key-0123456789"):  # replay's placeholder keys: only for unset ones
        env = clean_env(**({"OPENAI_API_KEY": key} if key else {}))
        if key is None:
            env.pop("OPENAI_API_KEY", None)
        forked, own = both("env", "--port", "9", "--confdir", "conf", "--mode", "replay", env=env, cwd=tmp_path)
        assert forked.returncode == own.returncode == 0, forked.stderr
        assert forked.stdout == own.stdout
        printed.append(forked.stdout)
    assert printed[0] != printed[1]
    assert (tmp_path / "conf" / "semula-ca-bundle.pem").is_file()  # a relative path, from the caller's folder


def test_a_proxy_stops_on_sigint_with_its_exit_code_and_a_hung_command_is_killed(tmp_path: Path) -> None:
    proc = semula_fork.spawn([*semula_cmd(), "proxy", "--listen-port", "0", "--data-dir", str(tmp_path / "d"),
                              "--set", f"confdir={tmp_path / 'conf'}"], env=clean_env(), cwd=tmp_path)
    assert isinstance(proc, semula_fork.ForkedProcess)
    assert "semula ready" in "".join(iter_lines_until(proc, "semula ready"))
    proc.send_signal(2)
    assert proc.wait(30) == 0 and proc.poll() == 0
    with pytest.raises(subprocess.TimeoutExpired):
        semula_fork.run([*semula_cmd(), "proxy", "--listen-port", "0", "--data-dir", str(tmp_path / "d2"),
                         "--set", f"confdir={tmp_path / 'conf'}"], env=clean_env(), cwd=tmp_path, timeout=3)


def iter_lines_until(proc: semula_fork.ForkedProcess, marker: str) -> list[str]:
    lines = []
    for line in iter(proc.stdout.readline, ""):
        lines.append(line)
        if marker in line:
            break
    return lines
