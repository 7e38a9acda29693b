"""The bypass rules: which requests skip the cache (or only its near-match tiers), and the reason each gives."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from entries import chat
from semula.core.bypass import NEAR_RULES, NO_CACHE_HEADER, near_bypass, no_cache_header, review_only
from semula.core.request.canonical import CanonicalRequest
from semula.core.decision import Bypass
from semula.core.settings import ProjectSettings
from semula.providers import RawRequest, adapter_for
from entries import TEST_KEY

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
NO_CACHE = Bypass("no_cache_header", "header x-semula-no-cache")


def gemini(generation_config: dict[str, Any]) -> CanonicalRequest:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": generation_config}
    raw = RawRequest("POST", "generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:generateContent",
                     (), {}, json.dumps(body).encode())
    return adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({NO_CACHE_HEADER: "1"}, NO_CACHE),
        ({NO_CACHE_HEADER: ""}, NO_CACHE),  # present is enough, whatever the value
        ({"content-type": "application/json", NO_CACHE_HEADER: "true"}, NO_CACHE),
        ({}, None),
        ({"x-semula-project": "p"}, None),
        ({"x-semula-no-cache-please": "1"}, None),
    ],
)
def test_no_cache_header(headers: dict[str, str], expected: Bypass | None) -> None:
    assert no_cache_header(headers) == expected


def test_no_cache_header_skips_the_whole_cache() -> None:
    assert no_cache_header({NO_CACHE_HEADER: "1"}).scope == "all"


def test_the_near_rules_are_named_in_order() -> None:
    assert [rule.__name__ for rule in NEAR_RULES] == ["review_only", "temperature_above", "tools_present"]


DEFAULT = ProjectSettings()
TOOLS_OFF = ProjectSettings(bypass_tools=False)
TOOLS_ON = ProjectSettings(bypass_tools=True)


@pytest.mark.parametrize(
    ("request_", "settings", "expected"),
    [
        # temperature: only strictly above the project's bypass_temperature (0.3 by default)
        (chat("hi"), DEFAULT, None),
        (chat("hi", temperature=0), DEFAULT, None),
        (chat("hi", temperature=0.3), DEFAULT, None),
        (chat("hi", temperature=0.7), DEFAULT, Bypass("temperature_above", "temperature 0.7 > 0.3", "near")),
        (chat("hi", temperature=1), DEFAULT, Bypass("temperature_above", "temperature 1 > 0.3", "near")),
        (chat("hi", temperature=0.7), ProjectSettings(bypass_temperature=0.8), None),
        (chat("hi", temperature=0.9), ProjectSettings(bypass_temperature=0.8),
         Bypass("temperature_above", "temperature 0.9 > 0.8", "near")),
        (chat("hi", temperature="0.9"), DEFAULT, None),  # not a number: no rule applies
        # Gemini keeps it in generationConfig
        (gemini({"temperature": 0.9}), DEFAULT, Bypass("temperature_above", "temperature 0.9 > 0.3", "near")),
        (gemini({"temperature": 0.2}), DEFAULT, None),
        (gemini({"topK": 3}), DEFAULT, None),
        # tools: only when the project turns bypass_tools on
        (chat("hi", tools=TOOLS), TOOLS_OFF, None),
        (chat("hi", tools=TOOLS), TOOLS_ON,
         Bypass("tools_present", "request offers tools and bypass_tools is on", "near")),
        (chat("hi"), TOOLS_ON, None),
        # the first rule that applies gives the reason
        (chat("hi", temperature=0.9, tools=TOOLS), TOOLS_ON, Bypass("temperature_above", "temperature 0.9 > 0.3", "near")),
        (chat("hi", temperature=0.1, tools=TOOLS), TOOLS_ON,
         Bypass("tools_present", "request offers tools and bypass_tools is on", "near")),
    ],
)
def test_near_bypass(request_: CanonicalRequest, settings: ProjectSettings, expected: Bypass | None) -> None:
    assert near_bypass(request_, settings) == expected


def test_near_bypass_without_params() -> None:
    assert near_bypass(replace(chat("hi"), params=None), ProjectSettings(bypass_tools=True)) is None


@pytest.mark.parametrize("rule", NEAR_RULES, ids=lambda rule: rule.__name__)
def test_each_near_rule_only_skips_the_near_match_tiers(rule) -> None:
    request = chat("hi", temperature=2, tools=TOOLS)
    if rule is review_only:  # the providers that declare it: MCP's tool calls
        request = replace(request, provider="mcp")
    found = rule(request, ProjectSettings(bypass_tools=True))
    assert found is not None and found.rule == rule.__name__ and found.scope == "near" and found.reason


def test_a_provider_that_declares_review_only_never_near_serves_and_others_are_untouched() -> None:
    found = near_bypass(replace(chat("hi"), provider="mcp"), DEFAULT)
    assert found is not None and found.rule == "review_only" and "never served" in found.reason
    assert found.scope == "near"  # exact, normalised and alias still serve
    assert review_only(chat("hi"), DEFAULT) is None
