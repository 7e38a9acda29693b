"""`semula exec` and `semula proxy` for a newcomer and for CI: no silent surprises.

exec never runs a command in another mode than asked, says how many calls went through
semula (and warns when none did), gives replay runs placeholder API keys, keeps the
proxy's console out of the command's output, and the start-up failures say what to do.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, OutputPump, clean_env, free_port, semula_cmd, stop_process, uniq
from test_e2e_exec_and_lock import CLIENT_SCRIPTS, last_json_line, semula_exec

pytestmark = pytest.mark.e2e

PRINT_KEYS = ("import json, os; print(json.dumps({k: os.environ.get(k) for k in "
              "('OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY', 'GOOGLE_API_KEY')}))")


def run_exec(args: list[str], script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*semula_cmd(), "exec", *args, "--", sys.executable, "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, env=env or clean_env(), timeout=120)


def test_exec_refuses_to_run_in_another_mode_than_the_running_proxy(proxy_factory: ProxyFactory,
                                                                   tmp_path: Path) -> None:
    running = proxy_factory("auto")
    pid = json.loads((running.data_dir / "admin.json").read_text())["pid"]
    marker = tmp_path / "ran"
    result = run_exec(["--mode", "replay", "--data-dir", str(running.data_dir)],
                      f"open({str(marker)!r}, 'w').write('x')")
    assert result.returncode == 2, result
    assert not marker.exists(), "the command must not run in a mode other than asked"
    for needle in (str(pid), "auto", f"127.0.0.1:{running.port}", "--data-dir"):
        assert needle in result.stderr, (needle, result.stderr)
    assert (running.data_dir / "admin.json").exists(), "the running proxy is left alone"


def test_exec_summary_counts_the_commands_calls(tmp_path: Path, fake_provider: FakeProvider,
                                                mitm_confdir: Path) -> None:
    data_dir = tmp_path / "semula-data"
    content = uniq("summary")
    first = semula_exec(data_dir, mitm_confdir, fake_provider.port, CLIENT_SCRIPTS["requests"], content, "0")
    assert first.returncode == 0, first.stderr
    assert "semula: 1 call · 0 hits · 1 miss · 0 refused" in first.stderr, first.stderr
    second = semula_exec(data_dir, mitm_confdir, fake_provider.port, CLIENT_SCRIPTS["requests"], content, "0",
                         mode="replay")
    assert "semula: 1 call · 1 hit · 0 misses · 0 refused" in second.stderr, second.stderr
    third = semula_exec(data_dir, mitm_confdir, fake_provider.port,
                        CLIENT_SCRIPTS["requests"].replace('r.json()["choices"][0]["message"]["content"]', "''"),
                        uniq("unrecorded"), "0", mode="replay")
    assert "semula: 1 call · 0 hits · 0 misses · 1 refused" in third.stderr, third.stderr
    assert "no calls" not in first.stderr + second.stderr + third.stderr


def test_exec_warns_when_the_command_made_no_calls_through_semula(tmp_path: Path, fake_provider: FakeProvider,
                                                                 mitm_confdir: Path) -> None:
    result = semula_exec(tmp_path / "semula-data", mitm_confdir, fake_provider.port, "print('offline')")
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if "no calls" in line]
    assert warning and "WARNING" in warning[0], result.stderr


def test_exec_replay_sets_placeholder_keys_only_for_unset_variables(tmp_path: Path, mitm_confdir: Path,
                                                                   dead_port: int) -> None:
    base = {k: v for k, v in clean_env().items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env = {**base, "ANTHROPIC_API_KEY": "sk-ant-real", "GEMINI_API_KEY": "gem-real"}
    result = semula_exec(tmp_path / "d1", mitm_confdir, dead_port, PRINT_KEYS, mode="replay", env=env)
    assert result.returncode == 0, result.stderr
    assert last_json_line(result.stdout) == {"OPENAI_API_KEY": "sk-semula-replay-placeholder",
                                             "ANTHROPIC_API_KEY": "sk-ant-real", "GEMINI_API_KEY": "gem-real",
                                             "GOOGLE_API_KEY": None}
    # Outside replay, and with the namespace taken from the key, nothing is invented.
    auto = semula_exec(tmp_path / "d2", mitm_confdir, dead_port, PRINT_KEYS, env=base)
    by_key = semula_exec(tmp_path / "d3", mitm_confdir, dead_port, PRINT_KEYS, mode="replay", env=base,
                         extra=("--set", "semula_namespace_by_key=true"))
    for res in (auto, by_key):
        assert res.returncode == 0, res.stderr
        assert last_json_line(res.stdout)["OPENAI_API_KEY"] is None, res.stdout


def test_exec_keeps_the_proxy_console_out_of_the_commands_output(tmp_path: Path, fake_provider: FakeProvider,
                                                                  mitm_confdir: Path) -> None:
    data_dir = tmp_path / "semula-data"
    result = semula_exec(data_dir, mitm_confdir, fake_provider.port, CLIENT_SCRIPTS["requests"].replace("sys.exit(", "print('LAST'); sys.exit("),
                         uniq("quiet console"), "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "LAST", result.stdout
    log_file = data_dir / "proxy.log"
    assert str(log_file) in result.stderr, result.stderr
    for noise in ("client connect", "server connect", "semula: default openai"):
        assert noise not in result.stdout + result.stderr, (noise, result.stderr)
    assert "semula: default openai POST" in log_file.read_text()
    lines = result.stderr.splitlines()  # exec's own lines only: where the console went, and the summary
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("semula ready:") and lines[-1].startswith("semula: 1 call"), result.stderr


def test_proxy_takes_a_confdir(tmp_path: Path) -> None:
    confdir = tmp_path / "conf"
    argv = [*semula_cmd(), "proxy", "--listen-port", str(free_port()), "--data-dir", str(tmp_path / "d"),
            "--confdir", str(confdir)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        pump = OutputPump(proc.stdout)
        ready = pump.wait_for(lambda s: s.startswith("semula ready:"), 60)
        assert ready is not None, pump.text()
        assert f"CA {confdir / 'mitmproxy-ca-cert.pem'}" in ready
        assert (confdir / "mitmproxy-ca-cert.pem").exists()
    finally:
        stop_process(proc)


@pytest.fixture
def busy_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_port_in_use_points_at_listen_port(tmp_path: Path, mitm_confdir: Path, busy_port: int) -> None:
    proxy = subprocess.run([*semula_cmd(), "proxy", "--listen-port", str(busy_port), "--data-dir",
                            str(tmp_path / "d1"), "--set", f"confdir={mitm_confdir}"],
                           capture_output=True, text=True, env=clean_env(), timeout=60)
    exec_ = run_exec(["--listen-port", str(busy_port), "--data-dir", str(tmp_path / "d2"),
                      "--set", f"confdir={mitm_confdir}"], "print('never')")
    for result in (proxy, exec_):
        assert result.returncode != 0, result
        assert "never" not in result.stdout
        assert "--listen-port PORT" in result.stderr and "already in use" in result.stderr, result.stderr
