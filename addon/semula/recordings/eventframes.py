"""AWS event-stream answers in a recording file: one readable object per message, rebuilt byte-exact.

A Bedrock stream is binary (``providers/eventstream.py``). In the file each message is
``{"headers": {...}, "payload": <JSON>}``: the headers as a name -> text object when they are all
text with distinct names (Bedrock's ``:event-type``, ``:content-type``, ``:message-type``), else a
list of ``{"name", "type", "value"}``. An InvokeModelWithResponseStream ``chunk`` carries the
model's JSON as base64 in ``bytes``: the file shows it decoded (``"bytes_json": true`` says so). A
payload that is not JSON in its compact layout is kept as ``payload_text`` or ``payload_base64``.

The CRCs are not in the file: loading encodes each message and computes them, so a hand-edited
payload gives a valid stream (the prelude's lengths follow the edit too). A recording is written
this way only when rebuilding gives back exactly the recorded bytes; otherwise the body is kept
as base64. Everything in a file is untrusted: a bad header type, a value out of range, a message
over the codec's limits raise ``ValueError`` naming the message, never anything else.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from semula.providers.eventstream import EventStreamError, Header, Message, encode, parse_stream

__all__ = ["body_of_messages", "payloads", "readable_messages"]

_MAX_MESSAGES = 100_000


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _json_exact(raw: bytes) -> tuple[bool, Any]:
    """(True, value) when `raw` is JSON that compact dumping gives back byte for byte."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False, None
    try:
        return _compact(value) == raw, value
    except (ValueError, RecursionError):
        return False, None


def _readable_headers(headers: tuple[Header, ...]) -> Any:
    names = [h.name for h in headers]
    if all(h.type == "string" for h in headers) and len(set(names)) == len(names):
        return {h.name: h.value for h in headers}
    return [{"name": h.name, "type": h.type,
             "value": base64.b64encode(h.value).decode("ascii") if isinstance(h.value, bytes) else h.value}
            for h in headers]


def _readable_payload(payload: bytes) -> dict[str, Any]:
    ok, value = _json_exact(payload)
    if not ok:
        try:
            return {"payload_text": payload.decode("utf-8")}
        except UnicodeDecodeError:
            return {"payload_base64": base64.b64encode(payload).decode("ascii")}
    if isinstance(value, dict) and isinstance(value.get("bytes"), str):
        try:
            inner_ok, inner = _json_exact(base64.b64decode(value["bytes"], validate=True))
        except (binascii.Error, ValueError):
            inner_ok = False
        if inner_ok and base64.b64encode(_compact(inner)).decode("ascii") == value["bytes"]:
            return {"payload": {**value, "bytes": inner}, "bytes_json": True}
    return {"payload": value}


def readable_messages(body: bytes) -> list[dict[str, Any]] | None:
    """The file's form of an event-stream body, or None when the body is not one (or would not
    rebuild to exactly these bytes)."""
    try:
        messages = parse_stream(body)
    except EventStreamError:
        return None
    if not messages:
        return None
    readable = [{"headers": _readable_headers(m.headers), **_readable_payload(m.payload)} for m in messages]
    try:
        return readable if body_of_messages(readable) == body else None
    except ValueError:
        return None


def payloads(messages: list[dict[str, Any]]) -> list[Any]:
    """Each message's JSON payload (a chunk's decoded model JSON), for reading the answer's text."""
    return [m["payload"]["bytes"] if m.get("bytes_json") else m.get("payload") for m in messages]


def _header(item: Any, where: str) -> Header:
    if not isinstance(item, dict) or set(item) != {"name", "type", "value"}:
        raise ValueError(f"{where} is not an object with name, type and value")
    name, kind, value = item["name"], item["type"], item["value"]
    if not isinstance(name, str) or not isinstance(kind, str):
        raise ValueError(f"{where}: name and type are text")
    if kind == "bytes":
        if not isinstance(value, str):
            raise ValueError(f"{where}: a bytes value is base64 text")
        try:
            value = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: a bytes value is base64 text") from None
    return Header(name, kind, value)


def _headers(value: Any, where: str) -> tuple[Header, ...]:
    if isinstance(value, dict):
        for name, text in value.items():
            if not isinstance(text, str):
                raise ValueError(f"{where}[{name!r:.40}] is not text (write typed headers as a list)")
        return tuple(Header(name, "string", text) for name, text in value.items())
    if isinstance(value, list):
        return tuple(_header(item, f"{where}[{i}]") for i, item in enumerate(value))
    raise ValueError(f"{where} is not an object or a list")


def _payload(item: dict[str, Any], where: str) -> bytes:
    kinds = [k for k in ("payload", "payload_text", "payload_base64") if k in item]
    if len(kinds) != 1:
        raise ValueError(f"{where} has {len(kinds)} of payload, payload_text, payload_base64 (one is needed)")
    value = item[kinds[0]]
    if kinds[0] == "payload_text":
        if not isinstance(value, str):
            raise ValueError(f"{where}.payload_text is not text")
        return value.encode("utf-8")
    if kinds[0] == "payload_base64":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise ValueError(f"{where}.payload_base64 is not base64 text") from None
    if item.get("bytes_json") is True:
        if not isinstance(value, dict) or "bytes" not in value:
            raise ValueError(f"{where}: bytes_json is set but the payload has no bytes")
        value = {**value, "bytes": base64.b64encode(_compact(value["bytes"])).decode("ascii")}
    return _compact(value)


def body_of_messages(messages: Any) -> bytes:
    """The event-stream bytes of a file's messages, each message encoded and its CRCs computed."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("body_eventstream is not a list of messages")
    if len(messages) > _MAX_MESSAGES:
        raise ValueError(f"body_eventstream holds over {_MAX_MESSAGES} messages")
    out = bytearray()
    for i, item in enumerate(messages):
        where = f"body_eventstream[{i}]"
        if not isinstance(item, dict) or "headers" not in item:
            raise ValueError(f"{where} is not an object with headers")
        if unknown := set(item) - {"headers", "payload", "payload_text", "payload_base64", "bytes_json"}:
            raise ValueError(f"{where} has unknown field(s) {', '.join(sorted(unknown))}")
        try:
            out += encode(Message(_headers(item["headers"], f"{where}.headers"), _payload(item, where)))
        except EventStreamError as e:
            raise ValueError(f"{where}: {e}") from None
    return bytes(out)
