"""The AWS event-stream codec: exact round trips, damage found, random bytes never crash it."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semula.providers.eventstream import (
    EventStreamError,
    Header,
    Message,
    MessageBuffer,
    encode,
    event_type,
    parse_message,
    parse_stream,
    split_frames,
)

EVENT = Message((Header(":event-type", "string", "contentBlockDelta"),
                 Header(":content-type", "string", "application/json"),
                 Header(":message-type", "string", "event")), b'{"delta":{"text":"hi"},"p":"abcd"}')

_names = st.text(min_size=1, max_size=20).filter(lambda n: len(n.encode()) <= 255)
_headers = st.one_of(
    st.builds(Header, _names, st.just("true"), st.just(True)),
    st.builds(Header, _names, st.just("false"), st.just(False)),
    st.builds(Header, _names, st.just("byte"), st.integers(-128, 127)),
    st.builds(Header, _names, st.just("short"), st.integers(-2**15, 2**15 - 1)),
    st.builds(Header, _names, st.just("integer"), st.integers(-2**31, 2**31 - 1)),
    st.builds(Header, _names, st.just("long"), st.integers(-2**63, 2**63 - 1)),
    st.builds(Header, _names, st.just("timestamp"), st.integers(-2**63, 2**63 - 1)),
    st.builds(Header, _names, st.just("bytes"), st.binary(max_size=64)),
    st.builds(Header, _names, st.just("string"), st.text(max_size=64)),
    st.builds(Header, _names, st.just("uuid"), st.binary(min_size=16, max_size=16).map(bytes.hex)),
)
_messages = st.builds(Message, st.lists(_headers, max_size=6).map(tuple), st.binary(max_size=200))


@given(_messages)
def test_round_trip_is_exact(message: Message) -> None:
    data = encode(message)
    assert parse_message(data) == message
    assert encode(parse_message(data)) == data


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_the_codec_error(data: bytes) -> None:
    try:
        message = parse_message(data)
    except EventStreamError:
        pass
    else:
        assert encode(message) == data
    split_frames(data)  # never raises
    try:
        parse_stream(data)
    except EventStreamError:
        pass


@given(_messages, st.integers(0, 10_000), st.integers(0, 255))
def test_a_flipped_byte_is_always_found(message: Message, where: int, xor: int) -> None:
    data = bytearray(encode(message))
    data[where % len(data)] ^= xor or 1
    with pytest.raises(EventStreamError):
        parse_message(bytes(data))


def test_botocore_reads_what_we_write() -> None:
    from botocore.eventstream import EventStreamBuffer

    headers = (Header(":event-type", "string", "x"), Header("n", "long", -5), Header("b", "true", True),
               Header("u", "uuid", "00" * 16), Header("t", "timestamp", 1700000000000), Header("raw", "bytes", b"\x00\x01"))
    buffer = EventStreamBuffer()
    buffer.add_data(encode(Message(headers, b"payload")))
    [parsed] = list(buffer)
    assert parsed.payload == b"payload"
    assert parsed.headers[":event-type"] == "x" and parsed.headers["n"] == -5 and parsed.headers["b"] is True


def test_chunks_cut_anywhere_give_the_same_messages() -> None:
    stream = b"".join(encode(Message(EVENT.headers, b'{"n":%d}' % i)) for i in range(5))
    for size in (1, 3, 7, 16, 50, len(stream)):
        buffer, frames = MessageBuffer(), []
        for i in range(0, len(stream), size):
            frames += buffer.feed(stream[i:i + size])
        assert b"".join(frames) == stream and buffer.pending == 0


@pytest.mark.parametrize(("damage", "says"), [
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "message CRC"),
    (lambda b: b[:8] + bytes([b[8] ^ 1]) + b[9:], "prelude CRC"),
    (lambda b: b[:20], "at least|prelude says"),
])
def test_damage_is_named(damage, says) -> None:
    import re

    with pytest.raises(EventStreamError, match=says if "|" not in says else re.compile(says)):
        parse_message(damage(encode(EVENT)))


def _with_prelude(total: int, headers_len: int, rest: bytes = b"") -> bytes:
    prelude = struct.pack(">II", total, headers_len)
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + rest
    return body + struct.pack(">I", zlib.crc32(body))


def test_hostile_lengths_and_types_are_refused() -> None:
    with pytest.raises(EventStreamError, match="over the limit"):
        parse_message(_with_prelude(2**32 - 1, 0))
    with pytest.raises(EventStreamError, match="unknown value type 42"):
        parse_message(_with_prelude(16 + 3, 3, b"\x01a\x2a"))
    with pytest.raises(EventStreamError, match="ends inside"):
        parse_message(_with_prelude(16 + 5, 5, b"\x01a\x07\xff\xff"))
    with pytest.raises(EventStreamError, match="not one of"):
        encode(Message((Header("a", "float", 1),), b""))
    with pytest.raises(EventStreamError, match="does not fit"):
        encode(Message((Header("a", "byte", 300),), b""))


def test_split_frames_keeps_the_whole_valid_head_of_a_cut_stream() -> None:
    one = encode(EVENT)
    assert split_frames(one + one + one[:10]) == [one, one]
    assert split_frames(one + b"\x00" * 16) == [one]
    with pytest.raises(EventStreamError, match="ends inside"):
        parse_stream(one + one[:10])


def test_event_type_reads_events_and_exceptions() -> None:
    assert event_type(EVENT) == "contentBlockDelta"
    exception = Message((Header(":message-type", "string", "exception"),
                         Header(":exception-type", "string", "throttlingException")), b"{}")
    assert event_type(exception) == "throttlingException"
