"""One HTTP exchange read from a foreign recording, before it is judged: what every reader yields."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from semula.core.redact import redact_text

MAX_BODY_BYTES = 256 * 1024 * 1024  # a decoded body over this is not imported (a decompression bomb, a dump)
MAX_ELAPSED_MS = 24 * 3600 * 1000.0  # a longer "call" is a clock that jumped, not a duration


@dataclass(frozen=True)
class Interaction:
    """A request and its answer, as bytes on the wire (bodies maybe still content-encoded)."""

    source: str  # where it came from, for the report: "cassette.yaml#3"
    method: str
    url: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes
    status: int
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes
    upstream_ms: float | None = None
    started_at: datetime | None = None  # naive UTC, when the source knows it


@dataclass(frozen=True)
class Unreadable:
    """An entry of a foreign file that is not an HTTP exchange a reader understands."""

    source: str
    reason: str
    failed: bool = True  # False: a well-formed entry the import leaves out by rule (a TCP flow, no body kept)


class BadEntry(ValueError):
    """Raised by a reader's helpers: the message is the per-entry reason."""


class LeftOut(BadEntry):
    """A well-formed entry that is not a call to import (a TCP flow, a call that failed): not an error."""



def each_entry(file_name: str, items: list[object], convert: Callable[[str, object], Interaction]
               ) -> Iterator[Interaction | Unreadable]:
    """`convert` applied to every entry of one file; an entry it refuses is named (`file#n`) with the reason.
    Any error is the entry's alone: a hostile entry (a date past year 9999, a URL that does not parse)
    never ends the file or the command."""
    for n, item in enumerate(items, 1):
        source = f"{file_name}#{n}"
        try:
            yield convert(source, item)
        except Exception as e:
            yield Unreadable(source, reason_of(e), failed=not isinstance(e, LeftOut))


def reason_of(error: Exception, what: str = "unreadable entry") -> str:
    """One line for the report: a reader's own message as it is, anything else after `what` with its type."""
    text = redact_text(" ".join(str(error).split())[:300])
    if isinstance(error, BadEntry):
        return text
    return f"{what}: {type(error).__name__}{': ' + text if text else ''}"


def duration_ms(value: object) -> float | None:
    """A call's duration in ms, if `value` is one (a huge integer, a negative, NaN or a day's worth are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        ms = float(value)
    except OverflowError:
        return None
    return ms if math.isfinite(ms) and 0 <= ms <= MAX_ELAPSED_MS else None


def header_pairs(value: object) -> tuple[tuple[str, str], ...]:
    """Headers as (name, value) pairs from the shapes tools store: {name: [values]}, {name: value},
    [[name, value]], [{"name": .., "value": ..}] (HAR)."""
    pairs: list[tuple[str, str]] = []
    if value is None:
        return ()
    if isinstance(value, dict):
        for name, values in value.items():
            for item in values if isinstance(values, list) else [values]:
                pairs.append((_text(name, "header name"), _text(item, "header value")))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and "name" in item:
                pairs.append((_text(item["name"], "header name"), _text(item.get("value", ""), "header value")))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                pairs.append((_text(item[0], "header name"), _text(item[1], "header value")))
            else:
                raise BadEntry(f"a header is not a name and a value: {item!r:.60}")
    else:
        raise BadEntry(f"headers are a {type(value).__name__}, not a mapping or a list")
    return tuple(pairs)


def _text(value: object, what: str) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise BadEntry(f"{what} is a {type(value).__name__}")


def folded(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Repeated names folded with ", " in first-seen order: what mitmproxy's `Headers.items()` gives
    the proxy when it records."""
    out: dict[str, tuple[str, list[str]]] = {}
    for name, value in headers:
        out.setdefault(name.lower(), (name, []))[1].append(value)
    return [(name, ", ".join(values)) for name, values in out.values()]


def header(headers: Iterable[tuple[str, str]], name: str) -> str:
    return next((v for k, v in headers if k.lower() == name), "")


def body_bytes(value: object, what: str) -> bytes:
    """A body stored as text or bytes (None: empty)."""
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    raise BadEntry(f"{what} is a {type(value).__name__}, not text")


def decoded(body: bytes, encoding: str, cap: int = MAX_BODY_BYTES, cap_name: str = "import cap") -> bytes:
    """The body without its content-encoding (gzip, deflate, br, zstd), at most `cap` bytes.

    Tools disagree on whether they store the wire bytes or the decoded ones under the encoding's
    header (vcrpy keeps gzip bytes, HAR keeps text): a body that does not decode is taken as decoded.
    """
    if len(body) > cap:
        raise BadEntry(f"a body of {len(body) / 2**20:.1f} MB is over the {cap / 2**20:g} MB {cap_name}")
    for coding in reversed([c.strip().lower() for c in encoding.split(",") if c.strip()]):
        try:
            body = _inflate(body, coding, cap, cap_name)
        except BadEntry:
            raise
        except Exception:  # zlib.error, brotli.error, zstd's: not encoded after all
            return body
    return body


def _inflate(data: bytes, coding: str, cap: int, cap_name: str) -> bytes:
    if coding in ("identity", "none"):
        return data
    if coding in ("gzip", "x-gzip", "deflate"):
        z = zlib.decompressobj(47 if coding != "deflate" or data[:1] == b"\x78" else -15)
        out = z.decompress(data, cap + 1)
        if not z.eof and len(out) <= cap:
            raise ValueError("truncated")
    elif coding == "br":
        import brotli

        decompressor = brotli.Decompressor()
        out = decompressor.process(data, output_buffer_limit=cap + 1)
    elif coding == "zstd":
        from mitmproxy.net.encoding import decode

        decoded = decode(data, "zstd")  # a compression decodes to bytes (a text codec would give str)
        out = decoded if isinstance(decoded, bytes) else b""
    else:
        raise ValueError(f"unknown content-encoding {coding}")
    if len(out) > cap:
        raise BadEntry(f"the body inflates beyond the {cap / 2**20:g} MB {cap_name}")
    return out
