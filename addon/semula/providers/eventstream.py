"""AWS event-stream framing (``application/vnd.amazon.eventstream``): Bedrock's streamed answers.

A stream is a run of binary messages. Each is a 12-byte prelude (total length, headers length,
both big-endian uint32, then the CRC32 of those 8 bytes), the headers (name length uint8, the
UTF-8 name, a type byte, the value), the payload, and the CRC32 of everything before it. A
recording stores the messages one by one and a replay must send them back byte for byte, so
parsing keeps everything the bytes say (header order, duplicate names, each value's type) and
:func:`encode` gives back the same bytes. Network chunks cut messages anywhere:
:class:`MessageBuffer` re-frames incrementally, like ``sse.FrameBuffer`` does for SSE.

Every problem in the bytes (a bad CRC, a length past the limits, an unknown header type, a name
that is not UTF-8) raises :class:`EventStreamError` and nothing else. Pure: bytes in, values out.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONTENT_TYPE",
    "HEADER_TYPES",
    "EventStreamError",
    "Header",
    "Message",
    "MessageBuffer",
    "encode",
    "event_type",
    "map_payloads",
    "parse_message",
    "parse_stream",
    "split_frames",
]

CONTENT_TYPE = "application/vnd.amazon.eventstream"
PRELUDE_BYTES = 12
CRC_BYTES = 4
# botocore's limits: a message larger than these is refused by the SDK, so it is refused here too.
MAX_HEADERS_BYTES = 128 * 1024
MAX_PAYLOAD_BYTES = 24 * 1024 * 1024
MAX_MESSAGE_BYTES = PRELUDE_BYTES + MAX_HEADERS_BYTES + MAX_PAYLOAD_BYTES + CRC_BYTES

# Type byte -> name, in the spec's order. The two booleans carry their value in the type byte.
HEADER_TYPES: dict[int, str] = {
    0: "true", 1: "false", 2: "byte", 3: "short", 4: "integer", 5: "long",
    6: "bytes", 7: "string", 8: "timestamp", 9: "uuid",
}
_TYPE_BYTES = {name: code for code, name in HEADER_TYPES.items()}
_INTS = {"byte": ">b", "short": ">h", "integer": ">i", "long": ">q", "timestamp": ">q"}
_PRELUDE = struct.Struct(">II")
_CRC = struct.Struct(">I")


class EventStreamError(ValueError):
    """Bytes that are not a valid event-stream message; the message says what is wrong."""


@dataclass(frozen=True)
class Header:
    """One header: ``type`` is a name of :data:`HEADER_TYPES`; ``value`` is a bool, an int (a
    timestamp in milliseconds since the epoch), bytes, a str, or a uuid's 16 bytes as hex."""

    name: str
    type: str
    value: bool | int | bytes | str


@dataclass(frozen=True)
class Message:
    headers: tuple[Header, ...]
    payload: bytes

    def header(self, name: str) -> Any:
        """The first header of this name's value, else None."""
        return next((h.value for h in self.headers if h.name == name), None)


def _crc(data: bytes | memoryview, start: int = 0) -> int:
    return zlib.crc32(data, start) & 0xFFFFFFFF


def _take(data: memoryview, offset: int, size: int, what: str) -> tuple[memoryview, int]:
    if offset + size > len(data):
        raise EventStreamError(f"header section ends inside {what}")
    return data[offset:offset + size], offset + size


def _text(raw: memoryview, what: str) -> str:
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise EventStreamError(f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None


def _parse_headers(data: memoryview) -> tuple[Header, ...]:
    headers: list[Header] = []
    offset = 0
    while offset < len(data):
        name_len = data[offset]
        if name_len == 0:
            raise EventStreamError("a header has an empty name")
        raw_name, offset = _take(data, offset + 1, name_len, "a header name")
        name = _text(raw_name, "a header name")
        type_raw, offset = _take(data, offset, 1, f"header {name!r}")
        kind = HEADER_TYPES.get(type_raw[0])
        if kind is None:
            raise EventStreamError(f"header {name!r} has unknown value type {type_raw[0]}")
        value: bool | int | bytes | str
        if kind in ("true", "false"):
            value = kind == "true"
        elif kind in _INTS:
            fmt = _INTS[kind]
            raw, offset = _take(data, offset, struct.calcsize(fmt), f"header {name!r}")
            value = struct.unpack(fmt, raw)[0]
        elif kind == "uuid":
            raw, offset = _take(data, offset, 16, f"header {name!r}")
            value = bytes(raw).hex()
        else:  # bytes, string: a uint16 length first
            size_raw, offset = _take(data, offset, 2, f"header {name!r}")
            raw, offset = _take(data, offset, struct.unpack(">H", size_raw)[0], f"header {name!r}")
            value = _text(raw, f"header {name!r}") if kind == "string" else bytes(raw)
        headers.append(Header(name, kind, value))
    return tuple(headers)


def _lengths(prelude: bytes | memoryview) -> tuple[int, int]:
    """(total, headers) lengths of a prelude whose CRC is right, within the limits."""
    total, headers_len = _PRELUDE.unpack(prelude[:8])
    if _crc(prelude[:8]) != _CRC.unpack(prelude[8:12])[0]:
        raise EventStreamError("prelude CRC does not match: the message is damaged")
    if headers_len > MAX_HEADERS_BYTES:
        raise EventStreamError(f"headers length {headers_len} is over the limit of {MAX_HEADERS_BYTES}")
    payload_len = total - PRELUDE_BYTES - headers_len - CRC_BYTES
    if payload_len < 0:
        raise EventStreamError(f"total length {total} is too short for {headers_len} bytes of headers")
    if payload_len > MAX_PAYLOAD_BYTES:
        raise EventStreamError(f"payload length {payload_len} is over the limit of {MAX_PAYLOAD_BYTES}")
    return total, headers_len


def parse_message(data: bytes) -> Message:
    """One whole message (exactly its bytes), both CRCs checked."""
    if len(data) < PRELUDE_BYTES + CRC_BYTES:
        raise EventStreamError(f"a message is at least {PRELUDE_BYTES + CRC_BYTES} bytes, not {len(data)}")
    total, headers_len = _lengths(data[:PRELUDE_BYTES])
    if total != len(data):
        raise EventStreamError(f"the prelude says {total} bytes, the message has {len(data)}")
    if _crc(data[:-CRC_BYTES]) != _CRC.unpack(data[-CRC_BYTES:])[0]:
        raise EventStreamError("message CRC does not match: the message is damaged")
    view = memoryview(data)
    headers = _parse_headers(view[PRELUDE_BYTES:PRELUDE_BYTES + headers_len])
    return Message(headers, bytes(view[PRELUDE_BYTES + headers_len:-CRC_BYTES]))


def _encode_header(header: Header) -> bytes:
    name = header.name.encode("utf-8")
    if not 1 <= len(name) <= 255:
        raise EventStreamError(f"header name {header.name[:40]!r} is not 1 to 255 bytes")
    code = _TYPE_BYTES.get(header.type)
    if code is None:
        raise EventStreamError(f"header {header.name!r}: type {header.type!r:.40} is not one of {', '.join(_TYPE_BYTES)}")
    head = bytes([len(name)]) + name + bytes([code])
    value = header.value
    try:
        if header.type in ("true", "false"):
            if value is not (header.type == "true"):
                raise EventStreamError(f"header {header.name!r}: a {header.type} header has the value {header.type}")
            return head
        if header.type in _INTS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise EventStreamError(f"header {header.name!r}: a {header.type} is a whole number")
            return head + struct.pack(_INTS[header.type], value)
        if header.type == "uuid":
            if not isinstance(value, str):
                raise EventStreamError(f"header {header.name!r}: a uuid is 32 hex digits")
            return head + uuid.UUID(hex=value).bytes
    except (struct.error, ValueError) as e:
        if isinstance(e, EventStreamError):
            raise
        raise EventStreamError(f"header {header.name!r}: {header.type} value {value!r:.40} does not fit: {e}") from None
    if header.type == "string" and isinstance(value, str):
        raw = value.encode("utf-8")
    elif header.type == "bytes" and isinstance(value, bytes):
        raw = value
    else:
        raise EventStreamError(f"header {header.name!r}: a {header.type} value is not {header.type}")
    if len(raw) > 0xFFFF:
        raise EventStreamError(f"header {header.name!r}: a value is at most 65535 bytes, not {len(raw)}")
    return head + struct.pack(">H", len(raw)) + raw


def encode(message: Message) -> bytes:
    """The message's bytes, both CRCs computed: ``encode(parse_message(b)) == b``."""
    headers = b"".join(_encode_header(h) for h in message.headers)
    if len(headers) > MAX_HEADERS_BYTES:
        raise EventStreamError(f"headers are {len(headers)} bytes, over the limit of {MAX_HEADERS_BYTES}")
    if len(message.payload) > MAX_PAYLOAD_BYTES:
        raise EventStreamError(f"payload is {len(message.payload)} bytes, over the limit of {MAX_PAYLOAD_BYTES}")
    total = PRELUDE_BYTES + len(headers) + len(message.payload) + CRC_BYTES
    prelude = _PRELUDE.pack(total, len(headers))
    prelude += _CRC.pack(_crc(prelude))
    body = prelude + headers + message.payload
    return body + _CRC.pack(_crc(body))


class MessageBuffer:
    """Turns a chunked event-stream byte stream back into whole messages (their bytes)."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._need = 0  # the current message's total length, once its prelude is in

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add a chunk; return the messages it completed. A damaged prelude raises EventStreamError."""
        self._pending += chunk
        out: list[bytes] = []
        while True:
            if not self._need:
                if len(self._pending) < PRELUDE_BYTES:
                    return out
                self._need, _ = _lengths(bytes(self._pending[:PRELUDE_BYTES]))
            if len(self._pending) < self._need:
                return out
            out.append(bytes(self._pending[:self._need]))
            del self._pending[:self._need]
            self._need = 0

    @property
    def pending(self) -> int:
        """Bytes held that do not make a whole message yet (a cut stream's tail)."""
        return len(self._pending)


def parse_stream(data: bytes) -> list[Message]:
    """Every message of a whole stream; a damaged one or a cut tail raises EventStreamError."""
    buffer = MessageBuffer()
    frames = buffer.feed(data)
    if buffer.pending:
        raise EventStreamError(f"the stream ends inside a message ({buffer.pending} bytes left over)")
    return [parse_message(frame) for frame in frames]


def split_frames(data: bytes) -> list[bytes]:
    """The whole, valid messages at the start of a (possibly cut or damaged) stream: what the proxy
    captured, for the adapter to see whether the terminal event arrived. Never raises."""
    frames: list[bytes] = []
    offset = 0
    while len(data) - offset >= PRELUDE_BYTES:
        try:
            total, _ = _lengths(data[offset:offset + PRELUDE_BYTES])
            frame = data[offset:offset + total]
            parse_message(frame)
        except EventStreamError:
            break
        frames.append(frame)
        offset += total
    return frames


def map_payloads(data: bytes, change: Callable[[bytes], bytes]) -> bytes | None:
    """The stream with each message's payload changed (redacted) and its lengths and CRCs
    recomputed, or None when `data` is not a whole, valid stream."""
    try:
        messages = parse_stream(data)
    except EventStreamError:
        return None
    return b"".join(encode(Message(m.headers, change(m.payload))) for m in messages) if messages else None


def event_type(message: Message) -> str | None:
    """``:event-type`` of an event, ``:exception-type`` of an exception, else None."""
    kind = message.header(":message-type")
    name = message.header(":exception-type" if kind == "exception" else ":event-type")
    return name if isinstance(name, str) else None
