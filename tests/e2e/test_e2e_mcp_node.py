"""The TypeScript SDK's MCP client (`@modelcontextprotocol/sdk`) through `semula exec`: recorded, then replayed
with the server stopped, from a clean copy of the recordings.

The server is the Python SDK's (tests/support/fake_mcp.py) on loopback, reached under a host name of its own
(`--mcp-server` names it, `map_remote` sends it to the server): `semula env`'s NO_PROXY keeps loopback away
from the proxy, as it should. The client (tests/clients/mcp_tools.mjs) lists the tools, calls `add` twice with
the same arguments and once with others, and ends its session; in replay it also asks for a call never
recorded, which must fail with semula's message rather than hang. Skipped when node or npm is missing, or the
packages cannot be installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from e2e_helpers import REPO, clean_env, npm_project, proxy_test_args, read_call_log, semula_cmd
from test_e2e_mcp import start_mcp_server

pytestmark = pytest.mark.e2e

CLIENT = REPO / "tests" / "clients" / "mcp_tools.mjs"
HOST = "mcp.semula-test.example"


@pytest.fixture(scope="module")
def node_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("node-mcp")
    (project / "package.json").write_text('{"private": true, "type": "module"}')
    npm_project(project, "@modelcontextprotocol/sdk", "undici")
    shutil.copyfile(CLIENT, project / "mcp_tools.mjs")
    return project


def semula_exec(project: Path, data_dir: Path, confdir: Path, mode: str, recordings: Path, server_port: int,
                *client_args: str) -> tuple[dict[str, object], str]:
    argv = [*semula_cmd(), "exec", "--data-dir", str(data_dir), "--mode", mode, *proxy_test_args(confdir, 1),
            "--mcp-server", f"{HOST}/mcp", "--set", f"map_remote=|//{HOST}/|//127.0.0.1:{server_port}/",
            "--recordings", str(recordings), "--", "node", "mcp_tools.mjs", f"https://{HOST}/mcp", *client_args]
    done = subprocess.run(argv, cwd=project, capture_output=True, text=True, env=clean_env(), timeout=180)
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert done.returncode == 0 and line is not None, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return json.loads(line.removeprefix("RESULT ")), done.stdout + done.stderr


def test_the_typescript_sdk_records_and_replays_through_semula_exec(
        node_project: Path, mitm_confdir: Path, tmp_path: Path) -> None:
    server = start_mcp_server(tmp_path / "certs", json_answers=False)
    recordings = tmp_path / "recordings"
    try:
        recorded, _ = semula_exec(node_project, tmp_path / "auto-data", mitm_confdir, "auto", recordings, server.port)
    finally:
        server.stop()
    results = json.dumps(recorded["results"])
    assert recorded["tools"] == ["add", "lookup"], recorded
    assert "1 + 2 = 3 (call 1)" in results and "1 + 2 = 3 (call 2)" in results and "5 + 7 = 12 (call 3)" in results

    clean = tmp_path / "clean-clone" / "recordings"
    shutil.copytree(recordings, clean)
    data_dir = tmp_path / "replay-data"
    replayed, output = semula_exec(node_project, data_dir, mitm_confdir, "replay", clean, server.port, "miss")
    assert replayed["tools"] == recorded["tools"] and replayed["results"] == recorded["results"], replayed
    assert replayed["session"] and replayed["session"] != recorded["session"]  # this session's own id
    miss = str(replayed.get("miss"))
    assert f"tools/call 'add' on {HOST}/mcp" in miss and "no recording matches" in miss, miss
    # The miss only: the GET stream (405, asked again), notifications and DELETE are not calls.
    assert "semula: 6 calls · 5 hits · 0 misses · 1 refused\n" in output, output

    rows = read_call_log(data_dir)
    tool_rows = [(r["mcp_server"], r["mcp_tool"], r["decision"]) for r in rows if r["mcp_tool"]]
    assert tool_rows == [(f"{HOST}/mcp", "add", "hit")] * 3 + [(f"{HOST}/mcp", "add", "miss")], rows
