"""Realtime conversations shared through a Postgres store, like any other recording.

One `semula proxy` in auto records two conversations (OpenAI's and Azure's) from the fake Realtime server
into a Postgres store, with no recordings folder; a second proxy on the same store, in replay, with no
folder either and the provider gone, answers both from the store byte for byte, and never reaches the
fake. Each conversation leaves the call-log row an HTTP call leaves: a miss recorded as entry N, then a
hit exact of entry N.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, dumped_if_stalled, wait_for_rows
from fake_realtime import FakeRealtime, converse

pytestmark = pytest.mark.e2e

KEY = "sk-realtime-pg-planted-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
TURNS = ("Hello from the first runner", "And a second turn")
AZURE = "semula-pg.openai.azure.com"


def watch(proxy: ProxyHandle) -> Callable[[], AbstractContextManager[list[str]]]:
    return lambda: dumped_if_stalled(proxy)  # an upgrade that fails after 10 s says where the proxy waited


def test_conversations_recorded_by_one_proxy_replay_through_another_on_the_same_postgres_store(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, fake_realtime: FakeRealtime, pg_url: str) -> None:
    azure = f"map_remote=|//{AZURE}/|//127.0.0.1:{fake_realtime.port}/"
    recorder = proxy_factory("auto", extra_args=("--store", pg_url, "--recordings", "off",
                                                 "--set", fake_realtime.route(fake_provider.port), "--set", azure))
    events = converse(recorder.proxy_url, recorder.ca_path, KEY, TURNS, watch=watch(recorder))
    azure_events = converse(recorder.proxy_url, recorder.ca_path, KEY, TURNS, AZURE, watch(recorder))
    rows = wait_for_rows(recorder.data_dir, lambda r: r["provider"] == "openai-realtime" and r["recorded"],
                         at_least=2, timeout=30)
    assert len(rows) == 2 and all(r["decision"] == "miss" and r["entry_id"] for r in rows), rows
    connections = fake_realtime.connections

    replayer = proxy_factory("replay", upstream="gone", extra_args=("--store", pg_url, "--recordings", "off"))
    replayed = converse(replayer.proxy_url, replayer.ca_path, KEY, TURNS, watch=watch(replayer))
    assert replayed == events  # byte for byte, ids included
    azure_replayed = converse(replayer.proxy_url, replayer.ca_path, KEY, TURNS, AZURE, watch(replayer))
    assert azure_replayed == azure_events
    assert fake_realtime.connections == connections
    hits = wait_for_rows(replayer.data_dir, lambda r: r["provider"] == "openai-realtime", at_least=2, timeout=30)
    assert sorted((r["decision"], r["tier"], r["entry_id"]) for r in hits) == sorted(
        ("hit", "exact", r["entry_id"]) for r in rows), hits
    assert not (replayer.data_dir / "realtime").exists() and not (recorder.data_dir / "realtime").exists()
