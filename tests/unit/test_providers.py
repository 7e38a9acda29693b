from __future__ import annotations

import json
import re
from typing import Any

import pytest

from semula.core.request.canonical import Message, request_fingerprint
from semula.providers import (
    ADAPTERS,
    DEFAULT_PROVIDER_HOSTS,
    AdapterError,
    RawRequest,
    Usage,
    adapter_for,
    allow_hosts_regexes,
    host_matches,
)
from semula.providers.sse import split_frames
from entries import TEST_KEY

GOOGLE_KEY = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"


def raw(
    host: str,
    path: str,
    body: Any,
    *,
    query: tuple[tuple[str, str], ...] = (),
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> RawRequest:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return RawRequest(method=method, host=host, path=path, query=query, headers=headers or {}, body=data)


def canonicalise(host: str, path: str, body: Any, **kwargs: Any):
    request = raw(host, path, body, **kwargs)
    return adapter_for(request.host, request.path).canonicalise(request, TEST_KEY)


# ---------------------------------------------------------------- hosts


@pytest.mark.parametrize(
    ("host", "patterns", "expected"),
    [
        ("api.openai.com", DEFAULT_PROVIDER_HOSTS, True),
        ("API.OpenAI.com:443", DEFAULT_PROVIDER_HOSTS, True),
        ("api.openai.com.", DEFAULT_PROVIDER_HOSTS, True),
        ("myres.openai.azure.com", DEFAULT_PROVIDER_HOSTS, True),
        ("a.b.openai.azure.com:8443", DEFAULT_PROVIDER_HOSTS, True),
        ("openai.azure.com", DEFAULT_PROVIDER_HOSTS, False),
        ("evilopenai.azure.com", DEFAULT_PROVIDER_HOSTS, False),
        ("api.openai.com.evil.net", DEFAULT_PROVIDER_HOSTS, False),
        ("xapi.openai.com", DEFAULT_PROVIDER_HOSTS, False),
        ("example.com", DEFAULT_PROVIDER_HOSTS, False),
        ("[::1]:8080", ("::1",), True),
        ("localhost:11434", ("localhost",), True),
    ],
)
def test_host_matches(host: str, patterns: tuple[str, ...], expected: bool) -> None:
    assert host_matches(host, patterns) is expected


def test_default_hosts_are_the_adapters_hosts() -> None:
    expected: list[str] = []
    for adapter in ADAPTERS:
        for pattern in adapter.hosts if adapter.intercepted_by_default else ():  # www.googleapis.com: opt-in
            if pattern not in expected:
                expected.append(pattern)
    assert list(DEFAULT_PROVIDER_HOSTS) == expected


AZURE_CHAT = "/openai/deployments/gpt4o/chat/completions"


@pytest.mark.parametrize(
    ("host", "path", "name"),
    [
        ("api.together.ai", "/v1/chat/completions", "together"),
        ("myres.cognitiveservices.azure.com", AZURE_CHAT, "azure"),
        ("myproj.services.ai.azure.com", AZURE_CHAT, "azure"),
    ],
)
def test_hosts_the_adapters_understand_are_intercepted_by_default(host: str, path: str, name: str) -> None:
    assert adapter_for(host, path).name == name
    assert host_matches(host, DEFAULT_PROVIDER_HOSTS)


@pytest.mark.parametrize(
    ("candidate", "allowed"),
    [
        ("api.openai.com:443", True),
        ("API.OPENAI.COM:443", True),
        ("api.openai.com", True),
        ("res.openai.azure.com:443", True),
        ("api.openai.com.evil.net:443", False),
        ("evilapi.openai.com:443", False),
        ("xopenai.azure.com:443", False),
        ("openai.azure.com:443", False),
        ("api.openaixcom:443", False),
        ("generativelanguage.googleapis.com:443", True),
    ],
)
def test_allow_hosts_regexes_match_like_mitmproxy(candidate: str, allowed: bool) -> None:
    regexes = allow_hosts_regexes(DEFAULT_PROVIDER_HOSTS)
    # mitmproxy's next_layer: re.search(rex, "host:port", re.IGNORECASE)
    assert any(re.search(rex, candidate, re.IGNORECASE) for rex in regexes) is allowed


def test_allow_hosts_regexes_shape() -> None:
    assert allow_hosts_regexes(["api.openai.com"]) == [r"^api\.openai\.com\.?(?::\d+)?$"]


@pytest.mark.parametrize(
    ("host", "path", "name"),
    [
        ("api.openai.com", "/v1/chat/completions", "openai"),
        ("api.openai.com:443", "/v1/responses", "openai"),
        ("api.openai.com", "/v1/embeddings", "openai"),
        ("api.openai.com", "/v1/images/generations", "generic"),
        ("api.anthropic.com", "/v1/messages", "anthropic"),
        ("api.anthropic.com", "/v1/complete", "generic"),
        ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:generateContent", "gemini"),
        ("generativelanguage.googleapis.com", "/v1/models/gemini-2.0-flash:streamGenerateContent", "gemini"),
        ("generativelanguage.googleapis.com", "/v1beta/files", "generic"),
        ("myres.openai.azure.com", "/openai/deployments/gpt4o/chat/completions", "azure"),
        ("api.mistral.ai", "/v1/chat/completions", "mistral"),
        ("api.groq.com", "/openai/v1/chat/completions", "groq"),
        ("openrouter.ai", "/api/v1/chat/completions", "openrouter"),
        ("api.together.xyz", "/v1/chat/completions", "together"),
        ("api.deepseek.com", "/chat/completions", "deepseek"),
        ("api.x.ai", "/v1/chat/completions", "xai"),
        ("api.openai.com.evil.net", "/v1/chat/completions", "generic"),
        ("example.com", "/anything", "generic"),
    ],
)
def test_adapter_for(host: str, path: str, name: str) -> None:
    assert adapter_for(host, path).name == name


# ---------------------------------------------------------------- bodies that cannot be read


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # b"" is no longer here: an empty body is matched by its (empty) bytes (tests/unit/test_rawbody.py)
        (b"  \n", "body is empty"),
        (b"not json", "body is not JSON: Expecting value at line 1 column 1"),
        (b'{"a": ', "body is not JSON"),
        (b"[1, 2]", "body is a JSON list, not an object"),
        (b"null", "body is a JSON null, not an object"),
        (b"\xff\xfe\x00", "body is not"),
    ],
)
@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("api.openai.com", "/v1/chat/completions"),
        ("api.anthropic.com", "/v1/messages"),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:generateContent"),
        ("example.com", "/x"),
    ],
)
def test_unreadable_bodies_raise_adapter_error(host: str, path: str, body: bytes, message: str) -> None:
    with pytest.raises(AdapterError, match=re.escape(message)):
        adapter_for(host, path).canonicalise(raw(host, path, body), TEST_KEY)


@pytest.mark.parametrize(
    ("host", "path", "body"),
    [
        ("api.openai.com", "/v1/chat/completions", {"model": "m", "messages": "hello"}),
        ("api.openai.com", "/v1/chat/completions", {"model": "m", "messages": [42]}),
        ("api.anthropic.com", "/v1/messages", {"model": "m", "messages": [{"content": "no role"}]}),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:generateContent", {"contents": {"parts": []}}),
    ],
)
def test_misshapen_json_objects_keep_the_exact_tier_only(host: str, path: str, body: dict[str, Any]) -> None:
    c = canonicalise(host, path, body)
    assert c.parsed is False
    assert c.messages == ()
    assert c.body == body
    assert c.provider == adapter_for(host, path).name


# ---------------------------------------------------------------- OpenAI


def test_openai_chat_completions() -> None:
    body = {
        "model": "gpt-4o-2024-08-06",
        "messages": [
            {"role": "developer", "content": "You are terse."},
            {"role": "system", "content": [{"type": "text", "text": "Answer in English."}]},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this image?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            ]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_abc123", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"cat\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_abc123", "content": "A tabby cat."},
            {"role": "user", "content": "Thanks!", "name": "alice"},
        ],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "temperature": 0.2,
        "stream": True,
        "stream_options": {"include_usage": True},
        "user": "u-1",
    }
    c = canonicalise("api.openai.com", "/v1/chat/completions", body, headers={"openai-beta": "x", "authorization": "Bearer k"})
    assert (c.provider, c.method, c.endpoint, c.model, c.stream, c.parsed) == (
        "openai", "POST", "/v1/chat/completions", "gpt-4o-2024-08-06", True, True,
    )
    assert c.system == "You are terse.\nAnswer in English."
    assert c.messages == (
        Message("user", "What is in this image?", ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},)),
        Message("assistant", "", (
            {"tool_calls": [{"id": "call_abc123", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"cat\"}"}}]},
        )),
        Message("tool", "A tabby cat.", ({"tool_call_id": "call_abc123"},)),
        Message("user", "Thanks!", ({"name": "alice"},)),
    )
    assert c.tools == ({"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},)
    assert c.params == {"tool_choice": "auto", "temperature": 0.2, "stream_options": {"include_usage": True}}
    assert c.headers == (("openai-beta", "x"),)
    assert "user" not in c.body
    assert c.last_user_text() == "Thanks!"


def test_openai_responses_with_string_input() -> None:
    c = canonicalise("api.openai.com", "/v1/responses", {
        "model": "gpt-4.1", "instructions": "Be brief.", "input": "Tell me a joke.",
        "reasoning": {"effort": "low"}, "store": False,
    })
    assert c.system is None and c.instructions == "Be brief."  # instructions are not a system message
    assert c.messages == (Message("user", "Tell me a joke."),)
    assert c.params == {"reasoning": {"effort": "low"}}
    assert c.stream is False


def test_openai_responses_with_items() -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}
    c = canonicalise("api.openai.com", "/v1/responses", {
        "model": "gpt-4.1",
        "input": [
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}, {"type": "input_image", "image_url": "data:x"}]},
            call,
            {"type": "function_call_output", "call_id": "call_1", "output": "18C and sunny"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 18C."}]},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        "stream": True,
    })
    assert c.system == "Use tools."
    assert [m.role for m in c.messages] == ["user", "assistant", "tool", "assistant"]
    assert c.messages[0] == Message("user", "Weather in Paris?", ({"type": "input_image", "image_url": "data:x"},))
    assert c.messages[1].parts == (call,)
    assert c.messages[2] == Message("tool", "18C and sunny", ({"type": "function_call_output", "call_id": "call_1"},))
    assert c.messages[3].text == "It is 18C."
    assert c.stream is True


@pytest.mark.parametrize(
    ("input_value", "messages"),
    [
        ("hello world", (Message("user", "hello world"),)),
        (["a", "b"], (Message("user", "a"), Message("user", "b"))),
        ([1, 2, 3], (Message("user", "", ([1, 2, 3],)),)),
        ([[1, 2], [3]], (Message("user", "", ([1, 2],)), Message("user", "", ([3],)))),
    ],
)
def test_openai_embeddings(input_value: Any, messages: tuple[Message, ...]) -> None:
    c = canonicalise("api.openai.com", "/v1/embeddings", {
        "model": "text-embedding-3-small", "input": input_value, "dimensions": 256, "stream": True,
    })
    assert c.messages == messages
    assert c.params == {"dimensions": 256}
    assert c.stream is False  # embeddings never stream
    assert c.model == "text-embedding-3-small"


@pytest.mark.parametrize(
    ("host", "path", "provider"),
    [
        ("api.mistral.ai", "/v1/chat/completions", "mistral"),
        ("api.groq.com", "/openai/v1/chat/completions", "groq"),
        ("openrouter.ai", "/api/v1/chat/completions", "openrouter"),
        ("api.together.xyz", "/v1/chat/completions", "together"),
        ("api.deepseek.com", "/chat/completions", "deepseek"),
        ("api.x.ai", "/v1/chat/completions", "xai"),
    ],
)
def test_openai_compatible_hosts(host: str, path: str, provider: str) -> None:
    body = {"model": "some-model", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]}
    c = canonicalise(host, path, body)
    assert (c.provider, c.model, c.system, c.endpoint) == (provider, "some-model", "S", path)
    assert c.messages == (Message("user", "Hi"),)
    other = canonicalise("api.openai.com", "/v1/chat/completions", body)
    assert request_fingerprint(c) != request_fingerprint(other)


def test_azure_model_is_the_deployment_and_api_version_stays() -> None:
    c = canonicalise(
        "myres.openai.azure.com",
        "/openai/deployments/gpt-4o-prod/chat/completions",
        {"messages": [{"role": "user", "content": "Hi"}]},
        query=(("api-version", "2024-10-21"), ("api-key", "secret")),
        headers={"api-key": "secret"},
    )
    assert (c.provider, c.model) == ("azure", "gpt-4o-prod")
    assert c.query == (("api-version", "2024-10-21"),)
    assert c.headers == ()
    newer = canonicalise("myres.openai.azure.com", "/openai/deployments/gpt-4o-prod/chat/completions",
                         {"messages": [{"role": "user", "content": "Hi"}]}, query=(("api-version", "2025-01-01"),))
    assert request_fingerprint(newer) != request_fingerprint(c)


# ---------------------------------------------------------------- Anthropic


def test_anthropic_messages() -> None:
    body = {
        "model": "claude-3-7-sonnet-20250219",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a librarian.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Find 'Dune'."},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": "toolu_01A", "name": "search", "input": {"q": "Dune"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "1 copy", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                {"type": "text", "text": "Reserve it."},
            ]},
        ],
        "tools": [{"name": "search", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "metadata": {"user_id": "u1"},
        "stream": True,
    }
    c = canonicalise("api.anthropic.com", "/v1/messages", body, headers={
        "x-api-key": "sk-ant-secret", "anthropic-version": "2023-06-01", "anthropic-beta": "b2, a1",
    })
    assert (c.provider, c.model, c.system, c.stream) == ("anthropic", "claude-3-7-sonnet-20250219", "You are a librarian.", True)
    assert c.headers == (("anthropic-beta", "a1,b2"), ("anthropic-version", "2023-06-01"))
    assert c.messages == (
        Message("user", "Find 'Dune'."),
        Message("assistant", "Searching.", ({"type": "tool_use", "id": "toolu_01A", "name": "search", "input": {"q": "Dune"}},)),
        Message("user", "Reserve it.", (
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "1 copy"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
        )),
    )
    assert c.tools == ({"name": "search", "input_schema": {"type": "object"}},)
    assert c.params == {"max_tokens": 1024, "thinking": {"type": "enabled", "budget_tokens": 2000}}
    assert "metadata" not in c.body


def test_anthropic_version_header_changes_the_fingerprint() -> None:
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}
    a = canonicalise("api.anthropic.com", "/v1/messages", body, headers={"anthropic-version": "2023-06-01"})
    b = canonicalise("api.anthropic.com", "/v1/messages", body, headers={"anthropic-version": "2023-01-01"})
    assert request_fingerprint(a) != request_fingerprint(b)
    assert a.system is None


# ---------------------------------------------------------------- Gemini


def test_gemini_generate_content() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris?"}, {"inlineData": {"mimeType": "image/png", "data": "AAA"}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 18}}}]},
            {"parts": [{"text": "And tomorrow?"}]},
        ],
        "systemInstruction": {"parts": [{"text": "You are a weather bot."}, {"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [{"name": "get_weather"}]}],
        "generationConfig": {"temperature": 0.1, "maxOutputTokens": 800},
        "safetySettings": [],
    }
    c = canonicalise(
        "generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:streamGenerateContent", body,
        query=(("key", GOOGLE_KEY), ("alt", "sse")), headers={"x-goog-api-key": GOOGLE_KEY},
    )
    assert (c.provider, c.model, c.stream) == ("gemini", "gemini-2.0-flash", True)
    assert c.query == (("alt", "sse"),)
    assert c.system == "You are a weather bot.\nBe brief."
    assert [m.role for m in c.messages] == ["user", "assistant", "user", "user"]
    assert c.messages[0] == Message("user", "Weather in Paris?", ({"inlineData": {"mimeType": "image/png", "data": "AAA"}},))
    assert c.messages[1].parts == ({"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},)
    assert c.last_user_text() == "And tomorrow?"
    assert c.tools == ({"functionDeclarations": [{"name": "get_weather"}]},)
    assert c.params == {"generationConfig": {"temperature": 0.1, "maxOutputTokens": 800}, "safetySettings": []}
    assert GOOGLE_KEY not in json.dumps(c.to_json())


def test_gemini_key_query_param_does_not_change_the_fingerprint() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    path = "/v1beta/models/gemini-2.0-flash:generateContent"
    a = canonicalise("generativelanguage.googleapis.com", path, body, query=(("key", GOOGLE_KEY),))
    b = canonicalise("generativelanguage.googleapis.com", path, body, query=(("key", "AIza" + "x" * 35),))
    c = canonicalise("generativelanguage.googleapis.com", path, body)
    assert request_fingerprint(a) == request_fingerprint(b) == request_fingerprint(c)
    assert a.stream is False


@pytest.mark.parametrize(
    ("path", "model", "stream"),
    [
        ("/v1beta/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash", False),
        ("/v1/models/gemini-1.5-pro:streamGenerateContent", "gemini-1.5-pro", True),
        ("/v1beta/tunedModels/my-tune:generateContent", "tunedModels/my-tune", False),
    ],
)
def test_gemini_model_and_stream_come_from_the_path(path: str, model: str, stream: bool) -> None:
    c = canonicalise("generativelanguage.googleapis.com", path, {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]})
    assert (c.model, c.stream) == (model, stream)


def test_gemini_snake_case_system_instruction_and_embed_content() -> None:
    c = canonicalise("generativelanguage.googleapis.com", "/v1beta/models/g:generateContent", {
        "system_instruction": {"parts": [{"text": "Be kind."}]}, "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
    })
    assert c.system == "Be kind."
    e = canonicalise("generativelanguage.googleapis.com", "/v1beta/models/text-embedding-004:embedContent", {
        "model": "models/text-embedding-004", "content": {"parts": [{"text": "Hello"}]}, "taskType": "RETRIEVAL_QUERY",
    })
    assert (e.model, e.messages, e.params) == ("text-embedding-004", (Message("user", "Hello"),), {"taskType": "RETRIEVAL_QUERY"})


# ---------------------------------------------------------------- generic


def test_generic_keeps_the_body_for_the_exact_tier() -> None:
    body = {"model": "dall-e-3", "prompt": "a cat", "user": "u"}
    c = canonicalise("api.openai.com", "/v1/images/generations", body)
    assert (c.provider, c.parsed, c.model, c.messages) == ("generic", False, "dall-e-3", ())
    assert c.body == {"model": "dall-e-3", "prompt": "a cat"}


# ---------------------------------------------------------------- streams

OPENAI_CHAT_STREAM = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}\n\n'
    b"data: [DONE]\n\n"
)
OPENAI_RESPONSES_STREAM = (
    b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_1","status":"in_progress"}}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_1","status":"completed",'
    b'"usage":{"input_tokens":20,"output_tokens":5,"total_tokens":25}}}\n\n'
)
ANTHROPIC_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":25,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
GEMINI_STREAM = (
    b'data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":8}}\r\n\r\n'
    b'data: {"candidates":[{"content":{"parts":[{"text":"lo"}],"role":"model"},"finishReason":"STOP"}],'
    b'"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2,"totalTokenCount":10}}\r\n\r\n'
)


def _cut(body: bytes, frames_to_drop: int) -> list[bytes]:
    frames = split_frames(body)
    return frames[: len(frames) - frames_to_drop]


@pytest.mark.parametrize(
    ("host", "path", "frames", "complete"),
    [
        ("api.openai.com", "/v1/chat/completions", split_frames(OPENAI_CHAT_STREAM), True),
        ("api.openai.com", "/v1/chat/completions", _cut(OPENAI_CHAT_STREAM, 1), False),
        ("api.openai.com", "/v1/chat/completions", [b'data: {"error":{"message":"overloaded"}}'], False),
        ("api.openai.com", "/v1/responses", split_frames(OPENAI_RESPONSES_STREAM), True),
        ("api.openai.com", "/v1/responses", _cut(OPENAI_RESPONSES_STREAM, 1), False),
        ("api.openai.com", "/v1/responses", [b'event: response.failed\ndata: {"type":"response.failed"}'], False),
        ("api.openai.com", "/v1/responses", [b'event: response.incomplete\ndata: {"type":"response.incomplete"}'], False),
        ("api.groq.com", "/openai/v1/chat/completions", split_frames(OPENAI_CHAT_STREAM), True),
        ("api.anthropic.com", "/v1/messages", split_frames(ANTHROPIC_STREAM), True),
        ("api.anthropic.com", "/v1/messages", _cut(ANTHROPIC_STREAM, 1), False),
        ("api.anthropic.com", "/v1/messages", split_frames(ANTHROPIC_STREAM) + [b"event: ping\ndata: {}"], True),
        ("api.anthropic.com", "/v1/messages", [b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}'], False),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent", split_frames(GEMINI_STREAM), True),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent", _cut(GEMINI_STREAM, 1), False),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent",
         [b'data: {"promptFeedback":{"blockReason":"SAFETY"}}'], True),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent",
         [b'[{"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}]}]'], True),  # without alt=sse
        ("example.com", "/x", split_frames(ANTHROPIC_STREAM), True),
        ("example.com", "/x", [b"data: partial"], False),
        ("api.openai.com", "/v1/chat/completions", [], False),
        ("api.anthropic.com", "/v1/messages", [], False),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent", [b"garbage"], False),
    ],
)
def test_stream_complete(host: str, path: str, frames: list[bytes], complete: bool) -> None:
    assert adapter_for(host, path).stream_complete(frames) is complete


@pytest.mark.parametrize(
    ("host", "path", "body", "usage"),
    [
        ("api.openai.com", "/v1/chat/completions",
         {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}}, Usage(10, 4)),
        ("api.openai.com", "/v1/responses", {"output": [], "usage": {"input_tokens": 7, "output_tokens": 2}}, Usage(7, 2)),
        ("api.openai.com", "/v1/embeddings", {"data": [], "usage": {"prompt_tokens": 5, "total_tokens": 5}}, Usage(5, None)),
        ("api.anthropic.com", "/v1/messages", {"content": [], "usage": {"input_tokens": 9, "output_tokens": 3}}, Usage(9, 3)),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:generateContent",
         {"candidates": [], "usageMetadata": {"promptTokenCount": 6, "candidatesTokenCount": 8}}, Usage(6, 8)),
        ("example.com", "/x", {"usage": {"prompt_tokens": 1, "completion_tokens": 2}}, Usage(1, 2)),
        ("api.openai.com", "/v1/chat/completions", {"usage": {"prompt_tokens": "x", "completion_tokens": True}}, Usage()),
    ],
)
def test_usage_from_body(host: str, path: str, body: dict[str, Any], usage: Usage) -> None:
    assert adapter_for(host, path).usage_from_body(json.dumps(body).encode()) == usage


@pytest.mark.parametrize(
    ("host", "path", "stream", "usage"),
    [
        ("api.openai.com", "/v1/chat/completions", OPENAI_CHAT_STREAM, Usage(12, 3)),
        ("api.openai.com", "/v1/responses", OPENAI_RESPONSES_STREAM, Usage(20, 5)),
        ("api.anthropic.com", "/v1/messages", ANTHROPIC_STREAM, Usage(25, 15)),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent", GEMINI_STREAM, Usage(8, 2)),
        ("example.com", "/x", ANTHROPIC_STREAM, Usage(25, 15)),
    ],
)
def test_usage_from_frames(host: str, path: str, stream: bytes, usage: Usage) -> None:
    assert adapter_for(host, path).usage_from_frames(split_frames(stream)) == usage


@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("api.openai.com", "/v1/chat/completions"),
        ("api.anthropic.com", "/v1/messages"),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:generateContent"),
        ("example.com", "/x"),
    ],
)
@pytest.mark.parametrize("junk", [b"", b"not json", b"[1,2]", b"\xff\xfe", b'{"usage": [1]}', b'{"usageMetadata": 5}'])
def test_usage_never_raises(host: str, path: str, junk: bytes) -> None:
    adapter = adapter_for(host, path)
    assert adapter.usage_from_body(junk) == Usage()
    assert adapter.usage_from_frames([junk, b"data: " + junk]) == Usage()


@pytest.mark.parametrize(
    ("host", "path", "expected"),
    [
        ("api.openai.com", "/v1/chat/completions",
         {"error": {"message": "no recording", "type": "invalid_request_error", "param": None, "code": "semula_no_recording"}}),
        ("api.mistral.ai", "/v1/chat/completions",
         {"error": {"message": "no recording", "type": "invalid_request_error", "param": None, "code": "semula_no_recording"}}),
        ("api.anthropic.com", "/v1/messages",
         {"type": "error", "error": {"type": "invalid_request_error", "message": "no recording"}}),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:generateContent",
         {"error": {"code": 404, "message": "no recording", "status": "FAILED_PRECONDITION"}}),
        ("example.com", "/x",
         {"error": {"message": "no recording", "type": "invalid_request_error", "param": None, "code": "semula_no_recording"}}),
    ],
)
def test_error_body_uses_the_provider_shape(host: str, path: str, expected: dict[str, Any]) -> None:
    assert json.loads(adapter_for(host, path).error_body(404, "no recording")) == expected


def test_error_body_code() -> None:
    body = json.loads(adapter_for("api.openai.com", "/v1/chat/completions").error_body(409, "m", code="semula_review"))
    assert body["error"]["code"] == "semula_review"


def test_unparsed_gemini_stream_still_knows_it_streams() -> None:
    c = canonicalise("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent", {"contents": "oops"})
    assert (c.parsed, c.stream, c.model) == (False, True, None)
