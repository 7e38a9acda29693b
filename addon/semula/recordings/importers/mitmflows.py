"""mitmproxy flow files (`mitmdump -w`, mitmweb's save): read with mitmproxy's own `FlowReader`.

Only HTTP flows with a response are exchanges; a flow whose response body was streamed through
(`stream_large_bodies`, an SSE stream) has no body kept, and is reported as such. A flow file is
untrusted: a flow with a timestamp past year 9999 or header bytes that are not UTF-8 costs only itself.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from semula.recordings.importers.interaction import (BadEntry, Interaction, LeftOut, Unreadable, duration_ms,
                                                    reason_of)


def read(path: Path, data: bytes) -> Iterator[Interaction | Unreadable]:
    from mitmproxy.exceptions import FlowReadException
    from mitmproxy.io import FlowReader

    n = 0
    try:
        for flow in FlowReader(io.BytesIO(data)).stream():
            n += 1
            source = f"{path}#{n}"
            try:
                yield _interaction(source, flow)
            except Exception as e:  # one flow's trouble, whatever it is, is that flow's alone
                yield Unreadable(source, reason_of(e), failed=not isinstance(e, LeftOut))
    except (FlowReadException, ValueError, TypeError, KeyError) as e:
        yield Unreadable(f"{path}#{n + 1}", f"not a mitmproxy flow file: {e}")


def _interaction(source: str, flow: Any) -> Interaction:
    from mitmproxy import http

    if not isinstance(flow, http.HTTPFlow):
        raise LeftOut(f"a {type(flow).__name__}, not an HTTP flow")
    request, response = flow.request, flow.response
    if response is None:
        raise LeftOut(f"no response ({flow.error.msg if flow.error else 'none arrived'})")
    if response.raw_content is None:
        raise LeftOut("the response body was streamed through and not kept")
    return Interaction(
        source=source, method=request.method.upper(), url=request.pretty_url,
        request_headers=_pairs(request.headers.fields, "request"), request_body=request.raw_content or b"",
        status=response.status_code, response_headers=_pairs(response.headers.fields, "response"),
        response_body=response.raw_content,
        upstream_ms=_elapsed(request.timestamp_start, response.timestamp_end),
        started_at=_moment(request.timestamp_start),
    )


def _pairs(fields: tuple[tuple[bytes, bytes], ...], which: str) -> tuple[tuple[str, str], ...]:
    """Headers as text: bytes that are not UTF-8 would reach the recording as unpaired surrogates
    (not JSON text), so such an exchange is refused, naming the header."""
    pairs = []
    for name, value in fields:
        try:
            pairs.append((name.decode("utf-8"), value.decode("utf-8")))
        except UnicodeDecodeError:
            raise BadEntry(f"a {which} header ({name.decode('ascii', 'replace')[:60]}) is not UTF-8 text") from None
    return tuple(pairs)


def _moment(timestamp: float | None) -> datetime | None:
    """When the call started, if the timestamp is a date (else the import's own time is used)."""
    try:
        return datetime.fromtimestamp(timestamp, UTC).replace(tzinfo=None) if timestamp is not None else None
    except (OverflowError, OSError, ValueError, TypeError):
        return None


def _elapsed(start: float | None, end: float | None) -> float | None:
    return duration_ms((end - start) * 1000) if start is not None and end is not None else None
