"""proxy/realtime/hooks: the WebSocket hooks on mitmproxy's own test flows (no process, no network)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mitmproxy import http
from mitmproxy.test import taddons, tflow
from mitmproxy.websocket import WebSocketData, WebSocketMessage
from wsproto.frame_protocol import Opcode

from semula.core.conversation import Message, ReplaySession
from semula.core.modes import Mode
from semula.proxy.addon import SemulaAddon
from semula.proxy.realtime.hooks import Realtime, is_upgrade
from semula.proxy.realtime.answerer import TOKEN_HEADER

KEY = "sk-hooks-planted-00112233445566778899aabbccdd"

async def _started(addon: SemulaAddon) -> None:
    """`running`, then the store it opens in the background (the tests use the engine at once)."""
    await addon.running()
    await addon.life.store_opened()



class Rows(list):
    """The call log as the test reads it: its rows (`append`), nothing lost at `close`."""

    def close(self) -> int:
        return 0


@contextmanager
def part(mode: Mode, tmp_path: Path, session_mb: float = 64.0) -> Iterator[tuple[Realtime, Any]]:
    """The Realtime hooks of a running addon (its store and recordings folder in `tmp_path`); `calls`
    holds the call-log rows."""
    addon = SemulaAddon()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, semula_data_dir=str(tmp_path / "data"), semula_admin=False, semula_mode=mode.value,
                       semula_recordings=str(tmp_path / "recs"), semula_console_calls=False,
                       semula_realtime_max_session_mb=str(session_mb), confdir=str(tmp_path / "conf"))
        asyncio.run(_started(addon))
        addon.life.calls = calls = Rows()
        try:
            yield addon.realtime, SimpleNamespace(calls=calls, parts=addon.parts)
        finally:
            addon.done()


def conversations(addon: Any) -> list[Any]:
    """What the store holds of the default project's conversations of the test URL (on the store thread)."""
    engine = addon.parts.store.engine
    return [c for _, c in addon.parts.store.executor.submit(
        engine.conversations, "default", "/v1/realtime?model=gpt-realtime").result()]


def upgrade(path: str = f"/v1/realtime?model=gpt-realtime&api_key={KEY}") -> http.HTTPFlow:
    flow = tflow.tflow()
    flow.request.host, flow.request.port, flow.request.scheme, flow.request.path = "api.openai.com", 443, "https", path
    flow.request.headers.update({"upgrade": "websocket", "connection": "Upgrade", "authorization": f"Bearer {KEY}",
                                 "sec-websocket-protocol": f"realtime, openai-insecure-api-key.{KEY}"})
    return flow


def test_only_realtime_upgrades_are_taken() -> None:
    assert is_upgrade(upgrade().request)
    plain = upgrade()
    del plain.request.headers["upgrade"]
    assert not is_upgrade(plain.request) and not is_upgrade(upgrade("/v1/chat/completions").request)


def test_replay_points_the_upgrade_at_the_answerer_without_credentials(tmp_path: Path) -> None:
    with part(Mode.REPLAY, tmp_path) as (realtime, _):
        flow = upgrade()
        realtime.requestheaders(flow)
        asyncio.run(realtime.request(flow))
        request = flow.request
        assert (request.scheme, request.host) == ("http", "127.0.0.1")
        assert request.path == "/v1/realtime?model=gpt-realtime"
        assert KEY not in str(request.headers) and request.headers["sec-websocket-protocol"] == "realtime"
        assert request.headers[TOKEN_HEADER] in realtime.answerer.sessions


EVENTS = ((False, {"type": "session.created"}), (True, {"type": "response.create"}), (False, {"type": "response.done"}))


def talk(realtime: Realtime, flow: http.HTTPFlow, close_code: int,
         events: tuple[tuple[bool, dict[str, Any]], ...] = EVENTS) -> None:
    realtime.requestheaders(flow)
    asyncio.run(realtime.request(flow))
    flow.websocket = WebSocketData()
    realtime.websocket_start(flow)
    for from_client, event in events:
        flow.websocket.messages.append(WebSocketMessage(Opcode.TEXT, from_client, json.dumps(event).encode()))
        realtime.websocket_message(flow)
    flow.websocket.close_code = close_code
    asyncio.run(realtime.websocket_end(flow))


def test_auto_records_a_cleanly_closed_conversation_and_logs_it(tmp_path: Path) -> None:
    with part(Mode.AUTO, tmp_path) as (realtime, addon):
        talk(realtime, upgrade(), 1000)
        (loaded,) = conversations(addon)
        (row,) = addon.calls
    assert [m.from_client for m in loaded.messages] == [False, True, False]
    assert loaded.url == "/v1/realtime?model=gpt-realtime"
    assert len(list((tmp_path / "recs" / "_realtime" / "default").glob("*.json"))) == 1
    assert row["recorded"] and row["provider"] == "openai-realtime" and row["model"] == "gpt-realtime"
    assert (row["decision"], row["tier"], row["request_fp"]) == ("miss", "none", loaded.identity)
    assert row["entry_id"] is not None
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes()


def test_a_typed_key_is_redacted_in_the_file_and_the_recording_still_replays(tmp_path: Path) -> None:
    said = {"type": "conversation.item.create", "item": {"content": [{"type": "input_text", "text": f"my {KEY}"}]}}
    with part(Mode.AUTO, tmp_path) as (realtime, addon):
        talk(realtime, upgrade(), 1000, ((False, {"type": "session.created"}), (True, said),
                                         (False, {"type": "echo", "text": KEY})))
        (loaded,) = conversations(addon)
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes()
    session = ReplaySession.open([loaded], loaded.url)
    answer = session.answer(Message(True, 0.0, text=json.dumps(said)))  # the live client sends the key again
    assert answer.miss is None and KEY not in answer.messages[0].content.decode()


def test_a_conversation_over_the_session_cap_goes_on_unrecorded(tmp_path: Path) -> None:
    with part(Mode.AUTO, tmp_path, session_mb=0.001) as (realtime, addon):
        flow = upgrade()
        talk(realtime, flow, 1000, ((True, {"type": "x", "pad": "a" * 600}), (True, {"type": "x", "pad": "b" * 600})))
        assert conversations(addon) == []
    assert not (tmp_path / "recs" / "_realtime").exists()
    assert flow.websocket is not None and len(flow.websocket.messages) == 1
    (row,) = addon.calls
    assert not row["recorded"] and "semula_realtime_max_session_mb" in row["error"]


def test_a_dropped_conversation_is_not_recorded(tmp_path: Path) -> None:
    with part(Mode.AUTO, tmp_path) as (realtime, addon):
        talk(realtime, upgrade(), 1006)
        assert conversations(addon) == []
    (row,) = addon.calls
    assert not row["recorded"] and row["error"] == "not recorded: closed with code 1006"


def test_passthrough_records_nothing(tmp_path: Path) -> None:
    with part(Mode.PASSTHROUGH, tmp_path) as (realtime, addon):
        talk(realtime, upgrade(), 1000)
    assert not (tmp_path / "recs" / "_realtime").exists() and addon.calls[0]["decision"] == "passthrough"


def test_the_project_header_names_the_project_and_never_goes_upstream(tmp_path: Path) -> None:
    with part(Mode.AUTO, tmp_path) as (realtime, _):
        flow = upgrade()
        flow.request.headers["x-semula-project"] = "voice-agent"
        realtime.requestheaders(flow)
        assert realtime.live[flow.id].project == "voice-agent" and "x-semula-project" not in flow.request.headers
