"""How many content parts a message had, and where one ended, survive joining its texts.

Every adapter joins a message's text parts into one text. ``""``, ``["", ""]`` and ``[]`` join to
the same text, so did ``"a\\nb"`` and ``["a", "b"]``: a real suite was served another request's
answer. A string and one text block are the same request, and their fingerprints stay as before.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from semula.core.request.canonical import (
    CanonicalRequest,
    content_layout,
    context_fingerprint,
    normalised_fingerprint,
)
from semula.providers import RawRequest, adapter_for
from entries import TEST_KEY

HOSTS = {
    "openai": ("api.openai.com", "/v1/chat/completions"),
    "responses": ("api.openai.com", "/v1/responses"),
    "anthropic": ("api.anthropic.com", "/v1/messages"),
    "gemini": ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:generateContent"),
    "bedrock": ("bedrock-runtime.us-east-1.amazonaws.com", "/model/amazon.nova-lite-v1%3A0/converse"),
}


def canonical(kind: str, body: dict[str, Any]) -> CanonicalRequest:
    host, path = HOSTS[kind]
    raw = RawRequest("POST", host, path, (), {"content-type": "application/json"}, json.dumps(body).encode())
    request = adapter_for(host, path).canonicalise(raw, TEST_KEY)
    assert request.parsed
    return request


def oa_text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def openai(content: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}


def responses(content: Any) -> dict[str, Any]:
    return {"model": "gpt-4.1-mini", "input": [{"role": "user", "content": content}]}


def anthropic(content: Any) -> dict[str, Any]:
    return {"model": "claude-3-5-haiku-latest", "max_tokens": 64, "messages": [{"role": "user", "content": content}]}


def gemini(parts: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": parts}]}


def bedrock(blocks: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": blocks}]}


def g_text(value: str) -> dict[str, str]:
    return {"text": value}


def r_text(value: str) -> dict[str, str]:
    return {"type": "input_text", "text": value}


IMAGE = {"type": "image_url", "image_url": {"url": "https://example.test/cat.png"}}
CHART = {"type": "image", "source": {"type": "url", "url": "https://example.test/chart.png"}}

# (label, provider, body builder, one side, the other side, same normalised fingerprint?)
CASES: list[tuple[str, str, Callable[[Any], dict[str, Any]], Any, Any, bool]] = [
    ("openai: empty string vs two empty parts", "openai", openai, "", [oa_text(""), oa_text("")], False),
    ("openai: empty string vs no parts", "openai", openai, "", [], False),
    ("openai: a newline vs two parts", "openai", openai, "Lista\nde compras", [oa_text("Lista"), oa_text("de compras")], False),
    ("openai: a word moved between parts", "openai", openai, [oa_text("Zähle bis"), oa_text("drei")],
     [oa_text("Zähle"), oa_text("bis drei")], False),
    ("openai: an empty part moved", "openai", openai, [oa_text("Résume ceci"), oa_text("")],
     [oa_text(""), oa_text("Résume ceci")], False),
    ("openai: text around an image moved", "openai", openai, [oa_text("Qual é"), IMAGE, oa_text("?")],
     [oa_text("Qual é"), oa_text("?"), IMAGE], False),
    ("openai: a string vs one block", "openai", openai, "Đếm đến ba", [oa_text("Đếm đến ba")], True),
    ("openai: parts with format-only edits", "openai", openai, [oa_text("Hitung  sampai"), oa_text("tiga")],
     [oa_text("hitung sampai"), oa_text(" tiga ")], True),
    ("responses: empty string vs two empty parts", "responses", responses, "", [r_text(""), r_text("")], False),
    ("anthropic: empty string vs two empty blocks", "anthropic", anthropic, "", [oa_text(""), oa_text("")], False),
    ("anthropic: a newline vs two blocks", "anthropic", anthropic, "Sumar\n2 y 3", [oa_text("Sumar"), oa_text("2 y 3")], False),
    ("anthropic: a string vs one block", "anthropic", anthropic, "Sumar 2 y 3", [oa_text("Sumar 2 y 3")], True),
    ("anthropic: an image then text vs one text", "anthropic", anthropic, [CHART, oa_text("Describe")],
     [CHART, oa_text("Describe")], True),
    ("gemini: one empty part vs two", "gemini", gemini, [g_text("")], [g_text(""), g_text("")], False),
    ("gemini: a newline vs two parts", "gemini", gemini, [g_text("Liệt kê\nba con sông")],
     [g_text("Liệt kê"), g_text("ba con sông")], False),
    ("bedrock: one empty block vs two", "bedrock", bedrock, [g_text("")], [g_text(""), g_text("")], False),
    ("bedrock: a newline vs two blocks", "bedrock", bedrock, [g_text("Sebutkan\ndua kota")],
     [g_text("Sebutkan"), g_text("dua kota")], False),
]


@pytest.mark.parametrize(("label", "kind", "build", "one", "other", "same"), CASES, ids=[c[0] for c in CASES])
def test_the_normalised_fingerprint_keeps_the_parts(label: str, kind: str, build: Callable[[Any], dict[str, Any]],
                                                    one: Any, other: Any, same: bool) -> None:
    a, b = canonical(kind, build(one)), canonical(kind, build(other))
    assert (normalised_fingerprint(a) == normalised_fingerprint(b)) is same, label
    if not same:  # nor may a near tier serve one for the other by its joined text's score
        assert context_fingerprint(a) != context_fingerprint(b), label
    for request in (a, b):
        assert CanonicalRequest.from_json(json.loads(json.dumps(request.to_json()))) == request


SYSTEMS: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("openai: one system message vs two", "openai",
     {"model": "m", "messages": [{"role": "system", "content": "Be brief.\nAnswer in Dutch."},
                                 {"role": "user", "content": "Hoi"}]},
     {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                 {"role": "system", "content": "Answer in Dutch."}, {"role": "user", "content": "Hoi"}]}),
    ("openai: two system messages vs one with two parts", "openai",
     {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                 {"role": "system", "content": "Answer in Dutch."}, {"role": "user", "content": "Hoi"}]},
     {"model": "m", "messages": [{"role": "system", "content": [oa_text("Be brief."), oa_text("Answer in Dutch.")]},
                                 {"role": "user", "content": "Hoi"}]}),
    ("anthropic: a system string vs two blocks", "anthropic",
     {"model": "m", "max_tokens": 9, "system": "", "messages": [{"role": "user", "content": "Hoi"}]},
     {"model": "m", "max_tokens": 9, "system": [oa_text(""), oa_text("")], "messages": [{"role": "user", "content": "Hoi"}]}),
    ("gemini: a system text vs two parts", "gemini",
     {"systemInstruction": {"parts": [g_text("Be brief.\nUse Thai.")]}, "contents": [{"role": "user", "parts": [g_text("Hoi")]}]},
     {"systemInstruction": {"parts": [g_text("Be brief."), g_text("Use Thai.")]},
      "contents": [{"role": "user", "parts": [g_text("Hoi")]}]}),
    ("bedrock: a system text vs two blocks", "bedrock",
     {"system": [g_text("")], "messages": [{"role": "user", "content": [g_text("Hoi")]}]},
     {"system": [g_text(""), g_text("")], "messages": [{"role": "user", "content": [g_text("Hoi")]}]}),
]


@pytest.mark.parametrize(("label", "kind", "one", "other"), SYSTEMS, ids=[c[0] for c in SYSTEMS])
def test_a_system_text_joined_from_several_keeps_them_apart(label: str, kind: str, one: dict[str, Any],
                                                            other: dict[str, Any]) -> None:
    a, b = canonical(kind, one), canonical(kind, other)
    assert normalised_fingerprint(a) != normalised_fingerprint(b), label
    assert context_fingerprint(a) != context_fingerprint(b), label
    assert CanonicalRequest.from_json(json.loads(json.dumps(b.to_json()))) == b


def test_a_single_text_keeps_no_layout_so_its_fingerprints_are_unchanged() -> None:
    assert content_layout([5]) is None and content_layout(["image_url", 3]) is None and content_layout(["tool_use"]) is None
    assert content_layout([]) == () and content_layout([0, 0]) == (0, 0)
    request = canonical("openai", openai([oa_text("Hallo")]))
    assert "layout" not in request.to_json()["messages"][0] and "system_layout" not in request.to_json()


def test_a_hand_edited_layout_that_does_not_add_up_still_fingerprints() -> None:
    request = canonical("openai", openai([oa_text("ab"), oa_text("c")]))
    data = request.to_json()
    data["messages"][0]["layout"] = [7, 7]
    edited = CanonicalRequest.from_json(data)
    assert normalised_fingerprint(edited) != normalised_fingerprint(request)
    data["messages"][0]["layout"] = [True]
    with pytest.raises(ValueError, match="layout"):
        CanonicalRequest.from_json(data)


TOOL_USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "x"}}]}


def tool_result(content: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "Cari harga"}, TOOL_USE,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": content}]}]}


@pytest.mark.parametrize(("one", "other", "same"), [
    ("Rp 15.000", [oa_text("Rp 15.000")], True),
    ("Rp 15.000", [oa_text("Rp 15.000"), oa_text("")], False),
    ("Rp 15.000", [oa_text("Rp 25.000")], False),
    ("Rp 15.000", [{"type": "text", "text": "Rp 15.000", "citations": []}], False),
])
def test_an_anthropic_tool_result_as_a_string_or_one_text_block(one: Any, other: Any, same: bool) -> None:
    a, b = canonical("anthropic", tool_result(one)), canonical("anthropic", tool_result(other))
    assert (normalised_fingerprint(a) == normalised_fingerprint(b)) is same
