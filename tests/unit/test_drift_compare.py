"""`semula drift`'s pure comparison: shape changes by JSON path with severity, stream events, text similarity."""

from __future__ import annotations

import json
from typing import Any

import pytest

from semula.core.text import similarity, word_diff as text_diff
from semula.drift.compare import BREAKING, MINOR, NONE, Answer, compare, shape, shape_diff
from semula.drift.select import Selected, capped, parse_age


def chat(content: Any = "hi", **extra: Any) -> dict[str, Any]:
    return {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 3}, **extra}


def answer(value: Any, status: int = 200, text: str = "hi") -> Answer:
    return Answer(status=status, body=json.dumps(value).encode(), streamed=False, text=text)


SHAPES = [
    ("same values differ", chat("a"), chat("b"), []),
    ("a new field", chat(), chat(service_tier="default"), [("$.service_tier", "added", MINOR)]),
    ("a removed field", chat(), {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant"}}],
                                 "usage": {"prompt_tokens": 3}},
     [("$.choices[].message.content", "removed", BREAKING)]),
    ("a renamed field", chat(), {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "text": "hi"}}],
                                 "usage": {"prompt_tokens": 3}},
     [("$.choices[].message.content", "removed", BREAKING), ("$.choices[].message.text", "added", MINOR)]),
    ("a changed type", chat(), {**chat(), "usage": {"prompt_tokens": "3"}}, [("$.usage.prompt_tokens", "type", BREAKING)]),
    ("an optional field now null", chat(), chat(None), []),
    ("a removed object reported once", chat(), {"id": "x", "choices": []},
     [("$.choices[]", "removed", BREAKING), ("$.usage", "removed", BREAKING)]),
    ("list items merged", {"a": [{"x": 1}, {"y": 2}]}, {"a": [{"y": 3}, {"x": 4}, {"x": 5}]}, []),
]


@pytest.mark.parametrize(("label", "old", "new", "expected"), SHAPES, ids=[s[0] for s in SHAPES])
def test_shape_changes_by_path(label: str, old: Any, new: Any, expected: list[tuple[str, str, str]]) -> None:
    assert [(c.path, c.change, c.severity) for c in shape_diff(shape(old), shape(new))] == expected


def test_severity_tiers() -> None:
    assert compare(answer(chat()), answer(chat())).severity == NONE
    assert compare(answer(chat()), answer(chat(service_tier="x"))).severity == MINOR
    error = compare(answer(chat()), answer({"error": {"message": "x"}}, 503))
    assert error.severity == BREAKING and error.shape == (), "the status is the change, not the error body's shape"
    low = compare(answer(chat(), text="the sky is blue today"), answer(chat(), text="completely other words here"))
    assert low.severity == MINOR and low.similarity < 0.6 and low.diff


def frames(*datas: Any, events: tuple[str, ...] = ()) -> Answer:
    parts = [(f"event: {e}\n" if e else "") + f"data: {json.dumps(d) if not isinstance(d, str) else d}\n\n"
             for d, e in zip(datas, events or ("",) * len(datas))]
    body = "".join(parts).encode()
    return Answer(status=200, body=body, streamed=True, frames=tuple(p.encode() for p in parts), text="t")


def test_streams_compare_event_types_and_frame_shapes() -> None:
    old = frames({"type": "message_start"}, {"type": "content_block_delta", "delta": {"text": "a"}},
                 events=("message_start", "content_block_delta"))
    new = frames({"type": "message_start"}, {"type": "content_block_delta", "delta": {"text": "a"}},
                 {"type": "ping"}, events=("message_start", "content_block_delta", "ping"))
    drift = compare(old, new)
    assert drift.events_added == ("ping",) and not drift.events_removed and drift.severity == MINOR
    assert compare(new, old).events_removed == ("ping",) and compare(new, old).severity == BREAKING
    chunk = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": "a"}}]}
    assert compare(frames(chunk, "[DONE]"), frames({**chunk, "service_tier": "d"}, "[DONE]")).shape[0].path == \
        "$chat.completion.chunk.service_tier"


def test_similarity_and_diff() -> None:
    assert similarity("same", "same") == 1.0
    assert 0.8 < similarity("fake answer #1 to: hello", "fake answer #22 to: hello") < 1
    assert text_diff("a b c d", "a x c") == ("-b", "+x", "-d")


def test_parse_age_and_caps() -> None:
    assert parse_age("2w").days == 14 and parse_age("12h").total_seconds() == 43200
    with pytest.raises(ValueError):
        parse_age("soon")

    class R:
        def __init__(self, tokens: int) -> None:
            self.prompt_tokens, self.completion_tokens = tokens, 0

    items = [Selected(f"f{n}", R(10)) for n in range(5)]  # type: ignore[arg-type]
    assert [s.rel for s in capped(items, 3, None)[0]] == ["f0", "f1", "f2"]
    assert [s.rel for s in capped(items, 10, 25)[0]] == ["f0", "f1"]
