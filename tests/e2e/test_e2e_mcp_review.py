"""MCP tool calls near their recording, end to end: arguments that differ only in a volatile value (a
request id) replay from the normalised tier; any other change is a miss that queues the nearest recording
of the same tool on the same server for review, never served; a person's approval then serves it.

The official `mcp` client through a replay proxy with the MCP server stopped (tests/e2e/test_e2e_mcp.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import read_call_log, run_semula
from test_e2e_mcp import proxy_args, run_session, start_mcp_server

pytestmark = pytest.mark.e2e

RECORDED_ID = "3f2b8c1e-9a4d-4e6b-8f0a-1c2d3e4f5a6b"
LATER_ID = "7d1e2f3a-4b5c-4d6e-8f7a-9b0c1d2e3f4a"


def review(data_dir: Path, *args: str) -> str:
    result = run_semula("review", *args, "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def test_a_close_tool_call_is_reviewed_never_served_and_an_approval_serves_it(
        proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    server = start_mcp_server(tmp_path / "certs", json_answers=True)
    recordings = tmp_path / "recordings"
    try:
        auto = proxy_factory("auto", extra_args=proxy_args(server, recordings))
        recorded = run_session(auto, server.url, "legacy", [
            ("tool", ("lookup", {"city": "Paris", "request_id": RECORDED_ID})),
            ("tool", ("add", {"a": 1, "b": 2}))])
        assert not recorded.errors, recorded.errors
        auto.stop()
    finally:
        server.stop()

    replay = proxy_factory("replay", extra_args=proxy_args(server, recordings))
    # Only the request id differs: the normalised tier serves the recorded answer.
    volatile = run_session(replay, server.url, "legacy", [("tool", ("lookup", {"city": "Paris", "request_id": LATER_ID}))])
    assert not volatile.errors and "weather in Paris" in volatile.results[0], volatile
    # Another city, another sum: misses, each queueing the same tool's recording with the guard's reason.
    other = run_session(replay, server.url, "legacy", [
        ("tool", ("lookup", {"city": "Paris Texas", "request_id": LATER_ID})),
        ("tool", ("add", {"a": 1, "b": 3}))])
    assert len(other.errors) == 2 and not other.results, other
    assert all("queued for review: candidate #" in e for e in other.errors), other.errors
    listed = json.loads(review(replay.data_dir, "list", "--json"))
    candidates = {c["model"]: c for c in listed}
    assert set(candidates) == {"tools/call lookup on 127.0.0.1", "tools/call add on 127.0.0.1"}, candidates
    added = candidates["tools/call add on 127.0.0.1"]
    assert "number" in (added.get("guard_reason") or ""), added  # 2 → 3: a different call, said so

    review(replay.data_dir, "approve", str(candidates["tools/call lookup on 127.0.0.1"]["id"]))
    approved = run_session(replay, server.url, "legacy", [("tool", ("lookup", {"city": "Paris Texas", "request_id": LATER_ID}))])
    assert not approved.errors and "weather in Paris" in approved.results[0], approved
    replay.stop()

    rows = [r for r in read_call_log(replay.data_dir) if r["mode"] == "replay" and r["mcp_tool"]]
    assert [(r["mcp_tool"], r["decision"], r["tier"]) for r in rows] == [
        ("lookup", "hit", "normalised"), ("lookup", "miss", "none"), ("add", "miss", "none"), ("lookup", "hit", "alias")], rows
