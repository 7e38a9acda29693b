"""HAR 1.2 files (browser dev tools, Charles, Proxyman, mitmproxy's HAR export): `log.entries[]`.

A request body is `postData.text`; a response body is `content.text`, base64 when
`content.encoding` says so. Most tools store the decoded text under the original content-encoding
header: `interaction.decoded` takes a body that does not decode as decoded.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from semula.recordings.importers.interaction import (BadEntry, Interaction, LeftOut, Unreadable, body_bytes,
                                                    duration_ms, each_entry, header_pairs)


def read(path: Path, data: bytes) -> Iterator[Interaction | Unreadable]:
    try:
        har = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        yield Unreadable(str(path), f"not a HAR file (JSON): {e}")
        return
    entries = har.get("log", {}).get("entries") if isinstance(har, dict) and isinstance(har.get("log"), dict) else None
    if not isinstance(entries, list):
        yield Unreadable(str(path), "not a HAR file: no log.entries list")
        return
    yield from each_entry(str(path), entries, _interaction)


def _interaction(source: str, entry: Any) -> Interaction:
    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict) or not isinstance(
            entry.get("response"), dict):
        raise BadEntry("not a HAR entry: no request and response objects")
    request, response = entry["request"], entry["response"]
    method, url, status = request.get("method"), request.get("url"), response.get("status")
    if not isinstance(method, str) or not isinstance(url, str):
        raise BadEntry("the request has no method or url")
    if status == 0 and not isinstance(status, bool):
        raise LeftOut("the call failed (status 0): no answer to import")
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise BadEntry(f"the response status {status!r:.40} is not an HTTP status (0: the call failed)")
    post = request.get("postData") or {}
    content = response.get("content") or {}
    if not isinstance(post, dict) or not isinstance(content, dict):
        raise BadEntry("postData or content is not an object")
    return Interaction(
        source=source, method=method.upper(), url=url,
        request_headers=header_pairs(request.get("headers")),
        request_body=_body(post.get("text"), post.get("encoding"), "postData.text"),
        status=status, response_headers=header_pairs(response.get("headers")),
        response_body=_body(content.get("text"), content.get("encoding"), "content.text"),
        upstream_ms=duration_ms(entry.get("time")),
        started_at=_started(entry.get("startedDateTime")),
    )


def _body(text: Any, encoding: Any, what: str) -> bytes:
    if encoding == "base64":
        if not isinstance(text, str):
            raise BadEntry(f"{what} is not base64 text")
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise BadEntry(f"{what} is not valid base64") from None
    return body_bytes(text, what)


def _started(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
    except (AttributeError, TypeError, ValueError, OverflowError):  # year 1 at +01:00 is before year 1 in UTC
        return None
