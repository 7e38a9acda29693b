"""`semula drift` on MCP recordings, against the real MCP server they were recorded from (tests/support/fake_mcp.py).

The calls are recorded through the proxy by the official `mcp` client, then `semula drift` is run as a user
runs it. The server's `add` and `lookup` answers carry a call counter, so a call sent again answers
otherwise (drifted), while `tools/list` and the session's opening answer as recorded (same). A recording
goes only to a server named with `--mcp-server`: without it nothing reaches the server, and a file that
names another host, or points at another port, reaches nothing at all (a listening socket counts connects).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ProxyFactory
from e2e_helpers import clean_env, files_holding, run_semula
from test_e2e_drift_hosts import Attacker, attacker  # noqa: F401 - the fixture: a TLS listener that counts connects
from test_e2e_mcp import RESULT_SECRET, TOKEN, McpServerProcess, _get, proxy_args, run_session, server_ca, start_mcp_server

pytestmark = pytest.mark.e2e

CALLS: list[tuple[str, Any]] = [
    ("tools", None),
    ("tool", ("add", {"a": 1, "b": 2})),
    ("tool", ("lookup", {"city": "Paris"})),
]
PLANTED = "mcp-drift-planted-credential-0123456789abcdef"


def served(server: McpServerProcess) -> int:
    return int(json.loads(_get(server, "/_calls"))["calls"])


def record(proxy_factory: ProxyFactory, server: McpServerProcess, folder: Path, mode: str) -> None:
    proxy = proxy_factory("auto", extra_args=proxy_args(server, folder))
    seen = run_session(proxy, server.url, mode, CALLS)
    proxy.stop()
    assert not seen.errors and "(call 1)" in seen.results[1] and "(call 2)" in seen.results[2], seen


def drift(folder: Path, server: McpServerProcess, *args: str, **env: str) -> tuple[Any, dict[str, dict[str, Any]]]:
    """`semula drift` as a process; its report's rows by the file's name (without the hash)."""
    report = folder.parent / "drift.json"
    report.unlink(missing_ok=True)
    environ = clean_env(**env)
    environ.pop("SEMULA_MODE", None)
    res = run_semula("drift", "--recordings", str(folder), "--ca-bundle", str(server_ca(server)), "--json",
                     str(report), *args, env=environ, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = json.loads(report.read_text())["rows"]
    return res, {Path(r["file"]).name.rsplit("-", 1)[0]: r for r in rows}


@pytest.fixture
def fake_mcp(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[McpServerProcess]:
    server = start_mcp_server(tmp_path / "certs", getattr(request, "param", False))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(("mode", "fake_mcp"), [("legacy", False), ("auto", True)], indirect=["fake_mcp"],
                         ids=["handshake-sse", "single-exchange-json"])
def test_drift_re_sends_mcp_calls_to_the_registered_server_only(
        proxy_factory: ProxyFactory, fake_mcp: McpServerProcess, tmp_path: Path, mode: str) -> None:
    folder = tmp_path / "recordings"
    record(proxy_factory, fake_mcp, folder, mode)
    before = served(fake_mcp)
    opening = "initialize" if mode == "legacy" else "server-discover"

    res, rows = drift(folder, fake_mcp)  # not registered: nothing is sent
    assert served(fake_mcp) == before
    assert {r["outcome"] for r in rows.values()} == {"skipped"}, rows
    assert all(f"--mcp-server 127.0.0.1[:PORT]/mcp" in r["reason"] for r in rows.values()), rows

    registered = ("--mcp-server", f"127.0.0.1:{fake_mcp.port}")
    res, rows = drift(folder, fake_mcp, *registered, "--mcp-header", f"authorization:Bearer {PLANTED}")
    assert set(rows) == {opening, "tools-list", "tools-call-add-on-127-0-0-1", "tools-call-lookup-on-127-0-0-1"}, rows
    assert rows[opening]["outcome"] == rows["tools-list"]["outcome"] == "same", rows
    for name in ("tools-call-add-on-127-0-0-1", "tools-call-lookup-on-127-0-0-1"):
        assert rows[name]["outcome"] == "drifted", rows[name]
        assert rows[name]["drift"]["values_changed"] and rows[name]["drift"]["shape"] == [], rows[name]
    assert rows["tools-call-add-on-127-0-0-1"]["drift"]["diff"] == ["-1)", "+3)"]  # the answer text: the tool's
    assert served(fake_mcp) == before + 2  # each recorded tool call once, in one session
    report = (tmp_path / "drift.json").read_text()
    for secret in (RESULT_SECRET, PLANTED, TOKEN):
        assert secret not in res.stdout + res.stderr + report

    res, rows = drift(folder, fake_mcp, *registered, "--update")
    assert {n: r["outcome"] for n, r in rows.items() if r["outcome"] != "same"} == {
        "tools-call-add-on-127-0-0-1": "updated", "tools-call-lookup-on-127-0-0-1": "updated"}, rows
    add = next(folder.rglob("tools-call-add-*.json")).read_text()
    assert "(call 5)" in add, add  # the live answer, in the same file
    assert files_holding(RESULT_SECRET, folder) == []
    check = run_semula("recordings", "check", str(folder))
    assert check.returncode == 0, check.stdout + check.stderr


def test_an_mcp_recording_reaches_no_server_it_names(
        proxy_factory: ProxyFactory, fake_mcp: McpServerProcess, attacker: tuple[Attacker, Path], tmp_path: Path) -> None:
    """A file cannot pick the host, the port or the path it is sent to: only a registered entry can."""
    listener = attacker[0]
    port = listener.server_address[1]
    folder = tmp_path / "recordings"
    record(proxy_factory, fake_mcp, folder, "legacy")
    good = json.loads(next(folder.rglob("tools-call-add-*.json")).read_text())

    def variant(name: str, host: str, endpoint: str = "/mcp", server: str | None = None) -> str:
        data = json.loads(json.dumps(good))
        data["host"], data["endpoint"], data["request"]["endpoint"] = host, endpoint, endpoint
        data["request"]["body"]["server"] = server or host
        (folder / "default" / "mcp" / "hostile").mkdir(parents=True, exist_ok=True)
        (folder / "default" / "mcp" / "hostile" / name).write_text(json.dumps(data, indent=2))
        return name

    # The listener's host is registered, for another path only; the other files try to name its port.
    unregistered = variant("other-host.json", "localhost")
    refused = [variant("port-in-host.json", f"localhost:{port}"),
               variant("at-endpoint.json", "127.0.0.1", f"@localhost:{port}/mcp"),
               variant("slashes-endpoint.json", "127.0.0.1", f"//localhost:{port}/mcp"),
               variant("key-names-another.json", "127.0.0.1", server="localhost")]
    for other in folder.rglob("*.json"):  # the hostile files and the one good call, nothing else
        if "hostile" not in other.parts and not other.name.startswith(("_", "tools-call-add")):
            other.unlink()
    before = served(fake_mcp)

    res, rows = drift(folder, fake_mcp, "--mcp-server", f"127.0.0.1:{fake_mcp.port}",
                      "--mcp-server", f"localhost:{port}/only-this-path",
                      "--mcp-header", f"authorization:Bearer {PLANTED}")
    assert listener.connections == 0 and not listener.requests, (listener.requests, res.stdout, res.stderr)
    assert served(fake_mcp) == before + 1  # the good recording went to its server, the others nowhere
    assert rows["tools-call-add-on-127-0-0-1"]["outcome"] == "drifted", rows
    [row] = [r for r in rows.values() if r["file"].endswith(unregistered)]
    assert row["outcome"] == "skipped" and "localhost/mcp is not registered" in row["reason"], row
    for name in refused:
        assert name in res.stderr, f"{name} not named as not loadable:\n{res.stderr}"
    assert PLANTED not in res.stdout + res.stderr
