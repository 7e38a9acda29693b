"""An agent test that calls a model and two MCP tools, run the way a user runs it: `pytest --semula=MODE`
(issue 37's "done when").

The inner suite (pytester, in a subprocess) runs an openai-agents agent with the MCP server as its tool
source (`MCPServerStreamableHttp`); the model (the fake provider's tool-calling route,
tests/support/fake_tools.py) calls the server's `add` and `lookup` tools (tests/support/fake_mcp.py),
then quotes their results. Recorded once with `--semula=record` against the live model and server;
then only the recordings folder is copied to a fresh place (a clean clone: a new data dir, nothing
else), the server is stopped, the model's host is mapped to a closed port, and the same suite passes
with `--semula=replay`, with the very tool results and final answer of the recorded run. The tools'
answers carry the server's call counter, so a replay that reached the server, or served the wrong
recording, shows in the result.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from e2e_helpers import FakeProvider, map_remote_args, read_call_log, uniq
from test_e2e_mcp import McpServerProcess, _get, start_mcp_server
from test_e2e_mcp_agents import AGENT_PRELUDE

pytestmark = pytest.mark.e2e
pytest_plugins = ("pytester",)
pytest.importorskip("agents")

SUITE = '''
async def run_agent():
    params = {{"url": {url!r}, "httpx_client_factory": through_semula, "timeout": 30}}
    async with MCPServerStreamableHttp(params=params, name="tools", cache_tools_list=True) as server:
        agent = Agent(name="Helper", instructions="Use the tools.", model="gpt-4o-mini", mcp_servers=[server])
        return await Runner.run(agent, {prompt!r})


def test_agent_calls_the_model_and_two_mcp_tools():
    result = asyncio.run(run_agent())
    tools = sorted(str(item.output) for item in result.new_items if item.type == "tool_call_output_item")
    assert len(tools) == 2, tools
    joined = " ".join(tools)
    assert "2 + 5 = 7 (call " in joined and "weather in Oslo: sunny (call " in joined, tools
    answer = str(result.final_output)
    assert answer.startswith("tool results: ") and "2 + 5 = 7" in answer and "weather in Oslo" in answer, answer
    with open({out!r}, "w") as f:
        json.dump({{"answer": answer, "tools": tools}}, f)
'''


def run_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, confdir: Path, mode: str,
              upstream_port: int, data_dir: Path, recordings: Path, server: McpServerProcess, out: Path,
              prompt: str) -> dict[str, object]:
    pytester.makepyfile(test_agent=AGENT_PRELUDE + SUITE.format(url=server.url, prompt=prompt, out=str(out)))
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    if mode == "replay":
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the plugin's placeholder must do
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-mcp-plugin-not-a-real-key")
    sets = ["confdir=" + str(confdir), "ssl_insecure=true",  # the MCP server's certificate is the test CA's
            *[arg for arg in map_remote_args(upstream_port) if arg != "--set"]]
    result = pytester.runpytest_subprocess(
        f"--semula={mode}", f"--semula-data-dir={data_dir}", f"--semula-recordings={recordings}",
        f"--semula-mcp-server=127.0.0.1:{server.port}", *[f"--semula-set={item}" for item in sets],
        "-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=1)
    return json.loads(out.read_text())


def test_an_agent_test_with_a_model_and_two_mcp_tools_replays_offline_from_a_clean_clone(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider,
        mitm_confdir: Path, dead_port: int, tmp_path: Path) -> None:
    tools = 'TOOLCALL add {"a": 2, "b": 5} TOOLCALL lookup {"city": "Oslo", "with_token": false}'
    prompt = f'{uniq("plugin mcp")} {tools}'
    server = start_mcp_server(tmp_path / "certs", json_answers=False)
    recordings = tmp_path / "work" / "recordings"
    model_calls = fake_provider.count()
    try:
        recorded = run_suite(pytester, monkeypatch, mitm_confdir, "record", fake_provider.port,
                             tmp_path / "work" / "data", recordings, server, tmp_path / "recorded.json", prompt)
        served = json.loads(_get(server, "/_calls"))["calls"]
    finally:
        server.stop()
    assert served == 2, "the server answered the recording run's two tool calls"
    assert fake_provider.count() == model_calls + 2, "the model's two turns reached the provider"
    files = sorted(p.relative_to(recordings).as_posix() for p in recordings.rglob("*.json"))
    assert any(f.startswith("default/mcp/127-0-0-1-mcp/tools-call-add-") for f in files), files
    assert any(f.startswith("default/mcp/127-0-0-1-mcp/tools-call-lookup-") for f in files), files

    clone = tmp_path / "clone" / "recordings"  # a clean clone: the committed folder only
    shutil.copytree(recordings, clone)
    data_dir = tmp_path / "clone" / "data"
    replayed = run_suite(pytester, monkeypatch, mitm_confdir, "replay", dead_port, data_dir, clone, server,
                         tmp_path / "replayed.json", prompt)
    assert replayed == recorded  # both tool results and the final answer, byte for byte
    assert fake_provider.count() == model_calls + 2, "no model call reached the provider in replay"

    rows = [r for r in read_call_log(data_dir) if not (r["bypass_reason"] or "").startswith("not a call: ")]
    assert {r["decision"] for r in rows} == {"hit"}, rows
    assert sum(r["provider"] == "openai" for r in rows) == 2, rows  # the model's two turns
    assert sorted(r["mcp_tool"] for r in rows if r["mcp_tool"]) == ["add", "lookup"], rows
