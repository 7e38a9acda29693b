from __future__ import annotations

import pytest

from semula.providers.sse import FrameBuffer, SSEEvent, parse_frame, split_frames

OPENAI_STREAM = (
    b'data: {"id":"chatcmpl-1","choices":[{"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"id":"chatcmpl-1","choices":[{"delta":{"content":"lo"}}]}\n\n'
    b"data: [DONE]\n\n"
)
ANTHROPIC_STREAM_CRLF = (
    b'event: message_start\r\ndata: {"type":"message_start"}\r\n\r\n'
    b": keep-alive comment\r\n\r\n"
    b'event: content_block_delta\r\ndata: {"type":"content_block_delta",\r\ndata: "x":1}\r\n\r\n'
    b'event: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n'
)
CR_ONLY_STREAM = b"data: a\r\rdata: b\rdata: c\r\r"


@pytest.mark.parametrize(
    ("body", "frames"),
    [
        (b"data: a\n\ndata: b\n\n", [b"data: a", b"data: b"]),
        (b"data: a\r\n\r\ndata: b\r\n\r\n", [b"data: a", b"data: b"]),
        (b"data: a\r\rdata: b\r\r", [b"data: a", b"data: b"]),
        (b"event: x\ndata: a\n\n", [b"event: x\ndata: a"]),
        (b"event: x\r\ndata: a\r\n\r\n", [b"event: x\ndata: a"]),
        (b"\n\n\ndata: a\n\n\n\n\ndata: b\n\n", [b"data: a", b"data: b"]),  # empty frames dropped
        (b"data: a\n\ndata: b", [b"data: a", b"data: b"]),  # last frame unterminated
        (b"data: a\n\n\n", [b"data: a"]),
        (b"", []),
        (b"\n\n", []),
        (CR_ONLY_STREAM, [b"data: a", b"data: b\ndata: c"]),
    ],
)
def test_split_frames(body: bytes, frames: list[bytes]) -> None:
    assert split_frames(body) == frames


@pytest.mark.parametrize("body", [OPENAI_STREAM, ANTHROPIC_STREAM_CRLF, CR_ONLY_STREAM, b"data: a\r\n\r\ndata: b"])
def test_frame_buffer_gives_the_same_frames_wherever_a_chunk_is_cut(body: bytes) -> None:
    expected = split_frames(body)
    for cut in range(len(body) + 1):
        buffer = FrameBuffer()
        frames = buffer.feed(body[:cut]) + buffer.feed(body[cut:]) + buffer.finish()
        assert frames == expected, f"cut at byte {cut}"


@pytest.mark.parametrize("body", [OPENAI_STREAM, ANTHROPIC_STREAM_CRLF, CR_ONLY_STREAM])
def test_frame_buffer_byte_by_byte(body: bytes) -> None:
    buffer = FrameBuffer()
    frames: list[bytes] = []
    for i in range(len(body)):
        frames += buffer.feed(body[i : i + 1])
    assert frames + buffer.finish() == split_frames(body)


def test_frame_buffer_returns_frames_as_soon_as_they_complete() -> None:
    buffer = FrameBuffer()
    assert buffer.feed(b"data: a\n") == []
    assert buffer.feed(b"\ndata: b") == [b"data: a"]
    assert buffer.finish() == [b"data: b"]
    assert buffer.finish() == []


def test_a_chunk_ending_in_carriage_return_waits_for_the_next_byte() -> None:
    buffer = FrameBuffer()
    # "\r\r" could be a blank line or "\r" + the start of "\r\n": wait and see.
    assert buffer.feed(b"data: a\r\r") == []
    assert buffer.feed(b"\ndata: b\r") == [b"data: a"]
    assert buffer.finish() == [b"data: b"]


@pytest.mark.parametrize(
    ("frame", "event"),
    [
        (b"data: hello", SSEEvent(None, "hello")),
        (b"data:hello", SSEEvent(None, "hello")),
        (b"data:  two spaces", SSEEvent(None, " two spaces")),
        (b"event: message_stop\ndata: {}", SSEEvent("message_stop", "{}")),
        (b"data: line 1\ndata: line 2", SSEEvent(None, "line 1\nline 2")),
        (b": comment\ndata: x", SSEEvent(None, "x")),
        (b"id: 7\nretry: 100\ndata: x", SSEEvent(None, "x")),
        (b"event: ping", SSEEvent("ping", "")),
        (b"data", SSEEvent(None, "")),
        (b"event: a\r\ndata: b", SSEEvent("a", "b")),
        ("data: caf\u00e9".encode(), SSEEvent(None, "caf\u00e9")),
    ],
)
def test_parse_frame(frame: bytes, event: SSEEvent) -> None:
    assert parse_frame(frame) == event

