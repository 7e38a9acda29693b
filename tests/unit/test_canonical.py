from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

from semula.core.request.canonical import (
    FINGERPRINT_VERSION,
    NEVER_MATTERS,
    CanonicalRequest,
    Message,
    canonical_json,
    context_fingerprint,
    normalised_fingerprint,
    request_fingerprint,
)
from semula.providers import RawRequest, adapter_for
from entries import TEST_KEY

CHAT = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "You are the chatbot for Greenfield Public Library."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Please reserve a copy of 'The Hobbit' for me."},
    ],
    "temperature": 0,
    "max_tokens": 800,
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "reserve_book",
                "description": "Reserve a copy of a book by title.",
                "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
            },
        }
    ],
}


def canonical(body: dict[str, Any], *, raw_bytes: bytes | None = None, headers: dict[str, str] | None = None) -> CanonicalRequest:
    raw = RawRequest(
        method="POST",
        host="api.openai.com",
        path="/v1/chat/completions",
        query=(),
        headers=headers or {},
        body=raw_bytes if raw_bytes is not None else json.dumps(body).encode(),
    )
    return adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)


def edited(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(CHAT)
    edit(body)
    return body


def _reorder(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reorder(v) for v in value]
    return value


@pytest.mark.parametrize(
    ("label", "raw_bytes"),
    [
        ("reversed key order everywhere", json.dumps(_reorder(CHAT)).encode()),
        ("indented", json.dumps(CHAT, indent=4).encode()),
        ("compact", json.dumps(CHAT, separators=(",", ":")).encode()),
        ("non-ascii escaped differently", json.dumps(CHAT, ensure_ascii=True).encode()),
    ],
)
def test_exact_fingerprint_ignores_key_order_and_whitespace(label: str, raw_bytes: bytes) -> None:
    assert request_fingerprint(canonical(CHAT, raw_bytes=raw_bytes)) == request_fingerprint(canonical(CHAT)), label


@pytest.mark.parametrize(
    ("label", "edit"),
    [
        ("user", lambda b: b.update(user="alice")),
        ("metadata", lambda b: b.update(metadata={"run": "42"})),
        ("safety_identifier", lambda b: b.update(safety_identifier="hash")),
        ("prompt_cache_key", lambda b: b.update(prompt_cache_key="k")),
        ("store", lambda b: b.update(store=True)),
    ],
)
def test_never_matters_fields_change_no_fingerprint(label: str, edit: Callable[[dict[str, Any]], None]) -> None:
    base, other = canonical(CHAT), canonical(edited(edit))
    assert request_fingerprint(base) == request_fingerprint(other), label
    assert normalised_fingerprint(base) == normalised_fingerprint(other), label
    assert label in NEVER_MATTERS
    assert label not in other.params and label not in other.body


@pytest.mark.parametrize(
    ("label", "edit"),
    [
        ("model", lambda b: b.update(model="gpt-4o")),
        ("temperature", lambda b: b.update(temperature=0.7)),
        ("max_tokens", lambda b: b.update(max_tokens=801)),
        ("seed", lambda b: b.update(seed=7)),
        ("stop", lambda b: b.update(stop=["\n"])),
        ("tool_choice", lambda b: b.update(tool_choice="none")),
        ("response_format", lambda b: b.update(response_format={"type": "json_object"})),
        ("stream", lambda b: b.update(stream=True)),
        ("tool renamed", lambda b: b["tools"][0]["function"].update(name="reserve")),
        ("tool added", lambda b: b["tools"].append({"type": "function", "function": {"name": "search"}})),
        ("tools removed", lambda b: b.pop("tools")),
        ("system prompt", lambda b: b["messages"][0].update(content="You are a pirate.")),
        ("earlier turn", lambda b: b["messages"][1].update(content="Hey")),
        ("last user text", lambda b: b["messages"][3].update(content="Please reserve 'Dune' for me.")),
        ("role", lambda b: b["messages"][2].update(role="user")),
    ],
)
def test_answer_changing_fields_change_both_fingerprints(label: str, edit: Callable[[dict[str, Any]], None]) -> None:
    base, other = canonical(CHAT), canonical(edited(edit))
    assert request_fingerprint(base) != request_fingerprint(other), label
    assert normalised_fingerprint(base) != normalised_fingerprint(other), label


@pytest.mark.parametrize(
    ("label", "edit"),
    [
        ("case and punctuation", lambda b: b["messages"][3].update(content="PLEASE RESERVE A COPY OF 'The Hobbit' FOR ME")),
        ("curly quotes", lambda b: b["messages"][3].update(content="Please reserve a copy of \u2018The Hobbit\u2019 for me.")),
        ("whitespace in the system prompt", lambda b: b["messages"][0].update(content="  You are the chatbot for\nGreenfield Public Library. ")),
        ("tool schema key order", lambda b: b["tools"][0]["function"].update(parameters={"required": ["title"], "properties": {"title": {"type": "string"}}, "type": "object"})),
        ("content as parts", lambda b: b["messages"][3].update(content=[{"type": "text", "text": "Please reserve a copy of 'The Hobbit' for me."}])),
    ],
)
def test_form_only_changes_keep_the_normalised_fingerprint(label: str, edit: Callable[[dict[str, Any]], None]) -> None:
    base, other = canonical(CHAT), canonical(edited(edit))
    assert normalised_fingerprint(base) == normalised_fingerprint(other), label


def test_authorization_header_and_keys_never_reach_the_canonical_request() -> None:
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    body = edited(lambda b: b["messages"][3].update(content=f"My key is {key}"))
    c = canonical(body, headers={"authorization": f"Bearer {key}", "openai-beta": "assistants=v2"})
    text = json.dumps(c.to_json())
    assert key not in text
    assert c.headers == (("openai-beta", "assistants=v2"),)
    assert c.last_user_text() == "My key is " + TEST_KEY.tag(key)


def test_ignore_params_and_scrub_patterns() -> None:
    base = canonical(CHAT)
    other = canonical(edited(lambda b: b.update(temperature=0.9)))
    assert normalised_fingerprint(base) != normalised_fingerprint(other)
    assert normalised_fingerprint(base, ignore_params=["temperature"]) == normalised_fingerprint(other, ignore_params=["temperature"])
    assert request_fingerprint(base) != request_fingerprint(other)  # the exact tier is never loosened

    a = canonical(edited(lambda b: b["messages"][3].update(content="Order #1234: reserve it")))
    b = canonical(edited(lambda b: b["messages"][3].update(content="Order #9876: reserve it")))
    assert normalised_fingerprint(a) != normalised_fingerprint(b)
    assert normalised_fingerprint(a, scrub_patterns=[r"#\d+"]) == normalised_fingerprint(b, scrub_patterns=[r"#\d+"])


def test_volatile_ids_in_tool_call_parts_are_scrubbed() -> None:
    def with_call(call_id: str, arguments: str) -> dict[str, Any]:
        return edited(
            lambda b: b["messages"].extend(
                [
                    {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "reserve_book", "arguments": arguments}}]},
                    {"role": "tool", "tool_call_id": call_id, "content": '{"ok": true}'},
                ]
            )
        )

    a = canonical(with_call("call_Ab12Cd34Ef56", '{"title": "The Hobbit"}'))
    b = canonical(with_call("call_Zz98Yy76Xx54", '{\n  "title": "The Hobbit"\n}'))
    c = canonical(with_call("call_Zz98Yy76Xx54", '{"title": "Dune"}'))
    assert normalised_fingerprint(a) == normalised_fingerprint(b)
    assert normalised_fingerprint(a) != normalised_fingerprint(c)


@pytest.mark.parametrize(
    ("label", "edit", "same_context"),
    [
        ("last user text differs", lambda b: b["messages"][3].update(content="Reserve Dune."), True),
        ("earlier turn differs", lambda b: b["messages"][1].update(content="Hey there"), False),
        ("system differs", lambda b: b["messages"][0].update(content="Be brief."), False),
        ("params differ", lambda b: b.update(temperature=1), False),
        ("tools differ", lambda b: b.pop("tools"), False),
    ],
)
def test_context_fingerprint_leaves_out_only_the_last_user_text(label: str, edit: Callable[[dict[str, Any]], None], same_context: bool) -> None:
    base, other = canonical(CHAT), canonical(edited(edit))
    assert (context_fingerprint(base) == context_fingerprint(other)) is same_context, label
    assert context_fingerprint(base).startswith("cfp2:")


def test_context_fingerprint_tail_n() -> None:
    base = canonical(CHAT)
    other = canonical(edited(lambda b: b["messages"][1].update(content="Hey there")))
    assert context_fingerprint(base) != context_fingerprint(other)
    assert context_fingerprint(base, tail_n=2) == context_fingerprint(other, tail_n=2)
    assert context_fingerprint(base, tail_n=3) != context_fingerprint(other, tail_n=3)


def test_fingerprint_prefixes() -> None:
    c = canonical(CHAT)
    assert FINGERPRINT_VERSION == "fp2"
    assert request_fingerprint(c).startswith("fp2:") and len(request_fingerprint(c)) == 4 + 64
    assert normalised_fingerprint(c).startswith("nfp2:")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": [1, 2]}, '{"a":[1,2],"b":1}'),
        ({"é": "ü"}, '{"é":"ü"}'),
        ([None, True, 1.5], "[null,true,1.5]"),
    ],
)
def test_canonical_json_contract(value: Any, expected: str) -> None:
    assert canonical_json(value) == expected


def test_to_json_round_trips_exactly() -> None:
    c = canonical(edited(lambda b: b["messages"].append({"role": "tool", "tool_call_id": "call_1", "content": "done"})))
    stored = json.loads(json.dumps(c.to_json()))
    again = CanonicalRequest.from_json(stored)
    assert again == c
    assert request_fingerprint(again) == request_fingerprint(c)
    assert normalised_fingerprint(again) == normalised_fingerprint(c)


@pytest.mark.parametrize(
    ("messages", "last_text", "last_user_text"),
    [
        ((Message("user", "a"), Message("assistant", "b")), "b", "a"),
        ((Message("user", "a"), Message("assistant", "", ({"tool_calls": []},))), "a", "a"),
        ((Message("user", "a"), Message("user", "", ({"image": 1},))), "a", "a"),
        ((Message("assistant", "b"),), "b", ""),
        ((), "", ""),
    ],
)
def test_last_text(messages: tuple[Message, ...], last_text: str, last_user_text: str) -> None:
    c = CanonicalRequest(
        provider="openai", method="POST", endpoint="/v1/chat/completions", query=(), headers=(),
        model="m", system=None, messages=messages, tools=(), params={}, stream=False, body={},
    )
    assert c.last_text() == last_text
    assert c.last_user_text() == last_user_text


def test_unparsed_requests_differ_by_body_in_the_normalised_fingerprint() -> None:
    def generic(body: dict[str, Any]) -> CanonicalRequest:
        raw = RawRequest("POST", "api.openai.com", "/v1/images/generations", (), {}, json.dumps(body).encode())
        return adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)

    a, b = generic({"prompt": "a cat"}), generic({"prompt": "a dog"})
    assert not a.parsed
    assert normalised_fingerprint(a) != normalised_fingerprint(b)
    assert request_fingerprint(a) != request_fingerprint(b)
