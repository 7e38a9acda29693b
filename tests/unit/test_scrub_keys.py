"""`scrub_keys`: values of named JSON keys are scrubbed in the normalised view, wherever they appear."""

from __future__ import annotations

import json

import pytest
from entries import TEST_KEY, new_entry

from semula.core.request.canonical import context_fingerprint, normalised_fingerprint, request_fingerprint
from semula.core.request.scrubkeys import PLACEHOLDER, scrub_keys_in_text, scrub_keys_in_value
from semula.core.settings import FINGERPRINT_KEYS, ProjectSettings, SettingsError, parse_setting
from semula.engine.engine import Engine
from semula.providers import adapter_for
from semula.providers.base import RawRequest
from semula.store.duckdb.store import DuckDBStore

KEYS = ("created_at", "etag")
HOSTS = {"openai": ("api.openai.com", "/v1/chat/completions"), "anthropic": ("api.anthropic.com", "/v1/messages"),
         "gemini": ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:generateContent")}


def canonical(provider: str, body: dict):
    host, path = HOSTS[provider]
    return adapter_for(host, path).canonicalise(RawRequest("POST", host, path, (), {}, json.dumps(body).encode()), TEST_KEY)


def openai_tool_flow(stamp: str, result_extra: dict | None = None):
    result = {"order": "A-17", "status": "shipped", "created_at": stamp, **(result_extra or {})}
    return canonical("openai", {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": "Where is my order A-17?"},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "lookup", "arguments": json.dumps({"order": "A-17", "created_at": stamp})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(result)},
        {"role": "user", "content": "And when will it arrive?"}]})


def anthropic_tool_flow(stamp: str, status: str = "shipped"):
    return canonical("anthropic", {"model": "claude", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Where is my order A-17?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                           "input": {"order": "A-17", "etag": stamp}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": json.dumps({"status": status, "etag": stamp})}]}]})


def gemini_tool_flow(stamp: str):
    return canonical("gemini", {"contents": [
        {"role": "user", "parts": [{"text": "Where is my order A-17?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {"order": "A-17"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {
            "status": "shipped", "meta": {"created_at": stamp}}}}]}]})


def pasted(stamp: str, count: int = 3):
    record = {"id": 7, "items": count, "created_at": stamp}
    return canonical("openai", {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": f"Summarise this record:\n{json.dumps(record, indent=2)}\nBe brief."}]})


# Stamps that the built-in volatile scrubbing does not recognise (no time of day, no id shape).
SAME = [
    ("openai tool args and result", openai_tool_flow("run 41"), openai_tool_flow("run 42")),
    ("anthropic tool input and result", anthropic_tool_flow("W/abc"), anthropic_tool_flow("W/xyz")),
    ("gemini functionResponse", gemini_tool_flow("day 3"), gemini_tool_flow("day 4")),
    ("pasted JSON", pasted("monday"), pasted("tuesday")),
    ("a number value", pasted(1700000000), pasted(1700000999)),
]
DIFFERENT = [
    ("other keys still count", openai_tool_flow("run 41"), openai_tool_flow("run 41", {"status": "lost"})),
    ("anthropic result status", anthropic_tool_flow("W/abc"), anthropic_tool_flow("W/abc", "lost")),
    ("pasted JSON, other key", pasted("monday", 3), pasted("monday", 4)),
]


@pytest.mark.parametrize("name, a, b", SAME, ids=[s[0] for s in SAME])
def test_scrubbed_keys_do_not_change_the_normalised_view(name, a, b):
    assert normalised_fingerprint(a) != normalised_fingerprint(b), "without the setting they differ"
    assert normalised_fingerprint(a, (), (), KEYS) == normalised_fingerprint(b, (), (), KEYS)
    assert context_fingerprint(a, scrub_keys=KEYS) == context_fingerprint(b, scrub_keys=KEYS)
    assert request_fingerprint(a) != request_fingerprint(b), "the exact tier keeps the values"


@pytest.mark.parametrize("name, a, b", DIFFERENT, ids=[d[0] for d in DIFFERENT])
def test_other_values_still_count(name, a, b):
    assert normalised_fingerprint(a, (), (), KEYS) != normalised_fingerprint(b, (), (), KEYS)


@pytest.mark.parametrize("text, expected", [
    ('{"created_at": "x", "a": 1}', json.dumps({"created_at": PLACEHOLDER, "a": 1})),
    ('see [{"etag": 1}] and {"etag": 2}.', f'see [{{"etag": "{PLACEHOLDER}"}}] and {{"etag": "{PLACEHOLDER}"}}.'),
    ('no json "created_at" here {broken', 'no json "created_at" here {broken'),
    ("created_at: 5", "created_at: 5"),  # not JSON: left alone
    ('{"a": {"b": [{"created_at": null}]}}', json.dumps({"a": {"b": [{"created_at": PLACEHOLDER}]}})),
    ('{"nested": "{\\"etag\\": 3}"}', json.dumps({"nested": json.dumps({"etag": PLACEHOLDER})})),
])
def test_scrub_keys_in_text(text, expected):
    assert scrub_keys_in_text(text, frozenset(KEYS)) == expected


def test_scrub_keys_in_value_leaves_other_types():
    assert scrub_keys_in_value((1, None, True, {"etag": {"deep": 1}}), {"etag"}) == [1, None, True, {"etag": PLACEHOLDER}]


@pytest.mark.parametrize("value, expected", [
    ("created_at, etag", ("created_at", "etag")),
    ('["created_at", "created_at"]', ("created_at",)),
    ("", ()),
    ([], ()),
])
def test_parse(value, expected):
    assert parse_setting("scrub_keys", value) == expected


@pytest.mark.parametrize("value", ['[1, 2]', '{"a": 1}', '[" padded "]', '[""]'])
def test_parse_refuses(value):
    with pytest.raises(SettingsError):
        parse_setting("scrub_keys", value)


def test_a_fingerprint_input():
    assert "scrub_keys" in FINGERPRINT_KEYS
    assert ProjectSettings(scrub_keys=("a",)).fingerprint_inputs[2] == ("a",)


def test_config_set_refingerprints_the_project(tmp_path):
    engine = Engine.open(DuckDBStore.open(tmp_path))
    try:
        entry = engine.record(new_entry(openai_tool_flow("run 41")))
        incoming = openai_tool_flow("run 42")
        fps = lambda: (request_fingerprint(incoming),  # noqa: E731
                       normalised_fingerprint(incoming, *engine.settings_for("p").fingerprint_inputs))
        assert engine.match("p", *fps()) is None
        result = engine.recordings.config_set("p", "scrub_keys", "created_at")
        assert result["refingerprinted"] == 1 and result["value"] == ["created_at"]
        match = engine.match("p", *fps())
        assert match is not None and (match.tier, match.entry_id) == ("normalised", entry)
    finally:
        engine.close()
