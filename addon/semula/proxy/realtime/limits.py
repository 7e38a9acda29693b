"""The Realtime message cap, enforced from each frame's header, before its payload is read.

mitmproxy's WebSocket layer collects a whole message before any hook sees it, on the event loop,
growing its buffer by concatenation: one 100 MB client frame held every other flow for half a
minute and left a gigabyte behind, and a hook could only look once it was all there. So semula
gives the two wsproto connections of each Realtime flow it tracks one more wsproto extension (never
negotiated: it only reads inbound frames). It adds up a message's frame lengths from their headers;
once they pass the cap, the rest of the message is read and dropped as it arrives (nothing is
buffered), and at its end the message fails with close code 1009 "message too big" and a reason,
which mitmproxy sends to both peers before ending the flow. Reading to the end lets the sender, done
sending, read that close (closing on a socket it still writes to resets it, and the reason is lost);
a message over `DRAIN_FACTOR` times the cap is cut off at once. Other WebSocket flows get no extension.
The Realtime hooks keep permessage-deflate out of the handshake, so a header's length is the payload's.

mitmproxy has no hook between a frame's header and the end of its message, so `install` puts a
subclass of its `WebsocketConnection` in its place that asks `_caps` for its connection's cap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from wsproto.extensions import Extension
from wsproto.frame_protocol import CloseReason, FrameDecoder, FrameProtocol, Opcode, ParseFailed, RsvBits

log = logging.getLogger("semula")

MB = 1024 * 1024
_NO_BITS = RsvBits(False, False, False)
DRAIN_FACTOR = 8  # a message up to 8 times the cap is read to its end (and dropped) before the close
_caps: dict[str, Cap] = {}  # mitmproxy connection id → the cap of the flow it carries


@dataclass(frozen=True)
class Cap:
    """A flow's message cap in bytes, the close reason, and what to call (with the size seen) when it is passed."""

    limit: int
    reason: str
    exceeded: Callable[[int], None]


class MessageCap(Extension):
    """Adds up the message being received from its frame headers; past the cap, drops it and fails it at its end."""

    name = "semula-message-cap"

    def __init__(self, cap: Cap) -> None:
        self.cap = cap
        self.size = 0
        self.control = False
        self.dropping = False

    def enabled(self) -> bool:
        return True

    def offer(self) -> bool:
        return False

    def frame_inbound_header(self, proto: FrameDecoder | FrameProtocol, opcode: Opcode, rsv: RsvBits,
                             payload_length: int) -> RsvBits:
        self.control = opcode.iscontrol()  # a ping or close between fragments belongs to no message
        if self.control:
            return _NO_BITS
        if opcode is not Opcode.CONTINUATION:
            self.size, self.dropping = 0, False
        self.size += payload_length
        if self.size > self.cap.limit and not self.dropping:
            self.dropping = True
            self.cap.exceeded(self.size)
        if self.size > self.cap.limit * DRAIN_FACTOR:
            raise ParseFailed(self.cap.reason, CloseReason.MESSAGE_TOO_BIG)
        return _NO_BITS

    def frame_inbound_payload_data(self, proto: FrameDecoder | FrameProtocol, data: bytes) -> bytes:
        return b"" if self.dropping and not self.control else data

    def frame_inbound_complete(self, proto: FrameDecoder | FrameProtocol, fin: bool) -> None:
        if self.dropping and not self.control and fin:
            raise ParseFailed(self.cap.reason, CloseReason.MESSAGE_TOO_BIG)


def guard(connection_ids: Iterable[str], cap: Cap) -> None:
    for connection_id in connection_ids:
        _caps[connection_id] = cap


def release(connection_ids: Iterable[str]) -> None:
    for connection_id in connection_ids:
        _caps.pop(connection_id, None)


def install() -> bool:
    """Put the capped connection in mitmproxy's WebSocket layer (once); False when this mitmproxy has none."""
    from mitmproxy.proxy.layers import websocket as layer

    base: Any = getattr(layer, "WebsocketConnection", None)
    if base is None:
        return False
    if getattr(base, "semula_capped", False):
        return True

    class CappedConnection(base):
        semula_capped = True

        def __init__(self, *args: Any, conn: Any, **kwargs: Any) -> None:
            cap = _caps.get(getattr(conn, "id", ""))
            if cap is not None:
                if len(args) >= 2:
                    args = (args[0], [*(args[1] or []), MessageCap(cap)], *args[2:])
                else:
                    kwargs["extensions"] = [*(kwargs.get("extensions") or []), MessageCap(cap)]
            super().__init__(*args, conn=conn, **kwargs)

    layer.WebsocketConnection = CappedConnection  # type: ignore[misc]  # replacing mitmproxy's class on purpose
    return True
