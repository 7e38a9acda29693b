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

__all__ = ["MISS_CODE", "error_body", "has_response", "with_request_ids"]

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
