"""openai-agents with an MCP server tool (`MCPServerStreamableHttp`), driven by a model call, recorded and then
replayed offline from a clean copy of the recordings: the model (the fake provider's tool-calling Responses
route, tests/support/fake_tools.py) and the MCP server (the SDK's own server, tests/support/fake_mcp.py) both
gone in replay.

The agent asks the model, which calls the server's `add` tool twice (parallel calls, other arguments); the
agent sends the tools' results back, and the model's final answer quotes them. The tool answers carry the
server's call counter, so a replay that reached the server, or served the wrong recording, shows in the answer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, clean_env, files_holding, folder_tag, read_call_log, uniq
from test_e2e_mcp import RESULT_SECRET, proxy_args, start_mcp_server

pytestmark = pytest.mark.e2e
pytest.importorskip("agents")

# The start of an agent script: the MCP client's HTTP client goes through the proxy named in HTTPS_PROXY,
# given explicitly (the NO_PROXY that semula sets would send a loopback server around it).
AGENT_PRELUDE = '''
import asyncio
import json
import os
import ssl
import sys

import httpx2
from agents import Agent, Runner
from agents.mcp import MCPServerStreamableHttp


def through_semula(headers=None, timeout=None, auth=None):
    verify = ssl.create_default_context()  # OpenSSL's defaults: SSL_CERT_FILE, or the directory semula sets
    return httpx2.AsyncClient(proxy=os.environ["HTTPS_PROXY"], verify=verify, trust_env=False, headers=headers,
                              timeout=timeout, auth=auth, follow_redirects=False)
'''

AGENT = AGENT_PRELUDE + '''

async def main(url, prompt):
    params = {"url": url, "httpx_client_factory": through_semula, "timeout": 30}
    async with MCPServerStreamableHttp(params=params, name="calc", cache_tools_list=True) as server:
        agent = Agent(name="Calc", instructions="Use the calc tools.", model="gpt-4o-mini", mcp_servers=[server])
        result = await Runner.run(agent, prompt)
    outputs = sorted(str(item.output) for item in result.new_items if item.type == "tool_call_output_item")
    print("RESULT " + json.dumps({"answer": result.final_output, "tools": outputs}), flush=True)


asyncio.run(main(sys.argv[1], sys.argv[2]))
'''


def run_agent(script: Path, proxy: ProxyHandle, url: str, prompt: str) -> dict[str, object]:
    env = clean_env(HTTPS_PROXY=proxy.proxy_url, SSL_CERT_FILE=str(proxy.ca_path),
                    OPENAI_API_KEY="sk-test-agents-not-a-real-key", OPENAI_AGENTS_DISABLE_TRACING="1")
    done = subprocess.run([sys.executable, str(script), url, prompt], capture_output=True, text=True, env=env,
                          timeout=120)
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert done.returncode == 0 and line is not None, f"{done.stdout}\n{done.stderr}\n{proxy.describe()}"
    return json.loads(line.removeprefix("RESULT "))


@dataclass
class Runs:
    recorded: dict[str, object]
    replayed: dict[str, object]
    recordings: Path  # the folder the recording run wrote
    clean: Path  # its clean copy the replay read
    data_dirs: tuple[Path, Path]  # the recording proxy's, the replaying proxy's


def record_then_replay(proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path, prompt: str) -> Runs:
    """The agent run once through a recording proxy, then again from a clean copy of the recordings with the
    model and the MCP server gone: no model call reaches the provider, and every call is a hit."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    server = start_mcp_server(tmp_path / "certs", json_answers=False)
    recordings = tmp_path / "recordings"
    try:
        auto = proxy_factory("auto", extra_args=proxy_args(server, recordings))
        recorded = run_agent(script, auto, server.url, prompt)
        auto.stop()
    finally:
        server.stop()
    clean = tmp_path / "clean-clone" / "recordings"
    shutil.copytree(recordings, clean)
    model_calls = fake_provider.count()
    replay = proxy_factory("replay", upstream="gone", extra_args=proxy_args(server, clean))
    replayed = run_agent(script, replay, server.url, prompt)  # the server is stopped, the provider gone
    replay.stop()
    assert fake_provider.count() == model_calls
    rows = [r for r in read_call_log(replay.data_dir) if not (r["bypass_reason"] or "").startswith("not a call: ")]
    assert {r["decision"] for r in rows} == {"hit"}, rows
    assert sum(r["provider"] == "openai" for r in rows) == 2, rows  # the model's two turns
    return Runs(recorded, replayed, recordings, clean, (auto.data_dir, replay.data_dir))


def test_an_agent_with_an_mcp_tool_replays_offline_from_a_clean_copy(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path) -> None:
    prompt = f'{uniq("agent mcp")} TOOLCALL add {{"a": 3, "b": 4}} TOOLCALL add {{"a": 10, "b": 20}}'
    runs = record_then_replay(proxy_factory, fake_provider, tmp_path, prompt)
    recorded = runs.recorded
    tools = recorded["tools"]
    assert isinstance(tools, list) and len(tools) == 2, recorded
    assert "3 + 4 = 7 (call" in "".join(tools) and "10 + 20 = 30 (call" in "".join(tools), recorded
    assert "tool results:" in str(recorded["answer"]) and "3 + 4 = 7" in str(recorded["answer"]), recorded
    assert runs.replayed == recorded  # every tool result and the final answer, identical
    rows = read_call_log(runs.data_dirs[1])
    assert sorted(r["mcp_tool"] for r in rows if r["mcp_tool"]) == ["add", "add"], rows


def test_an_agent_echoing_a_tools_secret_to_the_model_replays_offline(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path) -> None:
    """The `lookup` tool's result holds a token; the agent sends it back to the model, whose answer quotes it.
    The recorded answers carry the token's tag under the folder's committed salt, the tag the recorded
    follow-up request was fingerprinted with: the replayed agent echoes the tag, and the follow-up hits."""
    prompt = f'{uniq("agent secret")} TOOLCALL lookup {{"city": "Paris"}}'
    runs = record_then_replay(proxy_factory, fake_provider, tmp_path, prompt)
    recorded = json.dumps(runs.recorded)
    assert RESULT_SECRET in recorded and "weather in Paris" in recorded, recorded  # the live run: the token whole
    assert json.dumps(runs.replayed) == recorded.replace(RESULT_SECRET, folder_tag(runs.clean, RESULT_SECRET))
    assert files_holding(RESULT_SECRET, runs.recordings, runs.clean, *runs.data_dirs) == []
