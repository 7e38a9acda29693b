"""OpenAI's audio endpoints for the fake provider: a transcription upload and a speech answer.

`POST /v1/audio/transcriptions` takes a multipart form (`file`, `model`, …) and answers
`{"text": …}` naming the file's size and hash, so another file gets another answer; with `stream=true`
it streams `transcript.text.delta` events and ends with `transcript.text.done` (no `[DONE]`).
`POST /v1/audio/speech` takes JSON (`model`, `input`, `voice`) and answers binary audio
(`audio/mpeg`, sent chunked as OpenAI streams it): an ID3 tag, then MPEG frame headers and bytes
of every value, different for every call (the call counter is in them), so a replayed answer
is told from a fresh one by its bytes.

Registered into the fake's ROUTES by `routes(fakeprovider_module)` (see tests/support/fake_vertex.py).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

MP3_FRAME_HEADER = b"\xff\xfb\x90\x64"  # MPEG-1 layer III, 128 kbit/s, 44.1 kHz


def speech_bytes(text: str, count: int) -> bytes:
    seed = hashlib.sha256(f"{count}:{text}".encode()).digest()
    frame = MP3_FRAME_HEADER + seed + bytes(range(256)) + b"\r\n\x00"
    return b"ID3\x04\x00\x00\x00\x00\x00\x00" + frame * 8


def routes(fake: Any) -> list[Any]:
    def transcription(call: Any) -> Any:
        fields = fake.form_fields(call)
        if "file" not in fields or "model" not in fields:
            return fake.error_reply("openai", 400, "Missing required parameter: 'file' and 'model' are required.")
        _, data = fields["file"]
        digest = hashlib.sha256(data).hexdigest()[:12]
        text = f"fake transcript #{call.count} of {len(data)} bytes ({digest})"
        if fields.get("stream", (None, b""))[1] != b"true":
            return fake.Reply(200, {"text": text, "usage": {"type": "duration", "seconds": 1}})
        # stream=true (gpt-4o-transcribe): SSE deltas, then transcript.text.done with the usage; no [DONE]
        usage = {"type": "tokens", "input_tokens": 1 + len(data) // 1000, "output_tokens": fake.word_count(text),
                 "total_tokens": 1 + len(data) // 1000 + fake.word_count(text)}
        events = [{"type": "transcript.text.delta", "delta": d, "logprobs": None} for d in fake.deltas(text)]
        events.append({"type": "transcript.text.done", "text": text, "logprobs": None, "usage": usage})
        return fake.StreamReply([fake.sse(e) for e in events], keep_on_break=1)

    def speech(call: Any) -> Any:
        text = call.body.get("input")
        if not isinstance(text, str) or not call.body.get("voice"):
            return fake.error_reply("openai", 400, "Missing required parameter: 'input' and 'voice' are required.")
        audio = speech_bytes(text, call.count)
        pieces = [audio[i:i + 1024] for i in range(0, len(audio), 1024)]
        return fake.StreamReply(pieces, content_type="audio/mpeg", keep_on_break=0)

    return [
        fake.Route("openai", re.compile(r"/v1/audio/transcriptions"), transcription, raw_body=True),
        fake.Route("openai", re.compile(r"/v1/audio/speech"), speech),
    ]
