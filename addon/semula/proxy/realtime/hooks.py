"""The Realtime edge: mitmproxy's WebSocket hooks for `/v1/realtime` and `/openai/realtime` upgrades.

A part the addon holds (in its `addons`, so mitmproxy calls these hooks after the addon's own). A
conversation is a recording of its own kind (`recordings/conversations.py`): in auto and record it goes
upstream and, when it ends cleanly, is recorded through the engine on the store thread, as an HTTP
answer is (store first, then its file in `_realtime/`); a conversation cannot be matched before it
starts (its first client message comes after the handshake). In replay the store thread reads the
project's conversations of that URL and the upgrade goes to the local answerer
(`answerer.py`), never upstream. Each conversation ends in the call log and on the console
through the same code as an HTTP call (`calllog.finish`), its decision made by `core.decision.decide`.

Bounded like an HTTP body: a message over `semula_realtime_max_message_mb` closes its connection as
its first frame header arrives (`limits.py`); a conversation over
`semula_realtime_max_session_mb` (or the loader's file cap) or `conversation_file.MAX_MESSAGES` stops
being recorded, with one log line, and goes on being relayed. Hooks here only keep a message's bytes
(mitmproxy keeps only the last): decoding, redaction and the file are built off the event loop when
the conversation ends, and nothing here reads a file or the store on the loop.
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

from semula.core.cascade import Outcome
from semula.core.conversation import (
    CLEAN_CLOSE_CODES, PROVIDER, Conversation, Message, ReplaySession, conversation_of, model_of, realtime_path,
    url_fingerprint, url_key,
)
from semula.core.decision import Match, decide
from semula.core.modes import Mode
from semula.core.redact import redact_text
from semula.core.tiers import Tier
from semula.providers import host_matches
from semula.proxy.call import calllog
from semula.proxy.realtime import limits
from semula.proxy.call.caller import caller_of
from semula.proxy.call.flowstate import FlowState
from semula.proxy.call.parts import ProxyParts
from semula.proxy.realtime.answerer import TOKEN_HEADER, Answerer, Played
from semula.proxy.realtime.limits import MB, Cap
from semula.recordings.conversation_file import MAX_MESSAGES
from semula.recordings.conversations import new_entry
from semula.recordings.files import max_file_bytes
from semula.recordings.format import RecordingFileError
from semula.store.types import NewEntry

log = logging.getLogger("semula")

# Credentials a replayed upgrade never carries to the answerer (the recording never holds them either).
SECRET_HEADERS = ("authorization", "api-key", "openai-organization", "openai-project")
INSECURE_KEY_PROTOCOL = "openai-insecure-api-key."


def is_upgrade(request: http.Request) -> bool:
    return request.headers.get("upgrade", "").lower() == "websocket" and realtime_path(request.path)


@dataclass
class Live:
    """One Realtime connection in flight; `state` is what the call log reads, as for an HTTP call."""

    state: FlowState
    path: str  # path and query as the client sent them (may hold a key: never logged as is)
    record: bool = False
    start: float = 0.0  # when the handshake finished (time.time(), like mitmproxy's message timestamps)
    # (from client, ms after the handshake, text?, bytes): decoded and redacted only when recorded, off the loop
    frames: list[tuple[bool, float, bool, bytes]] = field(default_factory=list)
    size: int = 0  # bytes in `frames`
    unrecorded: str | None = None  # why recording stopped (the conversation went on)
    played: Played | None = None
    store_problem: str | None = None  # replay: why the store could not be read
    entry_ids: dict[str, int] = field(default_factory=dict)  # replay: each recording's entry, by identity
    token: str = ""  # the answerer's session for it (replay)
    connections: tuple[str, ...] = ()  # mitmproxy connection ids under the message cap

    @property
    def project(self) -> str:
        return self.state.project

    @property
    def host(self) -> str:
        return self.state.host

    @property
    def url(self) -> str:
        return url_key(self.path)


class Realtime:
    """The hooks; `parts` are the proxy's shared parts (its mode, settings, store thread and logs)."""

    def __init__(self, parts: ProxyParts) -> None:
        self.parts = parts
        self.live: dict[str, Live] = {}
        self.answerer = Answerer()
        if not limits.install():
            log.warning("semula: this mitmproxy has no WebsocketConnection: Realtime messages are capped only "
                        "once complete")

    def done(self) -> None:
        self.answerer.close()
        for live in self.live.values():
            limits.release(live.connections)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        host = flow.request.pretty_host.lower()  # before map_remote rewrites it
        if not is_upgrade(flow.request) or not host_matches(host, self.parts.settings.hosts):
            return
        parts = self.parts  # the project header, proxy user and per-test scope, as for an HTTP call
        caller = caller_of(flow, parts.conn_projects, parts.conn_tags, parts.tests, parts.settings.default_project)
        url = url_key(flow.request.path)
        state = FlowState(host=host, project=caller.project, no_cache=caller.no_cache, path=url.partition("?")[0],
                          started_at=datetime.now(UTC), tag=caller.tag, test=caller.test.test, run=caller.test.run,
                          provider=PROVIDER, model=model_of(url))
        self.live[flow.id] = Live(state, flow.request.path)
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

    async def _recordings(self, live: Live) -> list[Conversation]:
        """The project's conversations of this URL, read on the store thread (none: the store is unavailable)."""
        store = self.parts.store
        await store.ensure_open()
        engine = store.engine
        found = None
        if engine is not None:
            found = await store.run("reading Realtime recordings", engine.conversations, live.project, live.url)
        if found is None:
            live.store_problem = store.problem or "the store could not be read"
            return []
        live.entry_ids = {conversation.identity: entry_id for entry_id, conversation in found}
        return [conversation for _, conversation in found]

    async def _to_answerer(self, flow: http.HTTPFlow, live: Live) -> None:
        recordings = await self._recordings(live)
        try:
            port = await asyncio.to_thread(self.answerer.port)
        except OSError as e:  # replay never goes upstream: refuse the upgrade, keep serving
            log.warning("semula: realtime replay refused on %s: %s", live.host, e)
            flow.response = http.Response.make(503, f"semula: {e}\n", {"content-type": "text/plain"})
            self.live.pop(flow.id, None)
            return
        live.token, live.played = self.answerer.expect(ReplaySession.open(recordings, live.url))
        request = flow.request
        request.scheme, request.host, request.port = "http", "127.0.0.1", port
        request.path = live.url  # no api_key query
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
            limits.guard([connection], Cap(limit, reason, partial(self._too_big, live, side, limit=limit)))

    def _too_big(self, live: Live, side: str, size: int, limit: int) -> None:
        live.unrecorded = f"a {side} message over the {limit / MB:g} MB cap"
        live.frames.clear()
        log.warning("semula: realtime connection on %s%s: a %s message of %.1f MB or more is over the %g MB cap "
                    "(semula_realtime_max_message_mb): dropped, and the connection closed (1009)", live.host,
                    live.url, side, size / MB, limit / MB)

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
                        live.url, live.unrecorded)
            return
        at_ms = max(0.0, (message.timestamp - live.start) * 1000)
        live.frames.append((message.from_client, at_ms, message.type == Opcode.TEXT, message.content))

    async def websocket_end(self, flow: http.HTTPFlow) -> None:
        live = self.live.pop(flow.id, None)
        if live is None or flow.websocket is None:
            return
        limits.release(live.connections)
        if live.played is not None:
            await self._replayed(flow, live, live.played)
        elif live.record:
            await self._recorded(flow, live, flow.websocket.close_code)
        else:
            self._finish(flow, live)

    def error(self, flow: http.HTTPFlow) -> None:
        live = self.live.pop(flow.id, None)
        if live is not None:
            limits.release(live.connections)
        if live is not None and flow.websocket is None:  # the handshake failed (upstream unreachable…)
            self.answerer.sessions.pop(live.token, None)
            self._finish(flow, live, error=redact_text(str(flow.error)) if flow.error else "connection error")

    async def _replayed(self, flow: http.HTTPFlow, live: Live, played: Played) -> None:
        await asyncio.to_thread(played.done.wait, 2)  # the answerer's side of the same close
        chosen = played.session.chosen
        if played.miss is not None or chosen is None:
            miss = live.store_problem or played.miss or "no recording of this URL"
            log.warning("semula: realtime replay miss on %s%s (project %s) after %d client messages: %s", live.host,
                        live.url, live.project, played.answered, miss)
            self._finish(flow, live, error=redact_text(miss))
        else:
            self._finish(flow, live, served=chosen)

    async def _recorded(self, flow: http.HTTPFlow, live: Live, code: int | None) -> None:
        if live.unrecorded is not None:
            self._finish(flow, live, error=f"not recorded: {live.unrecorded}")
            return
        if code not in CLEAN_CLOSE_CODES or not any(frame[0] for frame in live.frames):
            self._finish(flow, live, error=f"not recorded: closed with code {code}")
            return
        try:
            new = await asyncio.to_thread(self._entry, live, code)
        except RecordingFileError as e:
            log.warning("semula: realtime conversation on %s not recorded: %s", live.host, redact_text(str(e)))
            self._finish(flow, live, error=f"not recorded: {e}")
            return
        store = self.parts.store
        await store.ensure_open()
        entry_id = None
        if store.engine is not None:
            engine = store.engine
            entry_id = await store.run("recording a Realtime conversation", engine.record, new, write=True)
        if entry_id is None:
            problem = store.write_problem or store.problem or "the store is not open"
            log.warning("semula: realtime conversation on %s not recorded: %s", live.host, problem)
            self._finish(flow, live, new=new, error=f"not recorded: {problem}")
            return
        self._finish(flow, live, new=new, entry_id=entry_id)

    def _entry(self, live: Live, code: int | None) -> NewEntry:
        """Off the loop: the messages decoded and redacted into the conversation, and its store entry
        (`RecordingFileError`: its file would be over the cap, or refused by the loader)."""
        messages = [Message(client, at_ms, text=content.decode(errors="replace")) if text else
                    Message(client, at_ms, data=content) for client, at_ms, text, content in live.frames]
        live.frames.clear()
        started = live.state.started_at or datetime.now(UTC)
        return new_entry(conversation_of(live.project, live.host, live.path, messages, code,
                                         started.replace(tzinfo=None).isoformat(timespec="seconds")))

    def _finish(self, flow: http.HTTPFlow, live: Live, *, served: Conversation | None = None,
                new: NewEntry | None = None, entry_id: int | None = None, error: str | None = None) -> None:
        """The conversation's call-log row and console line, through the HTTP call's `calllog.finish`: its
        decision is the cascade's (a recording of this URL played to the end is an exact hit)."""
        parts, state = self.parts, live.state
        served_id = live.entry_ids.get(served.identity) if served is not None else None
        match = Match(Tier.EXACT, served_id) if served_id is not None else None  # which recording: `unused` reads it
        decision = decide(parts.mode, match, store_problem=live.store_problem if live.played else None)
        identity = served.identity if served is not None else (new.request_fp if new is not None else None)
        state.outcome = Outcome(decision, request_fp=identity, normalised_fp=url_fingerprint(live.url))
        state.streamed, state.error = True, error
        calllog.finish(parts, flow, state, entry_id=entry_id, recorded=new is not None and entry_id is not None)
