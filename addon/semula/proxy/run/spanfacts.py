"""What a call's span says beyond its call-log row, worked out on the span thread from what `finish` handed over.

`finish` (`proxy/call/calllog.py`) only takes references (`CallEnd`: the row, the recording served, the
parsed request, the answer's bytes); reading the recording's file name, the answered model and, when the
user opted in, the prompt and answer text is done here, off the event loop. Every text passes semula's
redaction; the file name's prompt slug is a wildcard unless the text may be exported.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

from mitmproxy import http

from semula.calllog.schema import CallRow
from semula.calllog.spans import SpanFacts
from semula.core.provenance import answered_model
from semula.core.redact import redact_json, redact_text
from semula.core.request.canonical import CanonicalRequest
from semula.store.types import Entry

CONTENT_CHARS = 16_000  # a span attribute's text is cut here: backends refuse or truncate larger ones
# `<prompt slug>-<12 hex of the fingerprint>[-n].json` (recordings/format.py `relative_path`)
_FILE_NAME = re.compile(r"^(?P<folder>.*/)[^/]*-(?P<digest>[0-9a-f]{12}(?:-\d+)?\.json)$")


class CallEnd(NamedTuple):
    """A finished call as `finish` saw it: references only, so a hit pays for nothing but the enqueue (a
    NamedTuple: immutable, and made in a third of a frozen dataclass's time)."""

    row: CallRow
    run_id: str
    end_ns: int
    refused: bool
    served: Entry | None  # the recording served
    canonical: CanonicalRequest | None  # the parsed request (None on the fast path)
    recorded: bool
    mcp_server: str | None
    response: http.Response | None  # a live answer, not streamed (its body is decoded on the span thread)
    chunks: tuple[bytes, ...]  # a live streamed answer's chunks (a served one is `served.body`)
    streamed: bool

    def answer(self) -> bytes | None:
        """The answer's bytes: the recording served, the live stream's chunks, or the live response's body."""
        if self.served is not None:
            return self.served.body
        if self.chunks:
            return b"".join(self.chunks)
        return self.response.get_content(strict=False) if self.response is not None else None


def span_facts(end: CallEnd, *, folder: bool, content: bool) -> SpanFacts:
    """The facts of `end`'s span; `folder`: a recordings folder is in use; `content`: semula_otel_content."""
    body = end.answer()
    model = answered_model(body, end.streamed) if body else None
    return SpanFacts(
        end_ns=end.end_ns, run_id=end.run_id, refused=end.refused,
        recording=recording_file(end, content) if folder else None,
        mcp_server=end.mcp_server, mcp_method=mcp_method(end),
        response_model=redact_text(model) if model else None,
        input_text=input_text(end.canonical) if content and end.canonical is not None else None,
        output_text=output_text(body, end.streamed) if content and body else None,
    )


def recording_file(end: CallEnd, content: bool) -> str | None:
    """The recording's file relative to the folder; without `content` its prompt slug is `*`, a glob that
    still finds the file (its fingerprint's digest names it)."""
    from semula.recordings.folder import relpath_of
    from semula.recordings.format import RecordingFileError, request_path

    try:
        if end.served is not None:
            path = relpath_of(end.served)
        elif end.recorded and end.canonical is not None and end.row.request_fp and end.row.project:
            path = request_path(end.row.project, end.canonical, end.row.request_fp)
        else:
            return None
    except (RecordingFileError, KeyError, TypeError, ValueError):
        return None
    if content:
        return redact_text(path)
    match = _FILE_NAME.match(path)
    return f"{match['folder']}*-{match['digest']}" if match else None


def mcp_method(end: CallEnd) -> str | None:
    if end.mcp_server is None:
        return None
    body = end.canonical.body if end.canonical is not None else None
    if isinstance(body, dict) and isinstance(body.get("method"), str):
        return str(body["method"])
    return (end.row.model or "").split(" ", 1)[0] or None  # the fast path: the row's "method target"


def input_text(canonical: CanonicalRequest) -> str:
    """The prompt as the GenAI conventions' `gen_ai.input.messages`: roles and text parts, redacted."""
    turns = [("system", canonical.system)] if canonical.system else []
    turns += [(m.role, m.text) for m in canonical.messages]
    messages = [{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in turns]
    return _capped(json.dumps(redact_json(messages), ensure_ascii=False))


def output_text(body: bytes, streamed: bool) -> str | None:
    """The answer's text (a stream's assembled) as `gen_ai.output.messages`, redacted."""
    from semula.recordings.format import body_fields

    try:
        text = body_fields(body, streamed).get("answer_text")
    except (ValueError, UnicodeDecodeError):
        return None
    if not text:
        return None
    message = [{"role": "assistant", "parts": [{"type": "text", "content": redact_text(text)}]}]
    return _capped(json.dumps(message, ensure_ascii=False))


def _capped(text: str) -> str:
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…"
