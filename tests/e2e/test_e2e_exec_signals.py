"""CI runs fail loudly, never silently: a cancelled job, a killed run, a reused proxy, the data dir in git.

A CI runner cancels a job with SIGTERM (a closed terminal sends SIGHUP): `semula exec` and a pytest run
with the plugin must stop their command and their proxy, flush the call log, print the summary and exit
with the signal's code. A proxy whose run was killed outright stops by itself; a running proxy is
reused only when it was asked for the same options; the data dir carries a `.gitignore` holding `*`,
and `recordings check` warns when git tracks one anyway; an option error says only that.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import (
    FakeProvider,
    OutputPump,
    clean_env,
    free_port,
    map_remote_args,
    proxy_test_args,
    read_call_log,
    semula_cmd,
    uniq,
)

pytestmark = pytest.mark.e2e

# One call through the proxy, then the pid and a line the test waits for, then a long sleep: a test run mid-way.
CALL_THEN_SLEEP = """
import json, os, sys, time, requests
r = requests.post("https://api.openai.com/v1/chat/completions", timeout=30,
                  headers={"authorization": "Bearer sk-test-signal"},
                  json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": sys.argv[1]}]})
print(json.dumps({"pid": os.getpid(), "status": r.status_code}), flush=True)
time.sleep(600)
"""


def wait_until(condition: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def gone(pid: int) -> bool:
    """No such process, or only its zombie (a reparented process nobody reaps here)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def admin_pid(data_dir: Path) -> int:
    wait_until(lambda: (data_dir / "admin.json").exists(), what="admin.json")
    return int(json.loads((data_dir / "admin.json").read_text())["pid"])


def start_exec(data_dir: Path, confdir: Path, upstream_port: int, *extra: str,
               cwd: Path | None = None) -> tuple[subprocess.Popen[str], OutputPump, int]:
    """`semula exec -- CALL_THEN_SLEEP` in a session of its own (signals reach exec alone, as a runner's may);
    returns once the command made its call, with the command's pid."""
    argv = [*semula_cmd(), "exec", "--data-dir", str(data_dir), *proxy_test_args(confdir, upstream_port), *extra,
            "--", sys.executable, "-c", CALL_THEN_SLEEP, uniq("signal")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
                            start_new_session=True, cwd=cwd)
    assert proc.stdout is not None
    out = OutputPump(proc.stdout)
    line = out.wait_for(lambda s: s.startswith("{"), 90)
    if line is None:
        proc.kill()
        raise AssertionError(f"the command did not make its call:\n{out.text()}\n{proc.communicate()[1]}")
    made = json.loads(line)
    assert made["status"] == 200, made
    return proc, out, int(made["pid"])


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> str:
    assert proc.stderr is not None
    try:
        proc.wait(timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.stderr.read()


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_exec_stops_its_command_and_proxy_and_says_what_it_did(
        signo: int, tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path) -> None:
    data_dir = tmp_path / "semula-data"
    proc, _, child = start_exec(data_dir, mitm_confdir, fake_provider.port)
    proxy = admin_pid(data_dir)
    proc.send_signal(signo)
    stderr = finish(proc)
    assert proc.returncode == 128 + signo, stderr
    assert "semula: 1 call · 0 hits · 1 miss · 0 refused" in stderr, stderr
    wait_until(lambda: gone(proxy) and gone(child), what="the proxy and the command to end")
    assert [row["decision"] for row in read_call_log(data_dir)] == ["miss"], "the call log was flushed"
    assert not (data_dir / "admin.json").exists()

    # The next run on the data dir starts a proxy of its own.
    again = subprocess.run([*semula_cmd(), "exec", "--data-dir", str(data_dir),
                            *proxy_test_args(mitm_confdir, fake_provider.port), "--", sys.executable, "-c", "pass"],
                           capture_output=True, text=True, env=clean_env(), timeout=120)
    assert again.returncode == 0, again.stderr
    assert "semula ready" in again.stderr and "reusing" not in again.stderr, again.stderr


def test_a_killed_exec_leaves_no_proxy_behind(tmp_path: Path, fake_provider: FakeProvider,
                                              mitm_confdir: Path) -> None:
    data_dir = tmp_path / "semula-data"
    proc, _, child = start_exec(data_dir, mitm_confdir, fake_provider.port)
    proxy = admin_pid(data_dir)
    try:
        proc.kill()  # SIGKILL: exec cannot stop anything
        proc.wait(30)
        wait_until(lambda: gone(proxy), what="the orphaned proxy to stop by itself")
        assert [row["decision"] for row in read_call_log(data_dir)] == ["miss"], "it flushed its call log"
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)


SLEEPING_SUITE = '''
import os, time, openai


def test_calls_then_waits():
    client = openai.OpenAI(max_retries=0)
    client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "{prompt}"}}])
    with open("{marker}", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
'''


def test_sigterm_to_pytest_with_the_plugin_stops_its_proxy(tmp_path: Path, fake_provider: FakeProvider,
                                                           mitm_confdir: Path) -> None:
    data_dir, marker = tmp_path / "semula-data", tmp_path / "called"
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_sleeping.py").write_text(SLEEPING_SUITE.format(prompt=uniq("plugin signal"), marker=marker))
    sets = ["confdir=" + str(mitm_confdir), "ssl_insecure=true",
            *[arg for arg in map_remote_args(fake_provider.port) if arg != "--set"]]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--semula=auto", f"--semula-data-dir={data_dir}",
         *[f"--semula-set={item}" for item in sets], "-p", "no:cacheprovider", "test_sleeping.py"],
        cwd=suite, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env=clean_env(OPENAI_API_KEY="sk-test-plugin-not-a-real-key"))
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, 120, "the test's call")
        assert proc.poll() is None, proc.communicate()[0]
        proxy = admin_pid(data_dir)
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=90)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, output
    assert "semula: 1 call · 0 hits · 1 miss · 0 refused" in output, output
    wait_until(lambda: gone(proxy), what="the plugin's proxy to stop")
    assert [row["decision"] for row in read_call_log(data_dir)] == ["miss"], "the call log was flushed"


def test_a_running_proxy_asked_for_other_options_is_refused(
        tmp_path: Path, proxy_factory: ProxyFactory, fake_provider: FakeProvider, mitm_confdir: Path) -> None:
    def exec_quick(data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*semula_cmd(), "exec", "--data-dir", str(data_dir),
                               *proxy_test_args(mitm_confdir, fake_provider.port), *extra,
                               "--", sys.executable, "-c", "pass"],
                              capture_output=True, text=True, env=clean_env(), timeout=120)

    # A proxy started by hand is shared: what this run names must match, the rest stays its own.
    running = proxy_factory("auto")
    pid = admin_pid(running.data_dir)
    refused = exec_quick(running.data_dir, "--set", "semula_record_errors=true")
    assert refused.returncode == 2, refused.stderr
    assert "semula_record_errors: it has the default, this run asks for true" in refused.stderr, refused.stderr
    assert f"kill {pid}" in refused.stderr, refused.stderr
    assert exec_quick(running.data_dir).returncode == 0

    # A proxy another run started (an orphan, another job) must match in every option.
    data_dir = tmp_path / "semula-data"
    proc, _, child = start_exec(data_dir, mitm_confdir, fake_provider.port, "--set", "semula_record_errors=true")
    try:
        refused = exec_quick(data_dir)
        assert refused.returncode == 2, refused.stderr
        assert "semula_record_errors: it has true, this run asks for the default" in refused.stderr
        assert "started by the run with pid" in refused.stderr, refused.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        finish(proc)
    wait_until(lambda: gone(child), what="the command to end")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@needs_git
def test_the_data_dir_stays_out_of_git(tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    run = subprocess.run([*semula_cmd(), "exec", "--data-dir", ".semula", "--recordings", "semula-recordings",
                          *proxy_test_args(mitm_confdir, fake_provider.port), "--", sys.executable, "-c",
                          CALL_THEN_SLEEP.replace("time.sleep(600)", ""), uniq("gitignore")],
                         cwd=repo, capture_output=True, text=True, env=clean_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    assert (repo / ".semula" / ".gitignore").read_text().splitlines()[-1] == "*"
    status = git(repo, "status", "--porcelain", "--untracked-files=all")
    assert ".semula" not in status and "semula-recordings/" in status, status

    # `semula proxy` (scripts/run) creates it the same way.
    data_dir = tmp_path / "by-proxy" / ".semula"
    port = free_port()
    proxy = subprocess.Popen([*semula_cmd(), "proxy", "--listen-port", str(port), "--data-dir", str(data_dir),
                              *proxy_test_args(mitm_confdir, fake_provider.port)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
                             start_new_session=True)
    assert proxy.stdout is not None
    pump = OutputPump(proxy.stdout)
    try:
        assert pump.wait_for(lambda s: s.startswith("semula ready"), 60), pump.text()
        assert (data_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    finally:
        proxy.send_signal(signal.SIGINT)
        proxy.wait(60)


@needs_git
def test_recordings_check_warns_when_git_tracks_a_data_dir(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "semula-recordings").mkdir(parents=True)
    git(repo, "init", "-q")

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run([*semula_cmd(), "recordings", "check", "semula-recordings"], cwd=repo,
                              capture_output=True, text=True, env=clean_env(), timeout=60)

    assert "WARNING" not in check().stderr
    (repo / ".semula").mkdir()
    (repo / ".semula" / "semula.duckdb").write_bytes(b"prompts and answers")
    (repo / "ci" / "shard-1" / ".semula").mkdir(parents=True)
    (repo / "ci" / "shard-1" / ".semula" / "proxy.log").write_text("log")
    git(repo, "add", "-f", ".semula", "ci")
    result = check()
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 2, result.stderr
    assert "the data dir .semula " in warnings[0] and "git rm -r --cached .semula" in warnings[0], warnings
    assert "the data dir ci/shard-1/.semula " in warnings[1], warnings

    outside = tmp_path / "no-git"  # not in a work tree: nothing to warn about
    (outside / "semula-recordings").mkdir(parents=True)
    (outside / ".semula").mkdir()
    plain = subprocess.run([*semula_cmd(), "recordings", "check", "semula-recordings"], cwd=outside,
                           capture_output=True, text=True, env=clean_env(GIT_CEILING_DIRECTORIES=str(tmp_path)),
                           timeout=60)
    assert plain.returncode == 0 and "WARNING" not in plain.stderr, plain.stderr


@pytest.mark.parametrize("command", ["proxy", "exec"])
def test_an_option_error_says_only_the_option_error(command: str, tmp_path: Path, mitm_confdir: Path) -> None:
    port = free_port()
    argv = [*semula_cmd(), command, "--listen-port", str(port), "--data-dir", str(tmp_path / "d"),
            "--set", f"confdir={mitm_confdir}", "--set", "semula_mode=bogus"]
    if command == "exec":
        argv += ["--", sys.executable, "-c", "pass"]
    result = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert output.count("semula_mode='bogus' is not one of") == 1, output
    assert "already in use" not in output and "Traceback" not in output, output
    assert len(output.strip().splitlines()) == 1, output
