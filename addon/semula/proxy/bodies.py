"""Answer bodies as the proxy captured them (streams arrive chunk by chunk, maybe compressed)."""

from __future__ import annotations

import zlib

from mitmproxy.net.encoding import decode


def decode_partial(raw: bytes, encoding: str) -> bytes:
    """Decode a captured body; a compressed stream cut short yields what arrived (a client may hang up
    at the terminal event, before the compressor's trailer)."""
    try:
        return decode(raw, encoding) or b""
    except ValueError:
        pass
    if encoding.strip().lower() in ("gzip", "x-gzip", "deflate"):
        wbits = 31 if "gzip" in encoding.lower() else 15
        try:
            return zlib.decompressobj(wbits=wbits).decompress(raw)
        except zlib.error:
            pass
    return raw
