"""Where a recording says it went: a provider's own registered host and a plain path, or the file is refused."""

from __future__ import annotations

import pytest

from semula.recordings.validate import endpoint_problem, host_problem


@pytest.mark.parametrize(
    ("endpoint", "ok"),
    [
        ("/v1/chat/completions", True),
        ("/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict", True),
        ("/v1beta/models/gemini-2.0-flash:streamGenerateContent", True),
        ("@localhost:8443/v1/messages", False), ("//localhost:8443/x", False), ("https://evil.test/x", False),
        ("/\\localhost/x", False), ("/x\r\nHost: evil", False), ("/x\x00", False), ("v1/chat", False), ("", False),
    ],
)
def test_an_endpoint_is_a_plain_path(endpoint: str, ok: bool) -> None:
    assert (endpoint_problem(endpoint) is None) is ok, endpoint_problem(endpoint)


@pytest.mark.parametrize(
    ("provider", "host", "ok"),
    [
        ("openai", "api.openai.com", True), ("openai", "eu.api.openai.com", True),
        ("anthropic", "api.anthropic.com", True), ("gemini", "generativelanguage.googleapis.com", True),
        ("azure", "my-res.openai.azure.com", True), ("bedrock", "bedrock-runtime.eu-west-1.amazonaws.com", True),
        ("generic", "localhost:8443", True), ("generic", "cdn.example.com", True),  # a host the user added
        ("openai", "127.0.0.1:8443", False), ("anthropic", "localhost:8443", False),
        ("openai", "api.openai.com:8443", False), ("openai", "api.openai.com.evil.test", False),
        ("openai", "api.anthropic.com", False), ("openai", "user@api.openai.com", False), ("openai", 7, False),
    ],
)
def test_a_provider_recording_names_one_of_its_providers_hosts(provider: str, host: object, ok: bool) -> None:
    assert (host_problem(provider, host) is None) is ok, host_problem(provider, host)
