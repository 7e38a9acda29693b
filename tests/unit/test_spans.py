"""A call-log row as a span (calllog/spans.py): name, attributes, error, and the semula_otel setting. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from semula.calllog.schema import CallRow
from semula.calllog.spans import (
    SpanFacts, otel_enabled, otel_problem, shown_endpoint, span_attributes, span_error, span_name, traces_endpoint,
)

CHAT = dict(ts=datetime(2026, 1, 1, tzinfo=UTC), project="default", provider="openai", host="api.openai.com",
            method="POST", path="/v1/chat/completions", model="gpt-4o-mini", mode="auto")
FACTS = SpanFacts(end_ns=1)


def row(**changes: object) -> CallRow:
    return CallRow(**{**CHAT, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(("changes", "facts", "name", "operation"), [
    ({}, FACTS, "chat gpt-4o-mini", "chat"),
    ({"path": "/v1/responses"}, FACTS, "chat gpt-4o-mini", "chat"),
    ({"provider": "anthropic", "path": "/v1/messages", "model": "claude"}, FACTS, "chat claude", "chat"),
    ({"path": "/v1/embeddings", "model": "te-3"}, FACTS, "embeddings te-3", "embeddings"),
    ({"provider": "gemini", "path": "/v1beta/models/g:streamGenerateContent", "model": "g"}, FACTS,
     "generate_content g", "generate_content"),
    ({"path": "/v1/completions"}, FACTS, "text_completion gpt-4o-mini", "text_completion"),
    ({"path": "/v1/files", "model": None}, FACTS, "http", "http"),
    ({"provider": "mcp", "model": "tools/call search"}, SpanFacts(end_ns=1, mcp_method="tools/call"),
     "tools/call", "execute_tool"),
    ({"provider": "mcp", "model": "tools/list"}, SpanFacts(end_ns=1, mcp_method="tools/list"),
     "tools/list", "tools/list"),
])
def test_span_name_and_operation(changes: dict[str, object], facts: SpanFacts, name: str, operation: str) -> None:
    assert span_name(row(**changes), facts) == name
    assert span_attributes(row(**changes), facts)["gen_ai.operation.name"] == operation


def test_a_hit_carries_the_genai_and_semula_attributes_and_the_recorded_usage() -> None:
    hit = row(decision="hit", tier="exact", score=1.0, entry_id=7, status=200, recorded_prompt_tokens=12,
              recorded_completion_tokens=5, run_id="r1", fast=True)
    facts = SpanFacts(end_ns=1, recording="default/openai/v1-chat-completions/*-0123456789ab.json",
                      response_model="gpt-4o-mini-2024-07-18")
    assert span_attributes(hit, facts) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5,
        "server.address": "api.openai.com", "http.request.method": "POST", "http.response.status_code": 200,
        "semula.decision": "hit", "semula.refused": False, "semula.tier": "exact", "semula.score": 1.0,
        "semula.entry_id": 7, "semula.recording": "default/openai/v1-chat-completions/*-0123456789ab.json",
        "semula.mode": "auto", "semula.project": "default", "semula.provider": "openai", "semula.replayed": True,
        "semula.fast": True, "semula.run_id": "r1",
    }


def test_a_live_call_uses_its_own_usage_and_is_not_replayed() -> None:
    attrs = span_attributes(row(decision="miss", prompt_tokens=3, completion_tokens=4, recorded_prompt_tokens=9,
                                status=200, recorded=True), FACTS)
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (3, 4)
    assert attrs["semula.replayed"] is False and attrs["semula.recorded"] is True


def test_no_text_of_the_call_unless_the_facts_carry_it() -> None:
    attrs = span_attributes(row(decision="miss", error="upstream said no", bypass_reason=None), FACTS)
    assert not {"gen_ai.input.messages", "gen_ai.output.messages", "semula.error"} & set(attrs)
    assert all(value is not None for value in attrs.values())
    with_text = span_attributes(row(), SpanFacts(end_ns=1, input_text="[]", output_text="[]"))
    assert with_text["gen_ai.input.messages"] == with_text["gen_ai.output.messages"] == "[]"


def test_mcp_calls_name_their_server_and_method() -> None:
    attrs = span_attributes(row(provider="mcp", model="tools/call search", path="/mcp"),
                            SpanFacts(end_ns=1, mcp_server="tools.example:8443/mcp", mcp_method="tools/call"))
    assert attrs["semula.mcp.server"] == "tools.example:8443/mcp" and attrs["semula.mcp.method"] == "tools/call"
    assert attrs["mcp.method.name"] == "tools/call" and "gen_ai.request.model" not in attrs


@pytest.mark.parametrize(("changes", "refused", "error"), [
    ({"decision": "hit", "status": 200}, False, None),
    ({"decision": "miss", "status": 599}, True, "refused"),
    ({"decision": "error", "status": 502}, False, "error"),
    ({"decision": "miss", "status": 429}, False, "429"),
    ({"decision": "miss", "status": None}, False, "no_response"),
    ({"decision": "miss", "status": None, "error": "cut"}, False, "error"),
    ({"decision": "bypass", "status": 204}, False, None),
])
def test_span_error(changes: dict[str, object], refused: bool, error: str | None) -> None:
    assert span_error(row(**changes), SpanFacts(end_ns=1, refused=refused)) == error


@pytest.mark.parametrize(("setting", "environ", "problem"), [
    ("off", {}, None),
    ("on", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, None),
    ("on", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, None),
    ("on", {}, "neither is set"),
    ("on", {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, "neither is set"),
    ("http://collector:4318", {}, None),
    ("ftp://collector", {}, "expected off, on"),
    ("yes", {}, "expected off, on"),
    ("http://", {}, "expected off, on"),
    ("\x00\n" * 50, {}, "expected off, on"),
])
def test_the_option_is_checked(setting: str, environ: dict[str, str], problem: str | None) -> None:
    found = otel_problem(setting, environ)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_the_sdks_own_switch_turns_spans_off() -> None:
    assert otel_enabled("on", {}) and not otel_enabled("off", {})
    assert not otel_enabled("on", {"OTEL_SDK_DISABLED": "TRUE"})


@pytest.mark.parametrize(("setting", "endpoint"), [
    ("on", None), ("http://c:4318", "http://c:4318/v1/traces"), ("http://c:4318/", "http://c:4318/v1/traces"),
    ("https://c/otlp/v1/traces", "https://c/otlp/v1/traces"),
])
def test_traces_endpoint(setting: str, endpoint: str | None) -> None:
    assert traces_endpoint(setting) == endpoint


def test_a_shown_endpoint_drops_credentials_and_paths() -> None:
    assert shown_endpoint("https://user:pw@collector:4318/v1/traces?token=x") == "https://collector:4318"
    assert "pw" not in shown_endpoint("http://user:pw@/x")
