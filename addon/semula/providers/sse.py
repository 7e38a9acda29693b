"""Server-sent events framing for recording and replaying streamed answers.

Providers stream chat answers as SSE. A recording stores the stream as a list
of event frames so that a replay can send the same events, and so that the
provider adapters can tell whether the stream finished (the terminal event was
seen) before it is stored. Network chunks cut frames anywhere, including
between the ``\\r`` and ``\\n`` of a line ending, so re-framing is incremental.

Frames are returned with their line endings normalised to ``\\n``: a replay
does not need the provider's original line endings, and one form keeps the
stored frames comparable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FrameBuffer", "SSEEvent", "parse_frame", "split_frames"]

_LINE_ENDINGS = re.compile(rb"\r\n|\r")
_BLANK_LINES = re.compile(rb"\n\n+")


@dataclass(frozen=True)
class SSEEvent:
    """One parsed frame: the ``event:`` name (``None`` if absent) and its data."""

    event: str | None
    data: str


class FrameBuffer:
    """Turns a chunked SSE byte stream back into complete event frames."""

    def __init__(self) -> None:
        self._pending = bytearray()  # normalised bytes not yet ending in a blank line
        self._held_cr = False  # a chunk ended in "\r"; the next may start with "\n"

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add a chunk; return the frames it completed (possibly none)."""
        if not chunk:
            return []
        data = (b"\r" if self._held_cr else b"") + chunk
        self._held_cr = data.endswith(b"\r")
        if self._held_cr:
            data = data[:-1]
        scan_from = max(len(self._pending) - 1, 0)
        self._pending += _LINE_ENDINGS.sub(b"\n", data)
        if self._pending.find(b"\n\n", scan_from) < 0:
            return []  # no frame ended in this chunk; a long frame is not rescanned
        return self._take_complete()

    def finish(self) -> list[bytes]:
        """End of stream: return the last unterminated frame, if it has content."""
        if self._held_cr:
            self._pending += b"\n"
            self._held_cr = False
        frames = self._take_complete()
        last = bytes(self._pending).strip(b"\n")
        self._pending = bytearray()
        if last.strip():
            frames.append(last)
        return frames

    def _take_complete(self) -> list[bytes]:
        parts = _BLANK_LINES.split(bytes(self._pending))
        # The last part has not been closed by a blank line yet.
        self._pending = bytearray(parts.pop())
        return [p.strip(b"\n") for p in parts if p.strip()]


def split_frames(data: bytes) -> list[bytes]:
    """Split a whole (decoded) SSE body into frames, dropping empty ones."""
    buffer = FrameBuffer()
    return buffer.feed(data) + buffer.finish()


def parse_frame(frame: bytes) -> SSEEvent:
    """Parse one frame's fields; several ``data:`` lines are joined with ``\\n``.

    Comment lines (starting with ``:``) and fields other than ``event`` and
    ``data`` (``id``, ``retry``) are ignored, as the SSE standard says a client
    should for dispatching.
    """
    event: str | None = None
    data: list[str] = []
    text = _LINE_ENDINGS.sub(b"\n", frame).decode("utf-8", errors="replace")
    for line in text.split("\n"):
        if not line or line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    return SSEEvent(event=event, data="\n".join(data))
