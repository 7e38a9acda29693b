"""The local answerer of replayed Realtime connections: a plain WebSocket server on 127.0.0.1.

mitmproxy 12's hooks can answer a WebSocket handshake and inject messages, but cannot send a close
frame of their own, and crash on the client's close when no server connection was ever opened. So in
replay the `request` hook points the upgrade at this server (in mitmproxy's own loop, port chosen by
the OS) with a one-use token naming the session; mitmproxy relays both ways as for any server, and
this server plays the recording and closes with `MISS_CLOSE_CODE` and a reason on a miss. Nothing
here reaches the network.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from semula.core.conversation import MISS_CLOSE_CODE, Message, ReplaySession, close_reason

log = logging.getLogger("semula")
_quiet = logging.getLogger("semula.realtime.answerer")  # websockets logs each connection at INFO
_quiet.setLevel(logging.WARNING)

TOKEN_HEADER = "x-semula-realtime-session"


@dataclass
class Played:
    """What one replayed connection did: the client messages answered, and the miss that ended it."""

    session: ReplaySession
    answered: int = 0
    miss: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Answerer:
    """Started on the first replayed connection, on its own thread and loop (so answering and mitmproxy's
    relaying use both cores); `expect` hands out the token a connection brings."""

    def __init__(self) -> None:
        self.sessions: dict[str, Played] = {}
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._port: int | None = None
        self._problem = ""
        self._starting = threading.Lock()

    def port(self) -> int:
        """The answerer's port, starting it the first time (raises OSError when it cannot listen)."""
        with self._starting:
            if self._port is None:
                ready = threading.Event()
                threading.Thread(target=self._run, args=(ready,), daemon=True, name="semula-realtime").start()
                ready.wait(10)
                if self._port is None:
                    raise OSError(f"the Realtime answerer did not start: {self._problem or 'timed out'}")
        return self._port

    def _run(self, ready: threading.Event) -> None:
        from websockets.asyncio.server import serve

        async def start() -> Any:
            return await serve(self._handle, "127.0.0.1", 0, max_size=None, compression=None, ping_interval=None,
                               server_header=None, logger=_quiet, select_subprotocol=_realtime_protocol)

        loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(start())
            self._loop, self._port = loop, self._server.sockets[0].getsockname()[1]
        except Exception as e:  # noqa: BLE001 - reported by `port()` to the caller, which fails open
            self._problem = f"{type(e).__name__}: {e}"
            return
        finally:
            ready.set()
        loop.run_forever()

    def expect(self, session: ReplaySession) -> tuple[str, Played]:
        token = secrets.token_urlsafe(16)
        played = self.sessions[token] = Played(session)
        return token, played

    def close(self) -> None:
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._shut_down(), self._loop)

    async def _shut_down(self) -> None:
        """Close the server and its connections (their close handshakes awaited, a few seconds at most), then
        end the answerer's loop: stopping it at once left the server's closing coroutine never run."""
        try:
            self._server.close()
            await asyncio.wait_for(self._server.wait_closed(), 5)
        except TimeoutError:
            pass
        finally:
            asyncio.get_running_loop().stop()

    async def _handle(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        token = ws.request.headers.get(TOKEN_HEADER, "")
        played = self.sessions.pop(token, None)
        if played is None:
            await ws.close(MISS_CLOSE_CODE, "semula: not a replayed session")
            return
        try:
            if played.session.chosen is None:
                played.miss = "no recording of this URL"
                await ws.close(MISS_CLOSE_CODE, close_reason(played.miss))
                return
            await _send(ws, played.session.greeting())
            async for raw in ws:
                incoming = Message(True, 0.0, text=raw) if isinstance(raw, str) else Message(True, 0.0, data=raw)
                answer = played.session.answer(incoming)
                if answer.miss is not None:
                    played.miss = answer.miss
                    await ws.close(MISS_CLOSE_CODE, close_reason(answer.miss))
                    return
                played.answered += 1
                await _send(ws, answer.messages)
        except ConnectionClosed:
            pass
        finally:
            played.done.set()


def _realtime_protocol(connection: object, offered: Sequence[str]) -> Any:  # websockets' Subprotocol (a str) | None
    return "realtime" if "realtime" in offered else None  # what OpenAI answers to a browser's offer


async def _send(ws: Any, messages: tuple[Message, ...]) -> None:
    for message in messages:
        await ws.send(message.text if message.text is not None else (message.data or b""))
