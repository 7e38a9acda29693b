"""The Realtime edge: mitmproxy's WebSocket hooks for `/v1/realtime` and `/openai/realtime` upgrades.

A part the addon holds (in its `addons`, so mitmproxy calls these hooks after the addon's own). In
auto and record a conversation goes upstream and is recorded when it ends cleanly (a conversation
cannot be matched before it starts: its first client message comes after the handshake); in replay
the upgrade goes to the local answerer (`realtime_answerer.py`) and never upstream. Each
conversation leaves one call-log row and one console line, like an HTTP call.

Bounded like an HTTP body: a message over `semula_realtime_max_message_mb` closes its connection as
its first frame header arrives (`realtime_limits.py`); a conversation over
`semula_realtime_max_session_mb` (or the loader's file cap) or `fileformat.MAX_MESSAGES` stops being
recorded, with one log line, and goes on being relayed. Hooks here only keep a message's bytes (mitmproxy
keeps only the last): decoding, redaction and the file are built on a thread when the conversation ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from mitmproxy import http
from mitmproxy.websocket import WebSocketMessage
from wsproto.frame_protocol import Opcode

from semula.calllog.schema import CallRow
from semula.core.modes import Mode
from semula.core.redact import redact_text
from semula.proxy import realtime_limits
from semula.proxy.realtime_limits import MB, Cap
from semula.providers import host_matches
from semula.proxy.caller import caller_of
from semula.proxy.parts import ProxyParts
from semula.proxy.console import terminal_safe
from semula.proxy.realtime_answerer import TOKEN_HEADER, Answerer, Played
from semula.realtime import folder
from semula.realtime.conversation import (
    CLEAN_CLOSE_CODES, PROVIDER, Conversation, Message, ReplaySession, conversation_of, realtime_path, url_key,
)
from semula.realtime.fileformat import MAX_MESSAGES
from semula.recordings.files import max_file_bytes
from semula.recordings.format import RecordingFileError

log = logging.getLogger("semula")

# Credentials a replayed upgrade never carries to the answerer (the recording never holds them either).
SECRET_HEADERS = ("authorization", "api-key", "openai-organization", "openai-project")
INSECURE_KEY_PROTOCOL = "openai-insecure-api-key."


def is_upgrade(request: http.Request) -> bool:
    return request.headers.get("upgrade", "").lower() == "websocket" and realtime_path(request.path)


@dataclass
class Live:
    """One Realtime connection in flight."""

    project: str
    host: str
    path: str  # path and query as the client sent them (may hold a key: never logged as is)
    started_at: datetime
    record: bool = False
    start: float = 0.0  # when the handshake finished (time.time(), like mitmproxy's message timestamps)
    # (from client, ms after the handshake, text?, bytes): decoded and redacted only when recorded, off the loop
    frames: list[tuple[bool, float, bool, bytes]] = field(default_factory=list)
    size: int = 0  # bytes in `frames`
    unrecorded: str | None = None  # why recording stopped (the conversation went on)
    played: Played | None = None
    token: str = ""  # the answerer's session for it (replay)
    connections: tuple[str, ...] = ()  # mitmproxy connection ids under the message cap


class Realtime:
    """The hooks; `parts` are the proxy's shared parts (its mode, settings and logs)."""

    def __init__(self, parts: ProxyParts) -> None:
        self.parts = parts
        self.live: dict[str, Live] = {}
        self.answerer = Answerer()
        if not realtime_limits.install():
            log.warning("semula: this mitmproxy has no WebsocketConnection: Realtime messages are capped only "
                        "once complete")

    def done(self) -> None:
        self.answerer.close()
        for live in self.live.values():
            realtime_limits.release(live.connections)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        host = flow.request.pretty_host.lower()  # before map_remote rewrites it
        if not is_upgrade(flow.request) or not host_matches(host, self.parts.settings.hosts):
            return
        parts = self.parts  # the project header, proxy user and per-test scope, as for an HTTP call
        caller = caller_of(flow, parts.conn_projects, parts.conn_tags, parts.tests, parts.settings.default_project)
        self.live[flow.id] = Live(caller.project, host, flow.request.path, datetime.now(UTC))
        # No permessage-deflate: a small compressed frame could inflate past the message cap in one step.
        flow.request.headers.pop("sec-websocket-extensions", None)

    async def request(self, flow: http.HTTPFlow) -> None:
        live = self.live.get(flow.id)
        if live is None or flow.response is not None:
            self.live.pop(flow.id, None)
            return
        mode = self.parts.mode
        if mode is Mode.REPLAY:
            await self._to_answerer(flow, live)
        else:
            live.record = mode in (Mode.AUTO, Mode.RECORD) and not self.parts.settings.read_only

    async def _to_answerer(self, flow: http.HTTPFlow, live: Live) -> None:
        settings = self.parts.settings
        root = folder.root_of(settings.recordings, settings.data_dir)
        recordings = await asyncio.to_thread(folder.load, root, live.project)
        try:
            port = await asyncio.to_thread(self.answerer.port)
        except OSError as e:  # replay never goes upstream: refuse the upgrade, keep serving
            log.warning("semula: realtime replay refused on %s: %s", live.host, e)
            flow.response = http.Response.make(503, f"semula: {e}\n", {"content-type": "text/plain"})
            self.live.pop(flow.id, None)
            return
        live.token, live.played = self.answerer.expect(ReplaySession.open(recordings, url_key(live.path)))
        request = flow.request
        request.scheme, request.host, request.port = "http", "127.0.0.1", port
        request.path = url_key(live.path)  # no api_key query
        for name in SECRET_HEADERS:
            request.headers.pop(name, None)
        protocols = [p.strip() for p in request.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
        kept = [p for p in protocols if not p.startswith(INSECURE_KEY_PROTOCOL)]
        if kept != protocols:
            request.headers["sec-websocket-protocol"] = ", ".join(kept)
            if not kept:
                del request.headers["sec-websocket-protocol"]
        request.headers[TOKEN_HEADER] = live.token

    def response(self, flow: http.HTTPFlow) -> None:
        """Before mitmproxy starts relaying the upgraded connection: put both of its sides under the message cap."""
        live = self.live.get(flow.id)
        if live is None or flow.websocket is None:
            return
        limit = int(self.parts.settings.realtime_max_message_mb * MB)
        reason = f"semula: message over the {limit / MB:g} MB cap (semula_realtime_max_message_mb)"
        live.connections = (flow.client_conn.id, flow.server_conn.id)
        for side, connection in zip(("client", "server"), live.connections):
            realtime_limits.guard([connection], Cap(limit, reason, partial(self._too_big, live, side, limit=limit)))

    def _too_big(self, live: Live, side: str, size: int, limit: int) -> None:
        live.unrecorded = f"a {side} message over the {limit / MB:g} MB cap"
        live.frames.clear()
        log.warning("semula: realtime connection on %s%s: a %s message of %.1f MB or more is over the %g MB cap "
                    "(semula_realtime_max_message_mb): dropped, and the connection closed (1009)", live.host,
                    url_key(live.path), side, size / MB, limit / MB)

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        if (live := self.live.get(flow.id)) is not None:
            live.start = time.time()

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        live = self.live.get(flow.id)
        if live is None or flow.websocket is None:
            return
        message: WebSocketMessage = flow.websocket.messages[-1]
        del flow.websocket.messages[:-1]  # mitmproxy would keep every message of the conversation
        if not live.record or live.unrecorded is not None:
            return
        live.size += len(message.content)
        limit = min(int(self.parts.settings.realtime_max_session_mb * MB), max_file_bytes())
        if live.size > limit or len(live.frames) >= MAX_MESSAGES:
            live.unrecorded = (f"over the {limit / MB:g} MB a conversation may have (semula_realtime_max_session_mb)"
                               if live.size > limit else f"over {MAX_MESSAGES} messages")
            live.frames.clear()
            log.warning("semula: realtime conversation on %s%s not recorded: %s; it goes on, unrecorded", live.host,
                        url_key(live.path), live.unrecorded)
            return
        at_ms = max(0.0, (message.timestamp - live.start) * 1000)
        live.frames.append((message.from_client, at_ms, message.type == Opcode.TEXT, message.content))

    async def websocket_end(self, flow: http.HTTPFlow) -> None:
        live = self.live.pop(flow.id, None)
        if live is None or flow.websocket is None:
            return
        realtime_limits.release(live.connections)
        code = flow.websocket.close_code
        if live.played is not None:
            await self._replayed(live, live.played, code)
        elif live.record:
            await self._recorded(live, code)
        else:
            self._log(live, "passthrough", "none", code, note=None, recorded=False)

    def error(self, flow: http.HTTPFlow) -> None:
        live = self.live.pop(flow.id, None)
        if live is not None:
            realtime_limits.release(live.connections)
        if live is not None and flow.websocket is None:  # the handshake failed (upstream unreachable…)
            self.answerer.sessions.pop(live.token, None)
            message = redact_text(str(flow.error)) if flow.error else "connection error"
            self._log(live, "miss" if live.played is None else "error", "none", None, note=message, recorded=False)

    async def _replayed(self, live: Live, played: Played, code: int | None) -> None:
        await asyncio.to_thread(played.done.wait, 2)  # the answerer's side of the same close
        if played.miss is not None:
            log.warning("semula: realtime replay miss on %s%s (project %s) after %d client messages: %s", live.host,
                        url_key(live.path), live.project, played.answered, played.miss)
            self._log(live, "miss", "none", code, note=played.miss, recorded=False)
        else:
            chosen = played.session.chosen
            self._log(live, "hit", "exact", code, note=f"{played.answered} client messages answered",
                      recorded=False, identity=chosen.identity if chosen else None)

    async def _recorded(self, live: Live, code: int | None) -> None:
        if live.unrecorded is not None:
            self._log(live, "miss", "none", code, note=f"not recorded: {live.unrecorded}", recorded=False)
            return
        if code not in CLEAN_CLOSE_CODES or not any(frame[0] for frame in live.frames):
            self._log(live, "miss", "none", code, note=f"not recorded: closed with code {code}", recorded=False)
            return
        try:
            conversation = await asyncio.to_thread(self._write, live, code)
        except (OSError, RecordingFileError) as e:
            log.warning("semula: realtime conversation on %s not recorded: %s", live.host, redact_text(str(e)))
            self._log(live, "miss", "none", code, note=f"not recorded: {e}", recorded=False)
            return
        clients = sum(m.from_client for m in conversation.messages)
        self._log(live, "miss", "none", code, note=f"{clients} client messages", recorded=True,
                  identity=conversation.identity)

    def _write(self, live: Live, code: int | None) -> Conversation:
        """On a thread: the messages decoded and redacted into the conversation, and its file written."""
        messages = [Message(client, at_ms, text=content.decode(errors="replace")) if text else
                    Message(client, at_ms, data=content) for client, at_ms, text, content in live.frames]
        live.frames.clear()
        conversation = conversation_of(live.project, live.host, live.path, messages, code,
                                       live.started_at.replace(tzinfo=None).isoformat(timespec="seconds"))
        settings = self.parts.settings
        folder.write(folder.root_of(settings.recordings, settings.data_dir), conversation)
        return conversation

    def _log(self, live: Live, decision: str, tier: str, code: int | None, *, note: str | None,
             recorded: bool, identity: str | None = None) -> None:
        """One call-log row and console line; `identity` names the recording used or written (for `unused`)."""
        parts, path, provider = self.parts, live.path.split("?", 1)[0], PROVIDER
        model = dict(p.split("=", 1) for p in url_key(live.path).partition("?")[2].split("&") if "=" in p).get("model")
        row = CallRow(ts=live.started_at, project=live.project, provider=provider, host=live.host,
                      method="GET", path=redact_text(path), model=model, mode=parts.mode.value,
                      decision=decision, tier=tier, streamed=True, status=101 if code is not None else None,
                      recorded=recorded,
                      error=redact_text(note) if note and decision == "miss" and not recorded else None,
                      fast=False, run_id=parts.run_id, request_fp=identity)
        if parts.calls is not None:
            parts.calls.append(row)
        if parts.settings.console_calls:
            extra = (" · recorded" if recorded else "") + (f" · {redact_text(note)}" if note else "")
            print(terminal_safe(f"semula: {live.project} {provider} GET {live.host}{path} → {decision}"
                                f"{' ' + tier if tier != 'none' else ''}{extra} · close {code}"), flush=True)
