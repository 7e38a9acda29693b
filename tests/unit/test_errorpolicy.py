"""Which answers are recorded: 2xx and the request's own errors by default, every answer when asked."""

from __future__ import annotations

import pytest

from semula.core.errorpolicy import replayed_note, unrecordable_answer, unrecordable_status


@pytest.mark.parametrize(
    ("status", "by_default"),
    [
        (200, True), (201, True), (204, True),
        (400, True), (404, True), (422, True),  # a property of the request
        (401, False), (403, False),  # a property of the key
        (408, False), (429, False),  # of the moment
        (500, False), (502, False), (503, False), (529, False),  # of the provider's health
        (302, False), (409, False), (413, False),  # a redirect without a Location has nowhere to go
    ],
)
def test_recorded_statuses(status: int, by_default: bool) -> None:
    assert (unrecordable_status(status, record_errors=False) is None) is by_default
    assert unrecordable_status(status, record_errors=True) is None


@pytest.mark.parametrize(
    ("status", "by_default"),
    [
        (301, True), (302, True), (303, True), (307, True), (308, True),  # deterministic: the client follows them
        (304, False),  # an answer to the client's cache validators, which a recording is not keyed by
        (300, False), (305, False), (306, False),
    ],
)
def test_redirects_with_a_location_are_recorded(status: int, by_default: bool) -> None:
    assert (unrecordable_status(status, record_errors=False, location="https://cdn.example/f") is None) is by_default
    assert unrecordable_status(status, record_errors=False, location="") is not None  # nowhere to follow
    assert unrecordable_answer(status, False, b"", False, lambda: False, "/next") == \
        unrecordable_status(status, False, location="/next")


def test_why_a_304_and_a_redirect_without_location_are_not_recorded() -> None:
    assert "cache validators" in (unrecordable_status(304, record_errors=False, location="/x") or "")
    assert "without a Location" in (unrecordable_status(302, record_errors=False) or "")


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


_GEMINI_404 = b'{"error": {"code": 404, "message": "models/x is not found", "status": "NOT_FOUND"}}'


@pytest.mark.parametrize(
    ("status", "record_errors", "complete", "recorded"),
    [
        (200, False, True, True), (200, False, False, False),  # a success is judged as a stream
        (200, True, False, False),  # record_errors records errors, not cut streams
        (404, False, False, True), (404, True, False, True),  # an error by its status, not as a stream
        (400, False, False, True), (503, True, False, True),
        (503, False, False, False), (429, False, True, False),
    ],
)
def test_a_streamed_answer_is_judged_by_its_status_first(status: int, record_errors: bool, complete: bool,
                                                         recorded: bool) -> None:
    why_not = unrecordable_answer(status, record_errors, _GEMINI_404, True, lambda: complete)
    assert (why_not is None) is recorded, why_not
    assert unrecordable_answer(status, record_errors, _GEMINI_404, False, lambda: False) == \
        unrecordable_status(status, record_errors, _GEMINI_404), "an unstreamed answer: the status alone"
