"""proxy/realtime/limits and a conversation's entry (`recordings/conversations.new_entry`): a message over
the cap fails at its frame header, and a conversation the loader would refuse is never recorded."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import CloseConnection, TextMessage
from wsproto.frame_protocol import CloseReason

from semula.proxy.realtime.limits import Cap, MessageCap
from semula.core.conversation import Conversation, Message
from semula.recordings.conversations import new_entry
from semula.recordings.format import RecordingFileError


def masked_header(opcode: int, length: int, fin: bool = True) -> bytes:
    """A client frame's header announcing `length` bytes (mask key zero: the payload goes as is)."""
    first = (0x80 if fin else 0) | opcode
    if length < 126:
        return bytes([first, 0x80 | length]) + b"\0\0\0\0"
    if length < 1 << 16:
        return bytes([first, 0x80 | 126]) + struct.pack("!H", length) + b"\0\0\0\0"
    return bytes([first, 0x80 | 127]) + struct.pack("!Q", length) + b"\0\0\0\0"


def server(limit: int) -> tuple[Connection, list[int]]:
    seen: list[int] = []
    return Connection(ConnectionType.SERVER, [MessageCap(Cap(limit, "semula: too big", seen.append))]), seen


def test_a_frame_far_over_the_cap_fails_from_its_header_before_any_payload() -> None:
    connection, seen = server(1000)
    connection.receive_data(masked_header(0x1, 50 * 1024 * 1024))  # 50 MB announced, none sent
    (event,) = list(connection.events())
    assert isinstance(event, CloseConnection) and event.code == CloseReason.MESSAGE_TOO_BIG
    assert event.reason == "semula: too big" and seen == [50 * 1024 * 1024]


def test_a_message_over_the_cap_is_dropped_as_it_arrives_and_fails_at_its_end() -> None:
    connection, seen = server(1000)
    connection.receive_data(masked_header(0x1, 600, fin=False) + b"a" * 600)
    connection.receive_data(masked_header(0x9, 0))  # a ping between fragments counts for nothing
    connection.receive_data(masked_header(0x0, 3000) + b"b" * 2000)
    events = list(connection.events())
    assert seen == [3600] and not any(isinstance(e, CloseConnection) for e in events)
    assert "".join(e.data for e in events if isinstance(e, TextMessage)) == "a" * 600  # nothing past the cap kept
    connection.receive_data(b"b" * 1000)  # the sender is done: now it reads the close
    (event,) = [e for e in connection.events() if isinstance(e, CloseConnection)]
    assert event.code == CloseReason.MESSAGE_TOO_BIG and event.reason == "semula: too big"


def test_messages_under_the_cap_pass_whole() -> None:
    connection, seen = server(1000)
    connection.receive_data(masked_header(0x1, 900) + b"a" * 900 + masked_header(0x1, 900) + b"b" * 900)
    texts = [e for e in connection.events() if isinstance(e, TextMessage)]
    assert "".join(e.data for e in texts) == "a" * 900 + "b" * 900 and seen == []


def conversation(text: str) -> Conversation:
    return Conversation("default", "api.openai.com", "/v1/realtime", (Message(True, 0.0, text=text),), 1000)


def test_a_conversation_over_the_file_cap_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMULA_RECORDING_MAX_MB", "0.01")
    with pytest.raises(RecordingFileError, match="over the 0 MB a recording may have"):
        new_entry(conversation("\x01" * 4000))  # 4 KB sent, 24 KB once JSON escapes it


def test_a_conversation_the_loader_refuses_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(RecordingFileError, match="nested deeper"):
        new_entry(conversation("[" * 200 + "]" * 200))
