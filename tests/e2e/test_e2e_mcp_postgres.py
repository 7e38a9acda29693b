"""MCP calls shared through a Postgres store, like any other recording.

One `semula proxy` in auto, on a Postgres store with no recordings folder, records an `mcp` client session
with the real MCP server (tests/support/fake_mcp.py): the tools list, a repeated tool call, other tools,
a resource and a prompt. A second proxy on the same store, with a data dir of its own and no folder
either, replays the same session with the server stopped: every call a hit exact of the entry the first
proxy recorded, every result the recorded one. The `lookup` tool's token is stored redacted, under the
store's own salt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import read_call_log
from semula.core.redact import FingerprintKey
from semula.store.postgres.store import PgStore
from test_e2e_mcp import CALLS, RESULT_SECRET, McpServerProcess, _get, run_session, start_mcp_server

pytestmark = pytest.mark.e2e


def tool_call_rows(data_dir: Path) -> list[tuple[str, str, str | None, int | None]]:
    """(JSON-RPC method, decision, tier, entry id) of each MCP call, in call order."""
    rows = [r for r in read_call_log(data_dir) if r["mcp_server"]
            and not (r["bypass_reason"] or "").startswith("not a call: ")]
    return [(r["mcp_tool"] or "", r["decision"], r["tier"], r["entry_id"]) for r in rows]


def stored_token(pg_url: str) -> tuple[str, list[int], list[int]]:
    """The tag the result's token becomes under the store's salt, and the ids of the entries that hold the
    token, and its tag."""
    store = PgStore.open(pg_url)
    try:
        tag = FingerprintKey(store.fingerprint_salt()).tag(RESULT_SECRET)
        entries = {row[0]: repr(store.get_entry(row[0])) for row in store.index_rows()}
        return (tag, [i for i, text in entries.items() if RESULT_SECRET in text],
                [i for i, text in entries.items() if tag in text])
    finally:
        store.close()


def test_mcp_calls_recorded_by_one_proxy_replay_through_another_on_the_same_postgres_store(
        proxy_factory: ProxyFactory, tmp_path: Path, pg_url: str) -> None:
    server: McpServerProcess = start_mcp_server(tmp_path / "certs", json_answers=False)
    args = ("--store", pg_url, "--recordings", "off", "--mcp-server", f"127.0.0.1:{server.port}",
            "--set", "semula_repeats=sequence")
    try:
        recorder = proxy_factory("auto", extra_args=args)
        recorded = run_session(recorder, server.url, "legacy", CALLS)
        recorder.stop()  # its writes are in Postgres once it has stopped
        served = json.loads(_get(server, "/_calls"))["calls"]
    finally:
        server.stop()
    assert not recorded.errors, recorded.errors
    assert served == 4, "the server answered the four tool calls"
    assert RESULT_SECRET in recorded.results[4]  # the live answer, whole
    recorded_rows = tool_call_rows(recorder.data_dir)
    assert [(tool, decision) for tool, decision, _, _ in recorded_rows] == [
        ("", "miss"), ("", "miss"), ("add", "miss"), ("add", "miss"), ("add", "miss"), ("lookup", "miss"),
        ("", "miss"), ("", "miss")], recorded_rows  # initialize, tools/list, the tools, resource, prompt
    assert all(entry for *_, entry in recorded_rows), recorded_rows
    tag, holding_token, holding_tag = stored_token(pg_url)
    assert holding_token == [] and len(holding_tag) == 1, "the token reached the Postgres store"

    replayer = proxy_factory("replay", upstream="gone", extra_args=args)  # another data dir, the server stopped
    replayed = run_session(replayer, server.url, "legacy", CALLS)
    replayer.stop()
    assert not replayed.errors, replayed.errors + [replayer.output()[-3000:]]
    assert replayed.results == [r.replace(RESULT_SECRET, tag) for r in recorded.results]
    assert RESULT_SECRET not in replayed.results[4] and tag in replayed.results[4]
    assert tool_call_rows(replayer.data_dir) == [
        (tool, "hit", "exact", entry) for tool, _, _, entry in recorded_rows], read_call_log(replayer.data_dir)
