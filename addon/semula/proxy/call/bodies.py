"""Answer bodies as the proxy captured them (streams arrive chunk by chunk, maybe compressed)."""

from __future__ import annotations

import zlib

from mitmproxy.net.encoding import decode


def decode_partial(raw: bytes, encoding: str) -> bytes:
    """Decode a captured body; a compressed stream cut short yields what arrived (a client may hang up
    at the terminal event, before the compressor's trailer)."""
    try:
        decoded = decode(raw, encoding)
    except ValueError:
        decoded = None
    if isinstance(decoded, bytes):
        return decoded
    # A text codec named as the coding (`content-encoding: utf-8`) decodes to str: not a compression.
    if encoding.strip().lower() in ("gzip", "x-gzip", "deflate"):
        wbits = 31 if "gzip" in encoding.lower() else 15
        try:
            return zlib.decompressobj(wbits=wbits).decompress(raw)
        except zlib.error:
            pass
    return raw


class BodyTooLarge(ValueError):
    """A request body that inflates beyond the cap (`semula_max_body_mb`): it is not matched."""


def decode_capped(raw: bytes, encoding: str, cap: int) -> bytes:
    """Decode a request body, inflating at most `cap` bytes (a gzip bomb must not take the memory).

    Raises `BodyTooLarge` over the cap and ValueError for a body that cannot be decoded.
    """
    if len(raw) > cap:
        raise BodyTooLarge(f"the request body is over {cap // 2**20} MB (semula_max_body_mb)")
    body = raw
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    for coding in reversed(codings):  # the last coding applied is undone first
        body = _inflate(body, coding, cap)
    return body


def _inflate(data: bytes, coding: str, cap: int) -> bytes:
    if coding in ("", "identity", "none"):
        return data
    try:
        if coding in ("gzip", "x-gzip", "deflate"):
            wbits = 47 if coding != "deflate" or data[:1] == b"\x78" else -15  # gzip/zlib, else raw deflate
            z = zlib.decompressobj(wbits)
            out = z.decompress(data, cap + 1)
            if len(out) <= cap:  # all the input was inflated: only the last bytes remain
                out += z.flush()
        elif coding == "br":
            import brotli

            d = brotli.Decompressor()
            out = d.process(data, output_buffer_limit=cap + 1)
        elif coding == "zstd":
            try:
                from compression import zstd  # type: ignore[import-not-found]
            except ImportError:
                from backports import zstd
            out = zstd.ZstdDecompressor().decompress(data, max_length=cap + 1)
        else:
            raise ValueError(f"unknown content-encoding {coding!r}")
    except BodyTooLarge:
        raise
    except Exception as e:
        raise ValueError(f"cannot decode the {coding} request body: {e}") from None
    if len(out) > cap:
        raise BodyTooLarge(f"the request body inflates to over {cap // 2**20} MB (semula_max_body_mb)")
    return out
