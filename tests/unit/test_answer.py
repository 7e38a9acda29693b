"""A hit's response (`proxy.call.answer`): the same response `Response.make` builds, its per-entry work done once."""

from __future__ import annotations

import pytest
from mitmproxy import http

from semula.core.decision import Decision
from semula.proxy.call.answer import answer_response
from semula.proxy.call.headers import semula_headers
from semula.store.types import Entry

BODY = b'{"choices": [{"message": {"content": "hi \\u00e9"}}]}'
HIT = Decision("hit", "serve", tier="exact", entry_id=3, score=1.0)


def entry(headers: list[tuple[str, str]], status: int = 200, body: bytes = BODY) -> Entry:
    return Entry(project="p", provider="openai", host="api.openai.com", method="POST",
                 endpoint="/v1/chat/completions", model="gpt-4o", request_fp="fp2:a", normalised_fp="nfp2:a",
                 canonical={}, last_text="hi", status=status, headers=headers, body=body, streamed=False,
                 prompt_tokens=1, completion_tokens=2, upstream_ms=3.0, id=3)


@pytest.mark.parametrize("headers, status", [
    ([("content-type", "application/json")], 200),
    ([("content-type", "application/json"), ("content-length", "9999")], 200),  # a stale length is replaced
    ([("Content-Length", "1"), ("x-request-id", "r"), ("content-length", "2")], 200),  # repeated: one is kept
    ([("content-type", "application/json"), ("x-ratelimit", "é")], 429),
    ([("content-type", "application/json"), ("content-encoding", "gzip")], 200),  # mitmproxy encodes the body
    ([("transfer-encoding", "chunked")], 200),
    ([], 599),  # no reason phrase known
])
def test_the_answer_is_what_response_make_builds(headers, status):
    recorded = entry(headers, status)
    made = http.Response.make(status, BODY, http.Headers(
        [(k.encode(), v.encode()) for k, v in headers] + [(k.encode(), v.encode()) for k, v in semula_headers(HIT).items()]))
    for _ in range(2):  # the second time from what the first prepared
        answer = answer_response(recorded, HIT)
        assert (answer.status_code, answer.reason, answer.http_version) == (made.status_code, made.reason, made.http_version)
        assert answer.raw_content == made.raw_content and answer.content == BODY
        assert sorted(answer.headers.fields) == sorted(made.headers.fields)
