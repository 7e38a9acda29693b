"""MCP calls in the call log, the console, the run summary and the report, end to end.

The official `mcp` client (the `initialize` wire with SSE answers: it opens the GET stream, which replay
answers 405 and the client tries again, and ends with DELETE) records its tools through an auto proxy, then
replays them with the server stopped, one changed argument missing on purpose. Each call's row names its
server and tool; the console line names the tool; the GET stream, notifications and DELETE are rows that are
never a refusal and print no line; the report's overview shows the tool calls' hit rate beside the model's,
and a table per server and tool.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import folder_tag, read_call_log
from test_e2e_mcp import CALLS, RESULT_SECRET, proxy_args, run_session, start_mcp_server

pytestmark = pytest.mark.e2e

SERVER = "127.0.0.1/mcp"  # the server as its recordings are keyed: host and path, not the port


def test_mcp_calls_carry_their_server_and_tool_and_the_get_stream_is_quiet(
        proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    from semula.session.run import run_summary

    server = start_mcp_server(tmp_path / "certs", json_answers=False)
    recordings = tmp_path / "recordings"
    try:
        auto = proxy_factory("auto", extra_args=proxy_args(server, recordings))
        recorded = run_session(auto, server.url, "legacy", CALLS)
        assert not recorded.errors, recorded.errors
        auto.stop()
    finally:
        server.stop()
    rows = read_call_log(auto.data_dir)
    tool_rows = [r for r in rows if r["mcp_tool"] is not None]
    assert [(r["mcp_server"], r["mcp_tool"], r["decision"]) for r in tool_rows] == \
        [(SERVER, "add", "miss")] * 3 + [(SERVER, "lookup", "miss")], tool_rows
    assert all(r["recorded"] for r in tool_rows)

    since = datetime.now(UTC)
    replay = proxy_factory("replay", extra_args=proxy_args(server, recordings))
    replayed = run_session(replay, server.url, "legacy", CALLS)
    assert not replayed.errors, replayed.errors + [replay.output()]
    assert replayed.results == [r.replace(RESULT_SECRET, folder_tag(recordings, RESULT_SECRET))
                                for r in recorded.results]
    missed = run_session(replay, server.url, "legacy", [("tool", ("add", {"a": 2, "b": 2}))])
    assert len(missed.errors) == 1, missed
    assert replay.pump.wait_for(lambda s: "tools/call 'add'" in s and "→ miss" in s, 20), replay.describe()
    replay.stop()

    rows = [r for r in read_call_log(replay.data_dir) if r["mode"] == "replay"]
    calls = [r for r in rows if not (r["bypass_reason"] or "").startswith("not a call: ")]
    assert all(r["mcp_server"] == SERVER for r in rows), rows
    assert [(r["mcp_tool"], r["decision"]) for r in calls if r["mcp_tool"]] == \
        [("add", "hit")] * 3 + [("lookup", "hit"), ("add", "miss")], calls
    assert {r["model"] for r in calls if not r["mcp_tool"]} >= {"initialize", "tools/list", "prompts/get greet on 127.0.0.1"}
    quiet = [r for r in rows if r not in calls]
    kinds = {r["bypass_reason"].split(" to ")[0] for r in quiet}
    assert {"not a call: MCP notification", "not a call: MCP server-to-client stream (GET)",
            "not a call: MCP session end (DELETE)"} <= kinds, kinds
    assert all(r["decision"] == "bypass" and r["mcp_tool"] is None for r in quiet)

    # The console: each call names its tool; the traffic that is not a call prints nothing.
    lines = [line for line in replay.output().splitlines() if line.startswith("semula: default mcp ")]
    assert sum(f"{SERVER} tools/call 'add' → hit" in line for line in lines) == 3, lines
    assert any(f"{SERVER} tools/call 'lookup' → hit" in line for line in lines), lines
    assert any(f"{SERVER} tools/list → hit" in line for line in lines), lines
    assert not [line for line in lines if "not a call" in line or " GET " in line or " DELETE " in line], lines
    assert len(lines) == len(calls), lines

    # The run summary counts the one miss as refused, not the GET stream's 405s.
    summary = run_summary(replay.data_dir, since)
    assert summary == f"semula: {len(calls)} calls · {len(calls) - 1} hits · 0 misses · 1 refused", summary

    # The report: the overview notebook's numbers and its tables.
    from semula.reporting.report import analysis_dir, execute_notebooks, render_html

    (run,) = execute_notebooks([analysis_dir() / "overview.ipynb"], replay.data_dir)
    assert run.error is None, run.error
    results = run.results or {}
    assert results["tool_calls"]["lookups"] == len(calls) and results["tool_calls"]["hits"] == len(calls) - 1
    assert results["model_calls"] is None  # no model calls in this run
    by_tool = {row["tool"]: row for row in results["mcp"]}
    assert (by_tool["add"]["calls"], by_tool["add"]["hits"], by_tool["add"]["misses"]) == (4, 3, 1), by_tool
    assert (by_tool["lookup"]["hits"], by_tool["lookup"]["misses"]) == (1, 0)
    assert "(tools/list)" in by_tool and all(row["server"] == SERVER for row in results["mcp"])
    assert results["replay_failures"] == 1, results  # the miss; never the GET stream
    page = html.unescape(render_html([run], replay.data_dir))
    assert "tool-call hit rate" in page and "Model calls and tool calls (MCP servers)" in page
    table = re.search(r"<table[^>]*>(?:(?!</table>).)*?<th>server</th>.*?</table>", page, re.S)
    assert table is not None and "add" in table.group(0) and SERVER in table.group(0), page[:2000]
