"""Request and trace ids are volatile whatever their alphabet (all digits included); a plain
number the user asks about is not. Checked on the scrubber and on the normalised fingerprint,
in the system prompt, an earlier turn, a tool result and the last user message."""

from __future__ import annotations

import pytest

from semula.core.request.canonical import CanonicalRequest, Message, normalised_fingerprint
from semula.core.request.normalise import scrub_volatile


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("Log line: req_52358902 failed", "Log line: <id> failed"),
        ("Log line: req_8f3a9c21 failed", "Log line: <id> failed"),
        ("see trace-0193456789 for details", "see <id> for details"),
        ("span_20240611 closed", "<id> closed"),
        ("request_id: 12345678", "request_id: <id>"),
        ('{"request_id": "12345678", "ok": true}', '{"request_id": "<id>", "ok": true}'),
        ('{"traceId":98765432}', '{"traceId":<id>}'),
        ("X-Request-Id=98765432", "X-Request-Id=<id>"),
        ("run_id = 20240101", "run_id = <id>"),
    ],
)
def test_ids_are_scrubbed_whatever_their_alphabet(text: str, scrubbed: str) -> None:
    assert scrub_volatile(text) == scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "What is the status of order 52358902?",
        "order_id: 52358902",
        "Invoice order-123456 is overdue",
        "customer_id: 99887766",
        "Please check request ID 12345678 for me",  # prose: the user asks about that id
        "span_id: 7",  # too short to be generated
        "REQUEST_ID: pending",  # no digit: a word, not an id
    ],
)
def test_plain_numbers_and_other_keys_still_count(text: str) -> None:
    assert scrub_volatile(text) == text


def _request(system: str, earlier: str, tool_result: str, last: str) -> CanonicalRequest:
    return CanonicalRequest(
        provider="openai", method="POST", endpoint="/v1/chat/completions", query=(), headers=(),
        model="gpt-4o-mini", system=system,
        messages=(
            Message("user", earlier),
            Message("assistant", "ok"),
            Message("tool", "", ({"type": "tool_result", "content": tool_result},)),
            Message("user", last),
        ),
        tools=(), params={}, stream=False, body=None,
    )


BASE = ("You are a support bot.", "Hello", '{"status": "ok"}', "Summarise the log.")


@pytest.mark.parametrize("where", [0, 1, 2, 3], ids=["system", "earlier turn", "tool result", "last user"])
@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("req_52358902", "req_90112233", True),
        ("trace-01934567", "trace-01999999", True),
        ('{"request_id": 12345678}', '{"request_id": 87654321}', True),
        ("order 52358902", "order 52358903", False),
        ('{"order_id": 12345678}', '{"order_id": 87654321}', False),
    ],
)
def test_normalised_fingerprint_ignores_ids_everywhere(where: int, a: str, b: str, same: bool) -> None:
    sides = []
    for value in (a, b):
        parts = list(BASE)
        parts[where] = f"{parts[where]} {value}"
        sides.append(normalised_fingerprint(_request(*parts)))
    assert (sides[0] == sides[1]) is same
