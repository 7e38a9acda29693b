"""mitmproxy flow files (`mitmdump -w`, mitmweb's save): read with mitmproxy's own `FlowReader`.

Only HTTP flows with a response are exchanges; a flow whose response body was streamed through
(`stream_large_bodies`, an SSE stream) has no body kept, and is reported as such.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from semula.recordings.importers.interaction import Interaction, Unreadable


def read(path: Path, data: bytes) -> Iterator[Interaction | Unreadable]:
    from mitmproxy import http
    from mitmproxy.exceptions import FlowReadException
    from mitmproxy.io import FlowReader

    n = 0
    try:
        for flow in FlowReader(io.BytesIO(data)).stream():
            n += 1
            source = f"{path.name}#{n}"
            if not isinstance(flow, http.HTTPFlow):
                yield Unreadable(source, f"a {type(flow).__name__}, not an HTTP flow")
                continue
            request, response = flow.request, flow.response
            if response is None:
                yield Unreadable(source, f"no response ({flow.error.msg if flow.error else 'none arrived'})")
                continue
            if response.raw_content is None:
                yield Unreadable(source, "the response body was streamed through and not kept")
                continue
            yield Interaction(
                source=source, method=request.method.upper(), url=request.pretty_url,
                request_headers=_pairs(request.headers.fields), request_body=request.raw_content or b"",
                status=response.status_code, response_headers=_pairs(response.headers.fields),
                response_body=response.raw_content,
                upstream_ms=_elapsed(request.timestamp_start, response.timestamp_end),
                started_at=datetime.fromtimestamp(request.timestamp_start, UTC).replace(tzinfo=None),
            )
    except (FlowReadException, ValueError, TypeError, KeyError) as e:
        yield Unreadable(f"{path.name}#{n + 1}", f"not a mitmproxy flow file: {e}")


def _pairs(fields: tuple[tuple[bytes, bytes], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape")) for k, v in fields)


def _elapsed(start: float | None, end: float | None) -> float | None:
    return (end - start) * 1000 if start is not None and end is not None and end >= start else None
