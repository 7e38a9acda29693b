"""A fake OpenAI Realtime server over TLS WebSockets, speaking the event protocol as the real one does.

On connect it sends `session.created`; `session.update` → `session.updated`;
`conversation.item.create` → `conversation.item.created`; `input_audio_buffer.append` is buffered
and `input_audio_buffer.commit` → `input_audio_buffer.committed`; `response.create` →
`response.created`, the answer's deltas (`response.output_text.delta`, or
`response.output_audio.delta` with 24 kHz PCM16 and its transcript when the session's output is
audio), `response.output_text.done`/`response.output_audio.done`, `response.done`. Event and item
ids are random on every run, like the real server's. The answer text is a function of the last user
text, so a test can tell turns apart. It counts connections (`connections`) for "0 reached the fake".

Run in a test: the `fake_realtime` fixture (tests/conftest.py), or `server = FakeRealtime.start(cert_dir)`,
then `server.port`, `server.route(provider_port)`, `server.connections`, `server.stop()`. `converse` is a
client's whole text conversation through a proxy.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import secrets
import ssl
import struct
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from pathlib import Path
from typing import Any

from e2e_helpers import websocket_ssl_context
from fakeprovider import ensure_certs

AUDIO_CHUNK_SAMPLES = 2400  # 100 ms at 24 kHz


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


def _realtime_protocol(connection: Any, offered: Any) -> str | None:
    return "realtime" if "realtime" in offered else None  # what OpenAI answers to a browser's offer


def converse(proxy_url: str, ca_path: Path | str, key: str, turns: tuple[str, ...], azure_host: str | None = None,
             watch: Callable[[], AbstractContextManager[list[str]]] | None = None) -> list[bytes]:
    """The server events the `openai` SDK's realtime client received, raw, over a whole conversation of text
    turns that the client closes itself. The key goes as a bearer header, an `api_key` query and a subprotocol.
    `watch` runs around the upgrade; what it collected (`e2e_helpers.dumped_if_stalled`) goes into a timeout."""
    import openai

    client = (openai.AzureOpenAI(api_key=key, api_version="2025-04-01-preview", azure_endpoint=f"https://{azure_host}",
                                 max_retries=0) if azure_host else
              openai.OpenAI(api_key=key, base_url="https://api.openai.com/v1", max_retries=0))
    received: list[bytes] = []
    options: Any = {"proxy": proxy_url, "ssl": websocket_ssl_context(ca_path), "open_timeout": 20,
                    "subprotocols": ["realtime", f"openai-insecure-api-key.{key}"]}
    with ExitStack() as stack:
        with (watch or (lambda: nullcontext([])))() as notes:
            try:
                connection = stack.enter_context(client.realtime.connect(
                    model="gpt-realtime", extra_query={"api_key": key}, websocket_connection_options=options))
            except TimeoutError as e:
                raise TimeoutError(f"{e}\n{''.join(notes)}") from e
        received.append(connection.recv_bytes())  # session.created
        connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        for text in turns:
            connection.conversation.item.create(item={"type": "message", "role": "user",
                                                      "content": [{"type": "input_text", "text": text}]})
            connection.response.create()
            while True:
                received.append(connection.recv_bytes())
                if json.loads(received[-1])["type"] == "response.done":
                    break
    return received


def synthetic_pcm(seconds: float, rate: int = 24000) -> bytes:
    """A 440 Hz tone as 16-bit little-endian mono PCM."""
    count = int(seconds * rate)
    return struct.pack(f"<{count}h", *(int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(count)))


class FakeRealtime:
    def __init__(self, cert_dir: Path, audio_seconds: float = 0.5) -> None:
        certs = ensure_certs(cert_dir)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certs.cert, certs.key)
        self.audio_seconds = audio_seconds
        self.connections = 0
        self.paths: list[str] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-realtime")

    def route(self, provider_port: int) -> str:
        """The mitmproxy option that sends the fake provider's realtime path (where the tests' proxies send the
        provider hosts) on to this server."""
        return f"map_remote=|//127.0.0.1:{provider_port}/v1/realtime|//127.0.0.1:{self.port}/v1/realtime"

    @classmethod
    def start(cls, cert_dir: Path, **kwargs: Any) -> FakeRealtime:
        server = cls(cert_dir, **kwargs)
        server._thread.start()
        if not server._ready.wait(10):
            raise RuntimeError("fake realtime server did not start")
        return server

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        from websockets.asyncio.server import serve

        self._stop = asyncio.Event()
        async with serve(self._handle, "127.0.0.1", 0, ssl=self.context, max_size=None,
                         select_subprotocol=_realtime_protocol) as server:
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await self._stop.wait()

    async def _handle(self, ws: Any) -> None:
        self.connections += 1
        self.paths.append(ws.request.path)
        session: dict[str, Any] = {"id": _id("sess"), "object": "realtime.session", "type": "realtime",
                                   "model": "gpt-realtime", "output_modalities": ["text"], "instructions": ""}
        items: list[dict[str, Any]] = []
        audio = bytearray()

        async def send(event: dict[str, Any]) -> None:
            await ws.send(json.dumps({"event_id": _id("event"), **event}))

        await send({"type": "session.created", "session": session})
        async for raw in ws:
            try:
                event = json.loads(raw)
            except ValueError:
                await send({"type": "error", "error": {"type": "invalid_request_error", "message": "not JSON"}})
                continue
            kind = event.get("type")
            if kind == "session.update":
                session.update({k: v for k, v in (event.get("session") or {}).items() if k != "type"})
                await send({"type": "session.updated", "session": session})
            elif kind == "conversation.item.create":
                item = {**event.get("item", {}), "id": _id("item"), "status": "completed"}
                previous = items[-1]["id"] if items else None
                items.append(item)
                await send({"type": "conversation.item.created", "previous_item_id": previous, "item": item})
            elif kind == "input_audio_buffer.append":
                audio += base64.b64decode(event.get("audio", ""))
            elif kind == "input_audio_buffer.commit":
                item = {"id": _id("item"), "type": "message", "role": "user", "status": "completed",
                        "content": [{"type": "input_audio", "transcript": f"{len(audio)} bytes of audio"}]}
                items.append(item)
                audio.clear()
                await send({"type": "input_audio_buffer.committed", "previous_item_id": None, "item_id": item["id"]})
            elif kind == "response.create":
                await self._respond(send, session, items)
            else:
                await send({"type": "error", "error": {"type": "invalid_request_error",
                                                        "message": f"unknown event {kind!r}"}})

    async def _respond(self, send: Any, session: dict[str, Any], items: list[dict[str, Any]]) -> None:
        said = ""
        for item in reversed(items):
            texts = [c.get("text") or c.get("transcript") for c in item.get("content", []) if isinstance(c, dict)]
            if item.get("role") == "user" and any(texts):
                said = " ".join(t for t in texts if t)
                break
        answer = f"You said: {said}. That is all."
        response_id, item_id = _id("resp"), _id("item")
        response = {"id": response_id, "object": "realtime.response", "status": "in_progress", "output": [],
                    "conversation_id": "conv_fake", "output_modalities": session["output_modalities"]}
        await send({"type": "response.created", "response": response})
        item = {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                "status": "in_progress", "content": []}
        await send({"type": "response.output_item.added", "response_id": response_id, "output_index": 0,
                    "item": item})
        where = {"response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0}
        if "audio" in session["output_modalities"]:
            pcm = synthetic_pcm(self.audio_seconds)
            for start in range(0, len(pcm), AUDIO_CHUNK_SAMPLES * 2):
                chunk = base64.b64encode(pcm[start:start + AUDIO_CHUNK_SAMPLES * 2]).decode()
                await send({"type": "response.output_audio.delta", **where, "delta": chunk})
            await send({"type": "response.output_audio.done", **where})
            await send({"type": "response.output_audio_transcript.done", **where, "transcript": answer})
            content = {"type": "output_audio", "transcript": answer}
        else:
            for word in answer.split(" "):
                await send({"type": "response.output_text.delta", **where, "delta": word + " "})
            await send({"type": "response.output_text.done", **where, "text": answer})
            content = {"type": "output_text", "text": answer}
        done_item = {**item, "status": "completed", "content": [content]}
        items.append(done_item)
        await send({"type": "response.output_item.done", "response_id": response_id, "output_index": 0,
                    "item": done_item})
        await send({"type": "response.done", "response": {
            **response, "status": "completed", "output": [done_item],
            "usage": {"total_tokens": 20, "input_tokens": 8, "output_tokens": 12}}})
