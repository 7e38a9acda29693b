"""MCP answers on the wire: a recorded answer made the answer to this request, and a miss as a JSON-RPC error.

A recorded answer carries the JSON-RPC `id` of the request that was recorded; the client waits for the
id it sent, so replay writes the request's id into the answer's response message (an `application/json`
body, or the frames of a `text/event-stream` answer, each frame kept, only its `data` rewritten). A
progress notification in the stream names the recorded request's progress token: it gets the request's.

Pure: bytes in, bytes out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from semula.providers.sse import split_frames

__all__ = ["MISS_CODE", "error_body", "has_response", "response_of", "result_text", "with_request_ids"]

MISS_CODE = -32001  # JSON-RPC's range for server errors (-32000..-32099): "semula has no recording"


def _is_response(value: Any) -> bool:
    return isinstance(value, dict) and "id" in value and ("result" in value or "error" in value)


def has_response(frames: Iterable[bytes]) -> bool:
    """Whether a stream's frames hold the JSON-RPC response (the server's last message for a request)."""
    for frame in frames:
        for line in frame.splitlines():
            if line.startswith(b"data:"):
                try:
                    if _is_response(json.loads(line[5:])):
                        return True
                except ValueError:
                    continue
    return False


def _messages(body: bytes, content_type: str) -> list[Any]:
    """The JSON messages an answer's body holds: the body itself, or each SSE frame's data."""
    if content_type.split(";", 1)[0].strip().lower() != "text/event-stream":
        try:
            return [json.loads(body)]
        except (ValueError, RecursionError):
            return []
    found = []
    for frame in split_frames(body):
        data = b"\n".join(line[5:] for line in frame.split(b"\n") if line.startswith(b"data:"))
        try:
            found.append(json.loads(data))
        except (ValueError, RecursionError):
            continue
    return found


def response_of(body: bytes, content_type: str, request_id: Any = None) -> dict[str, Any] | None:
    """The JSON-RPC response an answer's body holds (a JSON body, or the SSE frame carrying it): the one
    answering `request_id` when given, else the first; None when there is none."""
    responses = [m for m in _messages(body, content_type) if _is_response(m)]
    if request_id is not None:
        responses = [m for m in responses if m["id"] == request_id and type(m["id"]) is type(request_id)]
    return responses[0] if responses else None


def result_text(result: Any) -> str:
    """What a person reads in an MCP result: the text parts of a tool's `content`, a resource's
    `contents` or a prompt's `messages`, one per line; "" when it has none."""
    if not isinstance(result, dict):
        return ""
    parts: list[Any] = []
    for name in ("content", "contents"):
        if isinstance(result.get(name), list):
            parts.extend(result[name])
    if isinstance(result.get("messages"), list):
        parts.extend(m.get("content") for m in result["messages"] if isinstance(m, dict))
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _rewrite(value: Any, request_id: Any, progress_token: Any) -> Any:
    if _is_response(value):
        return {**value, "id": request_id}
    if (isinstance(value, dict) and value.get("method") == "notifications/progress"
            and isinstance(value.get("params"), dict) and progress_token is not None):
        return {**value, "params": {**value["params"], "progressToken": progress_token}}
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _rewrite_frame(frame: bytes, request_id: Any, progress_token: Any) -> bytes:
    """One SSE frame with its `data:` message rewritten; a frame that is not one JSON message is kept."""
    lines = frame.split(b"\n")
    data_at = [i for i, line in enumerate(lines) if line.startswith(b"data:")]
    if not data_at:
        return frame
    try:
        value = json.loads(b"\n".join(lines[i][5:] for i in data_at))
    except ValueError:
        return frame
    new = _rewrite(value, request_id, progress_token)
    if new is value:
        return frame
    data = b"data: " + _dumps(new).encode()
    kept = [line for i, line in enumerate(lines) if i not in data_at[1:]]
    kept[data_at[0]] = data
    return b"\n".join(kept)


def with_request_ids(body: bytes, content_type: str, request_id: Any, progress_token: Any = None) -> bytes:
    """The recorded answer as the answer to the request with `request_id` (and `progress_token`)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "text/event-stream":
        frames = split_frames(body.replace(b"\r\n", b"\n"))
        return b"".join(_rewrite_frame(f, request_id, progress_token) + b"\n\n" for f in frames)
    try:
        value = json.loads(body)
    except ValueError:
        return body
    new = _rewrite(value, request_id, progress_token)
    return body if new is value else _dumps(new).encode()


def error_body(request_id: Any, message: str, code: int = MISS_CODE) -> bytes:
    """A JSON-RPC error answering `request_id`: what the SDKs raise with its message."""
    return _dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}).encode()
