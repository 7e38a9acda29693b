"""Which framing a streamed answer uses, by its content type: SSE or AWS event-stream.

The proxy captures a streamed answer chunk by chunk and, at its end, splits it into frames for
the adapter (did the terminal event arrive? what was the usage?). Both framings give a list of
each frame's bytes; joined, they are the body as received.
"""

from __future__ import annotations

from collections.abc import Callable

from semula.providers import eventstream, sse

__all__ = ["Framer", "stream_frames", "stream_framer"]

Framer = Callable[[bytes], list[bytes]]
_FRAMERS: dict[str, Framer] = {
    "text/event-stream": sse.split_frames,
    eventstream.CONTENT_TYPE: eventstream.split_frames,
}


def stream_framer(content_type: str) -> Framer | None:
    """The frame splitter for an answer of this content type, or None when it is not a stream."""
    return _FRAMERS.get(content_type.split(";", 1)[0].strip().lower())


def stream_frames(content_type: str, body: bytes) -> list[bytes]:
    """The frames of a streamed answer of this content type (none when it is not a stream)."""
    framer = stream_framer(content_type)
    return framer(body) if framer is not None else []
