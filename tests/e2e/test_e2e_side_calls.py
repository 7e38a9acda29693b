"""openai-agents with tracing on: its trace upload is side traffic, never recorded, never a failed test.

A real Agent and Runner (the Responses API) run in a subprocess through a real `semula proxy` in front
of the fake provider, which answers `POST /v1/traces/ingest` with 204 as OpenAI's server does. Twice
in auto: the model call is recorded once, the trace uploads are forwarded unrecorded (no new file the
second time). Then `pytest --semula=replay` with the provider gone: the model call replays, the
upload is answered by semula itself and logged as `bypass`, and no test fails, not even the one
running when the upload goes out.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, clean_env, map_remote_args, read_call_log, uniq, wait_for_rows

pytestmark = pytest.mark.e2e
pytest_plugins = ("pytester",)

TRACES = "/v1/traces/ingest"
# Two runs in one process (importing openai-agents takes seconds): each makes a new trace, with new ids.
AGENT = '''
import sys

from agents import Agent, Runner
from agents.tracing import flush_traces

agent = Agent(name="Helper", instructions="Answer in one short line.", model="gpt-4o-mini")
for run in (1, 2):
    result = Runner.run_sync(agent, sys.argv[1])
    flush_traces()  # the upload, now rather than at exit
    print("ANSWER:", result.final_output, flush=True)
    if run == 1:
        sys.stdin.readline()  # the test looks at the recordings between the two runs
'''

SUITE = '''
from agents import Agent, Runner
from agents.tracing import flush_traces


def test_agent_answers():
    agent = Agent(name="Helper", instructions="Answer in one short line.", model="gpt-4o-mini")
    assert "fake answer" in Runner.run_sync(agent, {prompt!r}).final_output


def test_an_unrelated_test_while_the_traces_upload():
    flush_traces()  # the background upload lands in this test: it must not fail it
'''


def start_agent(script: Path, proxy_url: str, ca_path: Path, prompt: str) -> subprocess.Popen[str]:
    env = clean_env(HTTPS_PROXY=proxy_url, HTTP_PROXY=proxy_url, SSL_CERT_FILE=str(ca_path),
                    OPENAI_API_KEY="sk-test-agents-not-a-real-key")
    env.pop("OPENAI_AGENTS_DISABLE_TRACING", None)
    return subprocess.Popen([sys.executable, str(script), prompt], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def next_answer(agent: subprocess.Popen[str]) -> str:
    assert agent.stdout is not None
    for line in agent.stdout:
        if line.startswith("ANSWER:"):
            return line
    agent.wait(30)
    raise AssertionError(f"the agent ended without an answer:\n{agent.stderr.read() if agent.stderr else ''}")


def recording_files(folder: Path) -> list[Path]:
    """The recording files (not the folder's own _semula.json)."""
    return sorted(p for p in folder.rglob("*.json") if p.is_file() and not p.name.startswith("_"))


def test_openai_agents_traces_are_side_calls_in_auto_and_replay(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, mitm_confdir: Path, dead_port: int,
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prompt = uniq("agents traces")
    recordings = tmp_path / "recordings"
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proxy = proxy_factory("auto", extra_args=("--recordings", str(recordings)))
    uploads_before = sum(r["path"] == TRACES for r in fake_provider.requests())

    agent = start_agent(script, proxy.proxy_url, proxy.ca_path, prompt)
    try:
        first = next_answer(agent)
        wait_for_rows(proxy.data_dir, lambda r: r["path"] == TRACES)  # the first run's upload went through
        files = recording_files(recordings)
        assert [f.parent.name for f in files] == ["v1-responses"], files  # the model call only
        assert agent.stdin is not None
        agent.stdin.write("\n")
        agent.stdin.flush()
        second = next_answer(agent)
        _, errors = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 0, errors
    assert "Tracing client error" not in errors and "max retries" not in errors, errors
    assert second == first, "the second run is served from the recording"

    uploads = [r for r in fake_provider.requests() if r["path"] == TRACES]
    assert len(uploads) - uploads_before >= 2, "auto forwards each run's trace upload upstream"
    assert uploads[-1]["body"]["data"], "the upload carried the run's trace"
    rows = wait_for_rows(proxy.data_dir, lambda r: r["path"] == TRACES, at_least=2)
    assert recording_files(recordings) == files, "no new recording file the second time"
    assert {r["decision"] for r in rows} == {"bypass"} and not any(r["recorded"] for r in rows), rows
    assert all(r["bypass_reason"].startswith("side call: openai-agents trace upload") for r in rows), rows
    assert all(r["provider"] == "openai" and r["status"] == 204 for r in rows), rows
    proxy.stop()

    # Replay under the pytest plugin, the provider gone, from a clean copy of the recordings.
    replay_recordings = tmp_path / "replay-recordings"
    shutil.copytree(recordings, replay_recordings)
    pytester.makepyfile(test_agents=SUITE.format(prompt=prompt))
    for name in ("OPENAI_API_KEY", "OPENAI_AGENTS_DISABLE_TRACING"):
        monkeypatch.delenv(name, raising=False)  # the plugin's placeholder key does
    data_dir = tmp_path / "replay-data"
    sets = ["confdir=" + str(mitm_confdir), "ssl_insecure=true",
            *[arg for arg in map_remote_args(dead_port) if arg != "--set"]]
    result = pytester.runpytest_subprocess(
        "--semula=replay", f"--semula-data-dir={data_dir}", f"--semula-recordings={replay_recordings}",
        *[f"--semula-set={item}" for item in sets], "-p", "no:cacheprovider", timeout=240)
    output = result.stdout.str()
    result.assert_outcomes(passed=2)
    assert "refused in replay mode" not in output, output
    assert "0 refused" in output and "1 hit" in output, output
    rows = [r for r in read_call_log(data_dir) if r["path"] == TRACES]
    assert rows and {(r["decision"], r["mode"], r["status"]) for r in rows} == {("bypass", "replay", 204)}, rows
    assert all("side call: openai-agents trace upload" in r["bypass_reason"] for r in rows), rows
    assert recording_files(replay_recordings) == [replay_recordings / f.relative_to(recordings) for f in files]
