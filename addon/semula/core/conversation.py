"""A recorded Realtime conversation and the matcher that replays it turn by turn (pure: no I/O, no clock).

A Realtime session (OpenAI `/v1/realtime`, Azure `/openai/realtime`) is not one request and one answer
but a conversation: client and server messages in order. It is the second kind of recording: its file is
`recordings/conversation_file.py`, its store row `recordings/conversations.py`; the mitmproxy hooks and
the local answerer are `proxy/realtime/hooks.py` and `proxy/realtime/answerer.py`.

A replay session starts with every recording made on the same URL (path and query, credentials
dropped). Each client message narrows them to those whose next client message is the same after
normalisation, and is answered with the server messages that followed it in the first one left. A
client message none of them has ends the session with `MISS_CLOSE_CODE` and a reason saying what
differs. Event ids, the ids the server made up (items, responses, calls) and timestamps change on
every run, so they are normalised away before comparing. A message is redacted as an HTTP body is
(`core/redact.py`) before it is kept or compared: a recording never holds a key, and a client message
that carries one still matches its recording.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl, urlencode

from semula.core.jsondiff import first_difference
from semula.core.redact import clean_query, redact_bytes, redact_text

PROVIDER = "openai-realtime"  # the call log's provider for a Realtime conversation (its row names it in request_fp)

MISS_CLOSE_CODE = 4000  # application range: "semula has no recording for this"
CLEAN_CLOSE_CODES = frozenset({1000, 1001})  # a conversation that ended like this is recorded
MAX_REASON_BYTES = 123  # RFC 6455: a close frame's reason fits in 125 bytes with its code
REALTIME_PATHS = ("/v1/realtime", "/openai/realtime")  # OpenAI, Azure OpenAI
# Values that change on every run: dropped (event ids) or replaced by a placeholder.
DROPPED_KEYS = frozenset({"event_id"})
ID_KEYS = frozenset({"id", "item_id", "response_id", "call_id", "previous_item_id", "conversation_id",
                     "session_id"})
TIME_KEYS = frozenset({"created_at", "expires_at", "timestamp"})


@dataclass(frozen=True)
class Message:
    """One WebSocket message: text (`text`) or binary (`data`), who sent it, and when (ms after the handshake)."""

    from_client: bool
    at_ms: float
    text: str | None = None
    data: bytes | None = None

    @property
    def content(self) -> bytes:
        return self.text.encode() if self.text is not None else (self.data or b"")


@dataclass(frozen=True)
class Conversation:
    """A recorded session: where it connected (`url`: path and cleaned query) and its messages in order."""

    project: str
    host: str
    url: str
    messages: tuple[Message, ...]
    close_code: int | None = None
    recorded_at: str | None = None

    @cached_property
    def client_messages(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.from_client)

    @cached_property
    def normalised_clients(self) -> tuple[Any, ...]:
        return tuple(normalised(redacted(m)) for m in self.client_messages)  # a file written before redaction too

    @cached_property
    def turns(self) -> tuple[tuple[Message, ...], list[tuple[Message, ...]]]:
        """The server messages before the first client message (the greeting), and for each client
        message the server messages that followed it until the next one."""
        greeting: list[Message] = []
        turns: list[list[Message]] = []
        for message in self.messages:
            if message.from_client:
                turns.append([])
            elif turns:
                turns[-1].append(message)
            else:
                greeting.append(message)
        return tuple(greeting), [tuple(t) for t in turns]

    @property
    def identity(self) -> str:
        """A hash of the URL and the normalised client messages: the same conversation recorded twice
        has one identity (and so one file)."""
        digest = hashlib.sha256(self.url.encode())
        for seen in self.normalised_clients:
            digest.update(b"\0" + json.dumps(seen, sort_keys=True).encode())
        return digest.hexdigest()


def base_path(path: str) -> str:
    """The path without its query, one leading slash and no trailing one."""
    return "/" + path.split("?", 1)[0].strip("/")


def realtime_path(path: str) -> bool:
    return base_path(path) in REALTIME_PATHS


def url_key(path: str) -> str:
    """The connection's path and query as recorded: credentials dropped (`api_key`…), parameters sorted."""
    base, query = base_path(path), path.partition("?")[2]
    pairs = sorted(clean_query(parse_qsl(query, keep_blank_values=True)))
    return f"{base}?{urlencode(pairs)}" if pairs else base


def model_of(url: str) -> str | None:
    """The model a connection's URL names (its `model` parameter), if any."""
    return dict(parse_qsl(url.partition("?")[2], keep_blank_values=True)).get("model") or None


def url_fingerprint(url: str) -> str:
    """What the store finds a URL's recordings by (their `normalised_fp`): never an HTTP request's fingerprint."""
    return "realtime-" + hashlib.sha256(url.encode()).hexdigest()


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in DROPPED_KEYS:
                continue
            if key in ID_KEYS and isinstance(item, str):
                out[key] = "<id>" if item else ""
            elif key in TIME_KEYS and isinstance(item, (int, float, str)) and not isinstance(item, bool):
                out[key] = "<time>"
            else:
                out[key] = _normalise(item)
        return out
    if isinstance(value, list):
        return [_normalise(item) for item in value]
    return value


def redacted(message: Message) -> Message:
    """The message as semula may keep it: API keys and tokens replaced, as in an HTTP body."""
    if message.text is not None:
        return replace(message, text=redact_text(message.text))
    return replace(message, data=redact_bytes(message.data or b""))


def normalised(message: Message) -> Any:
    """What two runs of the same client message share: JSON with volatile values replaced, else the raw content."""
    if message.text is not None:
        try:
            return _normalise(json.loads(message.text))
        except (ValueError, RecursionError):
            return {"<text>": message.text}
    return {"<binary sha256>": hashlib.sha256(message.data or b"").hexdigest()}


def close_reason(what: str) -> str:
    """A close frame's reason, cut to what fits in the frame (UTF-8 safe)."""
    reason = f"semula: no recording for this turn: {what}"
    encoded = reason.encode()
    if len(encoded) <= MAX_REASON_BYTES:
        return reason
    return encoded[:MAX_REASON_BYTES - 3].decode(errors="ignore") + "..."


@dataclass(frozen=True)
class Answer:
    """What to send for one client message: server messages, or (on a miss) a close and why."""

    messages: tuple[Message, ...] = ()
    miss: str | None = None  # the full reason, for the log line; the close frame carries `close_reason(miss)`


@dataclass
class ReplaySession:
    """One replayed connection: the recordings still consistent with what the client sent so far."""

    candidates: list[Conversation]
    turn: int = 0  # client messages answered

    @classmethod
    def open(cls, recordings: Iterable[Conversation], url: str) -> ReplaySession:
        return cls([c for c in recordings if c.url == url])

    @property
    def chosen(self) -> Conversation | None:
        return self.candidates[0] if self.candidates else None

    def greeting(self) -> tuple[Message, ...]:
        """The server messages a recording sent before the client said anything (`session.created`)."""
        return self.candidates[0].turns[0] if self.candidates else ()

    def answer(self, incoming: Message) -> Answer:
        if not self.candidates:
            return Answer(miss="no recording of this URL")
        index, seen = self.turn, normalised(redacted(incoming))
        left = [c for c in self.candidates if index < len(c.normalised_clients) and c.normalised_clients[index] == seen]
        if not left:
            return Answer(miss=_difference(self.candidates[0], index, seen))
        self.candidates, self.turn = left, index + 1
        return Answer(messages=left[0].turns[1][index])


def _difference(nearest: Conversation, index: int, seen: Any) -> str:
    if index >= len(nearest.normalised_clients):
        return f"the recording ends after {index} client messages; message {index + 1} is new"
    what = first_difference(nearest.normalised_clients[index], seen) or "differs"
    return f"client message {index + 1}: {what}"


def conversation_of(project: str, host: str, path: str, messages: Sequence[Message], close_code: int | None,
                    recorded_at: str | None = None) -> Conversation:
    """The conversation as it is recorded: every message redacted."""
    return Conversation(project, host, url_key(path), tuple(redacted(m) for m in messages), close_code, recorded_at)
