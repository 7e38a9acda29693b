"""MCP servers end to end: the official `mcp` client through the proxy to a real MCP server, recorded, then
replayed with the server stopped.

The server (tests/support/fake_mcp.py) is the SDK's own `MCPServer` over Streamable HTTP behind TLS on
loopback; its answers depend on the arguments and on a call counter, so a replay that served the wrong
recording, or reached the server, shows. Both wires the SDK speaks are covered: the `initialize`
handshake with its `Mcp-Session-Id`, SSE answers, the GET stream and DELETE (`legacy`), and the
stateless 2026 wire the client's `auto` mode finds first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import ProxyFactory
from e2e_helpers import OutputPump, ProxyHandle, clean_env, folder_tag, run_semula, ssl_context, stop_process

pytestmark = pytest.mark.e2e

FAKE_MCP = Path(__file__).resolve().parents[1] / "support" / "fake_mcp.py"
TOKEN = "mcp-secret-token-0123456789abcdef0123456789"
RESULT_SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass
class McpServerProcess:
    proc: subprocess.Popen[str]
    port: int
    pump: OutputPump

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        stop_process(self.proc)
        self.pump.join()


def start_mcp_server(cert_dir: Path, json_answers: bool) -> McpServerProcess:
    proc = subprocess.Popen([sys.executable, str(FAKE_MCP), "--port", "0", "--cert-dir", str(cert_dir),
                             *(["--json"] if json_answers else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=clean_env(PYTHONUNBUFFERED="1"), start_new_session=True)
    assert proc.stdout is not None
    pump = OutputPump(proc.stdout)
    line = pump.wait_for(lambda s: s.startswith("fake_mcp ready port="), 30)
    if line is None:
        stop_process(proc)
        raise AssertionError(f"fake MCP server did not start:\n{pump.text()}")
    return McpServerProcess(proc, int(line.strip().rsplit("=", 1)[1]), pump)


@pytest.fixture
def mcp_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[McpServerProcess]:
    """The server, answering SSE (the SDK's default) or `application/json` (`json_answers`)."""
    server = start_mcp_server(tmp_path / "certs", request.node.callspec.params.get("json_answers", False))
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Session:
    """What one client session saw: tool results as text, the session ids the server handed out."""

    results: list[str] = field(default_factory=list)
    session_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run_session(proxy: ProxyHandle, url: str, mode: str, calls: list[tuple[str, Any]]) -> Session:
    """One `mcp.Client` session through the proxy; each call is ("tool", (name, args)), ("resource", uri),
    ("prompt", (name, args)) or ("tools", None). A hang fails the test (a deadline, never a sleep)."""
    import httpx2
    from mcp import Client, MCPError
    from mcp.client.streamable_http import streamable_http_client

    seen = Session()

    async def on_response(response: Any) -> None:
        if (sid := response.headers.get("mcp-session-id")) and sid not in seen.session_ids:
            seen.session_ids.append(sid)

    async def main() -> None:
        with anyio.fail_after(60):
            async with httpx2.AsyncClient(proxy=proxy.proxy_url, verify=ssl_context(proxy.ca_path), trust_env=False,
                                          headers={"authorization": f"Bearer {TOKEN}"}, timeout=30,
                                          event_hooks={"response": [on_response]}) as http:
                async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
                    for kind, what in calls:
                        try:
                            if kind == "tool":
                                result = await client.call_tool(*what)
                                seen.results.append(json.dumps([c.model_dump() for c in result.content]))
                            elif kind == "tools":
                                seen.results.append(json.dumps(sorted(t.name for t in (await client.list_tools()).tools)))
                            elif kind == "resource":
                                read = await client.read_resource(what)
                                seen.results.append(json.dumps([c.model_dump(mode="json") for c in read.contents]))
                            elif kind == "prompt":
                                got = await client.get_prompt(*what)
                                seen.results.append(json.dumps([m.model_dump(mode="json") for m in got.messages]))
                        except MCPError as e:
                            seen.errors.append(str(e))

    anyio.run(main)
    return seen


CALLS: list[tuple[str, Any]] = [
    ("tools", None),
    ("tool", ("add", {"a": 1, "b": 2})),
    ("tool", ("add", {"a": 1, "b": 2})),  # the same call again: its second answer
    ("tool", ("add", {"a": 5, "b": 7})),
    ("tool", ("lookup", {"city": "Paris"})),
    ("resource", "notes://today"),
    ("prompt", ("greet", {"name": "Ada"})),
]


def proxy_args(server: McpServerProcess, recordings: Path) -> tuple[str, ...]:
    return ("--mcp-server", f"127.0.0.1:{server.port}", "--recordings", str(recordings),
            "--set", "semula_repeats=sequence")


# The Python client takes an SSE answer as its request's whatever its id; a JSON answer must carry the id it sent.
@pytest.mark.parametrize(("mode", "json_answers"), [("legacy", False), ("legacy", True), ("auto", True)])
def test_mcp_calls_are_recorded_and_replayed_with_the_server_stopped(
        proxy_factory: ProxyFactory, mcp_server: McpServerProcess, tmp_path: Path, mode: str,
        json_answers: bool) -> None:
    recordings = tmp_path / "recordings"
    auto = proxy_factory("auto", extra_args=proxy_args(mcp_server, recordings))
    recorded = run_session(auto, mcp_server.url, mode, CALLS)
    assert not recorded.errors, recorded.errors
    assert "call 1)" in recorded.results[1] and "call 2)" in recorded.results[2], recorded.results
    assert RESULT_SECRET in recorded.results[4]  # the client gets the live answer whole
    auto.stop()
    files = sorted(p.relative_to(recordings).as_posix() for p in recordings.rglob("*.json"))
    assert any(f.startswith("default/mcp/127-0-0-1-mcp/tools-call-add-") for f in files), files
    stored = "\n".join(p.read_text() for p in recordings.rglob("*.json"))
    for secret in (TOKEN, RESULT_SECRET, *recorded.session_ids):
        assert secret not in stored, f"{secret[:12]}… stored in a recording"
    assert TOKEN not in auto.output()
    assert "notifications" not in "".join(files), files  # not calls: never recorded
    served_before = json.loads(_get(mcp_server, "/_calls"))["calls"]
    mcp_server.stop()

    replay = proxy_factory("replay", extra_args=proxy_args(mcp_server, recordings))
    # Another order: every JSON-RPC id differs from the recorded request's (the client waits for its own).
    replayed = run_session(replay, mcp_server.url, mode, CALLS[5:] + CALLS[:5])
    assert not replayed.errors, replayed.errors + [replay.output()]
    replayed.results = replayed.results[2:] + replayed.results[:2]
    expected = [r.replace(RESULT_SECRET, folder_tag(recordings, RESULT_SECRET)) for r in recorded.results]
    assert replayed.results[:4] + replayed.results[5:] == expected[:4] + expected[5:]
    assert RESULT_SECRET not in replayed.results[4] and "weather in Paris" in replayed.results[4]
    assert served_before == 4  # the server answered the recording run's four tool calls, none since
    if mode == "legacy":
        assert len(replayed.session_ids) == 1 and replayed.session_ids[0] not in recorded.session_ids

    missed = run_session(replay, mcp_server.url, mode, [("tool", ("add", {"a": 2, "b": 2}))])
    assert len(missed.errors) == 1, missed
    message = missed.errors[0]
    assert "tools/call 'add'" in message and "127.0.0.1/mcp" in message, message
    assert "no recording matches" in message and "default/mcp/127-0-0-1-mcp/tools-call-add-" in message, message
    replay.stop()

    check = run_semula("recordings", "check", str(recordings))
    assert check.returncode == 0, check.stderr
    unused = run_semula("recordings", "unused", str(recordings), "--data-dir", str(replay.data_dir), "--json")
    assert unused.returncode == 0, unused.stderr
    assert [line for line in unused.stdout.splitlines() if line.strip()] == [], unused.stdout  # every file replayed


def _get(server: McpServerProcess, path: str) -> str:
    import urllib.request

    with urllib.request.urlopen(f"https://127.0.0.1:{server.port}{path}",
                                context=ssl_context(server_ca(server)), timeout=10) as answer:
        return answer.read().decode()


def server_ca(server: McpServerProcess) -> Path:
    return Path(server.proc.args[5]) / "fake-ca.pem"  # type: ignore[index]
