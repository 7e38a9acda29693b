"""The file of a Realtime conversation: the second kind of recording file, its audio in one binary sidecar.

A recording file of kind `realtime` has the envelope every recording has (`format`, `project`, `provider`,
`host`, `method`, `endpoint`, `model`, `recorded_at`, checked by the one validator: `validate.envelope`)
and, in place of a request and its answer, the connection's `url` (path and cleaned query), its
`close_code` and its `messages`. Files written before conversations were a kind (`semula-realtime/1`,
with no envelope) still load.

Pure: a conversation in, (JSON text, audio bytes) out, and back. Each message is stored as its
parsed JSON plus the layout that re-serialises it to the exact bytes sent (or, when no layout does,
as its text; a binary frame as base64). Audio travels as base64 inside JSON events (`delta` of
`response.audio.delta` / `response.output_audio.delta`, `audio` of `input_audio_buffer.append`):
30 s of it is ~1.9 MB of base64 per direction, so it is decoded into one sidecar per conversation and
the event keeps a placeholder and its slice (`audio: {field, offset, size}`). The file is untrusted
input: `loads` checks every field and refuses a hostile file with a reason naming the place.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from typing import Any

from semula.core.conversation import Conversation, Message, base_path, model_of, realtime_path
from semula.core.settings import PROJECT_NAME
from semula.providers import ADAPTERS, GENERIC, PROVIDER_NAMES
from semula.recordings.format import FORMAT, RecordingFileError
from semula.recordings.sidecars import SidecarError, SidecarRef, reference_problem
from semula.recordings.validate import Invalid, depth_problem, envelope

KIND = "realtime"  # the file's `kind` (a `store.types.RecordingKind`)
LEGACY_FORMAT = "semula-realtime/1"  # a conversation's file before conversations were a kind of recording
MAX_MESSAGES = 200_000
MAX_TEXT_CHARS = 4096  # host, url
# The events whose base64 field is audio, and that field.
AUDIO_FIELDS = {"response.audio.delta": "delta", "response.output_audio.delta": "delta",
                "input_audio_buffer.append": "audio"}
AUDIO_PLACEHOLDER = "<audio in sidecar>"
# json.dumps settings that give back the bytes a peer sent, tried in order.
LAYOUTS: dict[str, dict[str, Any]] = {
    "compact": {"separators": (",", ":"), "ensure_ascii": False},
    "spaced": {"ensure_ascii": False},
    "spaced-ascii": {},
    "compact-ascii": {"separators": (",", ":")},
}
_MESSAGE_KEYS = frozenset({"from", "at_ms", "json", "layout", "text", "base64", "audio"})


class RealtimeFileError(RecordingFileError):
    """A Realtime recording file that cannot be loaded; the message names the place and the problem."""


def _layout_of(text: str, value: Any) -> str | None:
    return next((name for name, kw in LAYOUTS.items() if json.dumps(value, **kw) == text), None)


def _audio_field(value: Any) -> str | None:
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        name = AUDIO_FIELDS.get(value["type"])
        if name is not None and isinstance(value.get(name), str):
            return name
    return None


def _entry(message: Message, audio: bytearray) -> dict[str, Any]:
    entry: dict[str, Any] = {"from": "client" if message.from_client else "server", "at_ms": round(message.at_ms, 3)}
    if message.text is None:
        entry["base64"] = base64.b64encode(message.data or b"").decode()
        return entry
    try:
        value = json.loads(message.text)
    except (ValueError, RecursionError):
        value = None
    layout = _layout_of(message.text, value) if value is not None else None
    if layout is None:
        entry["text"] = message.text
        return entry
    if (name := _audio_field(value)) is not None:
        try:
            decoded = base64.b64decode(value[name], validate=True)
        except (binascii.Error, ValueError):
            decoded = None
        if decoded is not None and base64.b64encode(decoded).decode() == value[name]:  # gives back the same text
            entry["audio"] = {"field": name, "offset": len(audio), "size": len(decoded)}
            audio += decoded
            value = {**value, name: AUDIO_PLACEHOLDER}
    entry["json"], entry["layout"] = value, layout
    return entry


def provider_of(conversation: Conversation) -> str:
    """The registry's provider of the host it connected to (the generic one for a host the user added)."""
    return next((a.name for a in ADAPTERS if a.serves_host(conversation.host)), GENERIC.name)


def dumps(conversation: Conversation, audio_ref: Callable[[bytes], SidecarRef]) -> tuple[str, bytes]:
    """The file's text and its sidecar's bytes (empty: no audio, no sidecar). `audio_ref` names the
    sidecar for the bytes (`sidecars.ref_for`), so the text can refer to it before it is written."""
    audio = bytearray()
    messages = [_entry(m, audio) for m in conversation.messages]
    document: dict[str, Any] = {
        "format": FORMAT, "kind": KIND, "project": conversation.project, "provider": provider_of(conversation),
        "host": conversation.host, "method": "GET", "endpoint": base_path(conversation.url),
        "model": model_of(conversation.url), "url": conversation.url, "recorded_at": conversation.recorded_at,
        "close_code": conversation.close_code, "messages": messages,
    }
    if audio:
        document["audio_sidecar"] = audio_ref(bytes(audio)).to_json()
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n", bytes(audio)


def _fail(where: str, problem: str) -> RealtimeFileError:
    return RealtimeFileError(f"{where}: {problem}")


def _text_field(document: dict[str, Any], key: str, optional: bool = False) -> str | None:
    value = document.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT_CHARS:
        raise _fail(key, f"is not a text of 1 to {MAX_TEXT_CHARS} characters")
    return value


def sidecar_of(document: Any) -> SidecarRef | None:
    """The audio sidecar a parsed file refers to (checked: a plain name in its own directory), or None."""
    if not isinstance(document, dict) or document.get("audio_sidecar") is None:
        return None
    if (problem := reference_problem(document["audio_sidecar"], "audio_sidecar")) is not None:
        raise RealtimeFileError(problem)
    return SidecarRef.from_json(document["audio_sidecar"], "audio_sidecar")


def is_conversation(document: Any) -> bool:
    """Whether a parsed recording file is a conversation (of either format)."""
    return isinstance(document, dict) and (document.get("format") == LEGACY_FORMAT or (
        document.get("format") == FORMAT and document.get("kind") == KIND))


def parse(text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise RealtimeFileError(f"not JSON ({e})") from None
    if not is_conversation(document):
        said = document.get("format") if isinstance(document, dict) else None
        raise RealtimeFileError(f"not a {FORMAT} file of kind {KIND} (its format field says {str(said)!r:.40})")
    if (problem := depth_problem(document)) is not None:
        raise RealtimeFileError(problem)
    return document


def _checked_envelope(document: dict[str, Any], url: str) -> None:
    """The fields every recording file has, by the one validator; the endpoint a Realtime path, the URL's own."""
    try:
        envelope(document, PROVIDER_NAMES)
    except Invalid as e:
        raise RealtimeFileError(str(e)) from None
    if document.get("method") != "GET" or not realtime_path(document["endpoint"]):
        raise _fail("endpoint", f"{document['method']} {document['endpoint']!r:.60} is not a Realtime connection")
    if base_path(url) != document["endpoint"]:
        raise _fail("url", f"is not a URL of the file's endpoint {document['endpoint']!r:.60}")


def loads(text: str, audio: Callable[[SidecarRef], bytes] | None = None) -> Conversation:
    """A conversation from a file's text; `audio` reads its sidecar (checked against the reference)."""
    document = parse(text)
    project = _text_field(document, "project")
    if not PROJECT_NAME.match(project or ""):
        raise _fail("project", f"{project!r:.70} is not a project name")
    host, url = _text_field(document, "host"), _text_field(document, "url")
    if not url.startswith("/"):  # type: ignore[union-attr]
        raise _fail("url", "does not start with /")
    if document["format"] == FORMAT:
        _checked_envelope(document, url)  # type: ignore[arg-type]
    close_code = document.get("close_code")
    if close_code is not None and (not isinstance(close_code, int) or isinstance(close_code, bool)):
        raise _fail("close_code", "is not a number")
    entries = document.get("messages")
    if not isinstance(entries, list) or len(entries) > MAX_MESSAGES:
        raise _fail("messages", f"is not a list of at most {MAX_MESSAGES} messages")
    ref = sidecar_of(document)
    blob = b""
    if ref is not None:
        if audio is None:
            raise _fail("audio_sidecar", f"refers to sidecar {ref.file} but nothing can read it here")
        try:
            blob = audio(ref)
        except SidecarError as e:
            raise _fail("audio_sidecar", str(e)) from None
    messages = tuple(_message(entry, f"messages[{i}]", blob) for i, entry in enumerate(entries))
    return Conversation(project, host, url, messages, close_code,  # type: ignore[arg-type]
                        _text_field(document, "recorded_at", optional=True))


def _message(entry: Any, where: str, blob: bytes) -> Message:
    if not isinstance(entry, dict) or not set(entry) <= _MESSAGE_KEYS:
        raise _fail(where, f"is not an object of {', '.join(sorted(_MESSAGE_KEYS))}")
    sender, at_ms = entry.get("from"), entry.get("at_ms")
    if sender not in ("client", "server"):
        raise _fail(f"{where}.from", "is neither client nor server")
    if not isinstance(at_ms, (int, float)) or isinstance(at_ms, bool) or not math.isfinite(at_ms) or at_ms < 0:
        raise _fail(f"{where}.at_ms", "is not a time in ms from 0")
    kinds = [k for k in ("json", "text", "base64") if k in entry]
    if len(kinds) != 1:
        raise _fail(where, "has not exactly one of json, text, base64")
    from_client = sender == "client"
    if "base64" in entry:
        try:
            return Message(from_client, float(at_ms), data=base64.b64decode(entry["base64"], validate=True))
        except (binascii.Error, ValueError, TypeError):
            raise _fail(f"{where}.base64", "is not base64") from None
    if "text" in entry:
        if not isinstance(entry["text"], str):
            raise _fail(f"{where}.text", "is not a text")
        return Message(from_client, float(at_ms), text=entry["text"])
    value, layout = entry["json"], entry.get("layout")
    if layout not in LAYOUTS:
        raise _fail(f"{where}.layout", f"is not one of {', '.join(LAYOUTS)}")
    if "audio" in entry:
        value = _with_audio(value, entry["audio"], f"{where}.audio", blob)
    return Message(from_client, float(at_ms), text=json.dumps(value, **LAYOUTS[layout]))


def _with_audio(value: Any, audio: Any, where: str, blob: bytes) -> dict[str, Any]:
    if not isinstance(audio, dict) or set(audio) != {"field", "offset", "size"}:
        raise _fail(where, "is not an object of field, offset and size")
    name, offset, size = audio["field"], audio["offset"], audio["size"]
    if name not in set(AUDIO_FIELDS.values()) or not isinstance(value, dict) or value.get(name) != AUDIO_PLACEHOLDER:
        raise _fail(where, f"names no audio placeholder in its event (field {name!r:.20})")
    if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in (offset, size)) or offset + size > len(blob):
        raise _fail(where, f"slice {offset!r:.20}+{size!r:.20} is outside the {len(blob)}-byte audio sidecar")
    return {**value, name: base64.b64encode(blob[offset:offset + size]).decode()}
