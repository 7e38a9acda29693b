"""Parameters written differently with the same meaning share the normalised fingerprint."""

from __future__ import annotations

import json

import pytest

from entries import TEST_KEY
from semula.core.request.canonical import context_fingerprint, normalised_fingerprint, request_fingerprint
from semula.core.request.params import canonical_params
from semula.providers import adapter_for
from semula.providers.base import RawRequest

PATHS = {"openai": ("api.openai.com", "/v1/chat/completions"),
         "responses": ("api.openai.com", "/v1/responses"),
         "groq": ("api.groq.com", "/openai/v1/chat/completions"),
         "anthropic": ("api.anthropic.com", "/v1/messages"),
         "gemini": ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:generateContent"),
         "vertex-gemini": ("us-central1-aiplatform.googleapis.com", "/v1/projects/p1/locations/us-central1/"
                           "publishers/google/models/gemini-2.0-flash:generateContent"),
         "vertex-anthropic": ("us-east5-aiplatform.googleapis.com", "/v1/projects/p1/locations/us-east5/"
                              "publishers/anthropic/models/claude-sonnet-4:rawPredict")}


def request(kind: str, text: str = "Name three rivers in Spain", **params):
    host, path = PATHS[kind]
    if kind in ("gemini", "vertex-gemini"):
        body = {"contents": [{"role": "user", "parts": [{"text": text}]}], **params}
    elif kind == "responses":
        body = {"model": "gpt-4o-mini", "input": text, **params}
    else:
        body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": text}], **params}
    return adapter_for(host, path).canonicalise(RawRequest("POST", host, path, (), {}, json.dumps(body).encode()), TEST_KEY)


SAME = [
    ("openai", {"temperature": 0}, {"temperature": 0.0}),
    ("anthropic", {"temperature": 0.0}, {"temperature": 0}),
    ("openai", {"max_tokens": 100.0}, {"max_tokens": 100}),
    ("openai", {"n": 1}, {}),
    ("openai", {"top_p": 1, "presence_penalty": 0, "frequency_penalty": 0.0}, {}),
    ("openai", {"temperature": 1.0}, {}),
    ("openai", {"logprobs": False, "parallel_tool_calls": True}, {}),
    ("responses", {"temperature": 1, "top_p": 1.0}, {}),
    ("anthropic", {"temperature": 1.0}, {}),
    ("gemini", {"generationConfig": {"temperature": 0}}, {"generationConfig": {"temperature": 0.0}}),
    ("gemini", {"generationConfig": {"maxOutputTokens": 50, "topP": 0.9}},
     {"generation_config": {"max_output_tokens": 50, "top_p": 0.9}}),
    ("gemini", {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
     {"generation_config": {"thinking_config": {"thinking_budget": 0}}}),
    ("gemini", {"toolConfig": {"functionCallingConfig": {"mode": "ANY"}}},
     {"tool_config": {"function_calling_config": {"mode": "ANY"}}}),
    ("gemini", {"generationConfig": {"candidateCount": 1, "temperature": 0}}, {"generationConfig": {"temperature": 0}}),
    ("gemini", {"generationConfig": {"candidateCount": 1}}, {}),
    ("openai", {"service_tier": "auto"}, {}),
    ("openai", {"response_format": {"type": "text"}}, {}),
    ("openai", {"tool_choice": "none"}, {}),  # no tools: "none" is the default
    ("openai", {"temperature": None, "seed": None}, {}),  # null: left unset
    ("anthropic", {"temperature": None}, {}),
    ("responses", {"truncation": "disabled", "service_tier": "auto"}, {}),
    ("gemini", {"generationConfig": {"responseMimeType": "text/plain"}}, {}),
    ("gemini", {"generation_config": {"response_mime_type": "text/plain", "temperature": 0}},
     {"generationConfig": {"temperature": 0}}),
    # Vertex serves Gemini's and Anthropic's bodies: their rules apply
    ("vertex-gemini", {"generationConfig": {"maxOutputTokens": 50}}, {"generation_config": {"max_output_tokens": 50}}),
    ("vertex-gemini", {"generationConfig": {"candidateCount": 1}}, {}),
    ("vertex-anthropic", {"temperature": 1.0}, {}),
    ("vertex-anthropic", {"temperature": 0.0}, {"temperature": 0}),
]

DIFFERENT = [
    ("openai", {"temperature": 0}, {"temperature": 0.7}),
    ("openai", {"n": 1}, {"n": 2}),
    ("openai", {"n": True}, {}),  # a bool is not the number 1
    ("openai", {"temperature": 0}, {}),  # 0 is not the default (1)
    ("groq", {"temperature": 1}, {}),  # an OpenAI-compatible host documents its own defaults
    ("groq", {"n": 1}, {}),
    ("anthropic", {"temperature": 0.5}, {}),
    ("anthropic", {"top_p": 1}, {}),  # no documented default
    ("vertex-anthropic", {"temperature": 0.5}, {}),
    ("openai", {"service_tier": "flex"}, {}),
    ("responses", {"truncation": "auto"}, {}),
    ("openai", {"response_format": {"type": "json_object"}}, {}),
    ("openai", {"tool_choice": "required"}, {}),
    ("openai", {"temperature": 0}, {"temperature": None}),
    ("gemini", {"generationConfig": {"responseMimeType": "application/json"}}, {}),
    ("vertex-gemini", {"generationConfig": {"temperature": 1}}, {}),
    ("gemini", {"generationConfig": {"temperature": 1}}, {}),  # model-dependent default
    ("gemini", {"generationConfig": {"maxOutputTokens": 50}}, {"generation_config": {"max_output_tokens": 20}}),
    ("gemini", {"generationConfig": {"candidateCount": 1}}, {"generationConfig": {"candidateCount": 2}}),
    # user-named keys inside a response schema are not field names: never renamed
    ("gemini", {"generationConfig": {"responseSchema": {"type": "OBJECT", "properties": {"first_name": {"type": "STRING"}}}}},
     {"generationConfig": {"responseSchema": {"type": "OBJECT", "properties": {"firstName": {"type": "STRING"}}}}}),
]


@pytest.mark.parametrize("kind, stored, incoming", SAME)
def test_equal_parameters_share_the_normalised_and_context_fingerprints(kind, stored, incoming):
    a, b = request(kind, **stored), request(kind, **incoming)
    assert normalised_fingerprint(a) == normalised_fingerprint(b)
    assert context_fingerprint(a) == context_fingerprint(b)
    assert request_fingerprint(a) != request_fingerprint(b), "the exact tier stays faithful to the body"


@pytest.mark.parametrize("kind, stored, incoming", DIFFERENT)
def test_different_parameters_keep_different_fingerprints(kind, stored, incoming):
    a, b = request(kind, **stored), request(kind, **incoming)
    assert normalised_fingerprint(a) != normalised_fingerprint(b)
    assert context_fingerprint(a) != context_fingerprint(b)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_content_as_a_string_or_a_single_text_block_is_the_same(kind):
    text = "Convert 5 km to miles"
    a, b = request(kind, text), request(kind, [{"type": "text", "text": text}])
    assert normalised_fingerprint(a) == normalised_fingerprint(b)


def test_ignore_params_applies_to_either_spelling():
    a = request("gemini", generation_config={"temperature": 0.2})
    b = request("gemini", generationConfig={"temperature": 0.9})
    assert normalised_fingerprint(a, (), ("generationConfig",)) == normalised_fingerprint(b, (), ("generationConfig",))
    assert normalised_fingerprint(a, (), ("generation_config",)) == normalised_fingerprint(b, (), ("generation_config",))


@pytest.mark.parametrize("params, expected", [
    ({"generation_config": {"temperature": 0.0}, "generationConfig": {"temperature": 0}},
     {"generationConfig": {"temperature": 0}}),
    # both spellings with different values: left as sent (the API would refuse it anyway)
    ({"generation_config": {"temperature": 0.5}, "generationConfig": {"temperature": 0}},
     {"generation_config": {"temperature": 0.5}, "generationConfig": {"temperature": 0}}),
    ({"safety_settings": [{"category": "X", "threshold": "BLOCK_NONE"}]},
     {"safetySettings": [{"category": "X", "threshold": "BLOCK_NONE"}]}),
])
def test_gemini_field_names(params, expected):
    assert canonical_params("gemini", "/v1beta/models/m:generateContent", params) == expected


def test_numbers_are_canonical_at_any_depth_and_floats_stay_floats():
    assert canonical_params("mistral", "/v1/chat/completions", {"a": [1.0, {"b": 2.50}], "c": 1e300, "d": True}) == \
        {"a": [1, {"b": 2.5}], "c": 1e300, "d": True}


def test_the_responses_text_format_at_its_default() -> None:
    assert canonical_params("openai", "/v1/responses", {"text": {"format": {"type": "text"}}}) == {}
    schema = {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}
    assert canonical_params("openai", "/v1/responses", {"text": schema}) == {"text": schema}


def test_tool_choice_at_its_default_for_the_tools_declared() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert canonical_params("openai", "/v1/chat/completions", {"tool_choice": "auto"}, tools=True) == {}
    assert canonical_params("openai", "/v1/chat/completions", {"tool_choice": "auto"}, tools=False) == {
        "tool_choice": "auto"}  # without tools "auto" is not the default ("none" is)
    assert canonical_params("anthropic", "/v1/messages", {"tool_choice": {"type": "auto"}}, tools=True) == {}
    assert canonical_params("anthropic", "/v1/messages", {"tool_choice": {"type": "any"}}, tools=True) == {
        "tool_choice": {"type": "any"}}
    first = request("openai", tools=tools, tool_choice="auto")
    assert normalised_fingerprint(first) == normalised_fingerprint(request("openai", tools=tools))


def chat_with(model: str | None, **params):
    host, path = PATHS["openai"]
    body = {**({"model": model} if model else {}), "messages": [{"role": "user", "content": "Noem drie rivieren"}], **params}
    return adapter_for(host, path).canonicalise(RawRequest("POST", host, path, (), {}, json.dumps(body).encode()), TEST_KEY)


@pytest.mark.parametrize(("model", "same"), [
    ("gpt-4o-mini", True), ("gpt-4o-2024-08-06", True), ("gpt-4.1-nano", True), ("gpt-4", True),
    ("gpt-3.5-turbo", True), ("chatgpt-4o-latest", True), ("ft:gpt-4o-mini-2024-07-18:acme::x1", True),
    # reasoning models answer max_tokens with a 400: never the same request
    ("o1", False), ("o1-mini", False), ("o3-mini", False), ("o4-mini", False), ("gpt-5", False), ("gpt-5-mini", False),
    # a model the rule does not know, or none (an Azure deployment names it in the path)
    ("gpt-40", False), ("my-finetune", False), (None, False),
])
def test_max_tokens_is_max_completion_tokens_on_non_reasoning_chat_models(model, same):
    a, b = chat_with(model, max_tokens=200), chat_with(model, max_completion_tokens=200)
    assert (normalised_fingerprint(a) == normalised_fingerprint(b)) is same
    assert (context_fingerprint(a) == context_fingerprint(b)) is same
    assert normalised_fingerprint(a) != normalised_fingerprint(chat_with(model, max_completion_tokens=300))


def test_both_limit_names_in_one_request_stay_as_sent():
    both = chat_with("gpt-4o-mini", max_tokens=100, max_completion_tokens=200)
    assert normalised_fingerprint(both) != normalised_fingerprint(chat_with("gpt-4o-mini", max_completion_tokens=200))
    assert canonical_params("openai", "/v1/completions", {"max_tokens": 5}, model="gpt-4o") == {"max_tokens": 5}
    assert canonical_params("groq", "/openai/v1/chat/completions", {"max_tokens": 5}, model="gpt-4o") == {"max_tokens": 5}
