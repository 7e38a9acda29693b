"""Which answers are recorded: 2xx and the request's own errors by default, every answer when asked."""

from __future__ import annotations

import pytest

from semula.core.errorpolicy import replayed_note, unrecordable_status


@pytest.mark.parametrize(
    ("status", "by_default"),
    [
        (200, True), (201, True), (204, True),
        (400, True), (404, True), (422, True),  # a property of the request
        (401, False), (403, False),  # a property of the key
        (408, False), (429, False),  # of the moment
        (500, False), (502, False), (503, False), (529, False),  # of the provider's health
        (302, False), (409, False), (413, False),
    ],
)
def test_recorded_statuses(status: int, by_default: bool) -> None:
    assert (unrecordable_status(status, record_errors=False) is None) is by_default
    assert unrecordable_status(status, record_errors=True) is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", '
        b'"status": "INVALID_ARGUMENT", "details": [{"reason": "API_KEY_INVALID"}]}}',
        b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}',
        b'{"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}',
    ],
    ids=["gemini", "openai", "anthropic"],
)
def test_a_request_error_about_the_key_is_not_recorded(body: bytes) -> None:
    reason = unrecordable_status(400, record_errors=False, body=body)
    assert reason is not None and "about the API key" in reason
    assert unrecordable_status(400, record_errors=True, body=body) is None


def test_a_request_error_about_the_request_is_recorded() -> None:
    body = b'{"error": {"message": "Invalid \'temperature\'", "code": "decimal_below_min_value"}}'
    assert unrecordable_status(400, record_errors=False, body=body) is None


def test_the_reason_names_the_status_and_the_option() -> None:
    reason = unrecordable_status(429, record_errors=False)
    assert reason is not None and reason.startswith("not recorded: upstream answered 429")
    assert "semula_record_errors=true" in reason


@pytest.mark.parametrize(("status", "note"), [(200, None), (399, None), (400, "replayed a recorded 400 answer"),
                                              (404, "replayed a recorded 404 answer"),
                                              (500, "replayed a recorded 500 answer")])
def test_replayed_note(status: int, note: str | None) -> None:
    assert replayed_note(status) == note
