"""The pure comparison behind `semula recordings diff` (`recordings/diff.py`) and its views (`diffview.py`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from entries import chat, new_entry
from semula.cli.recordings_diff_cmd import failures
from semula.recordings.diff import (
    ADDED, REMOVED, RE_RECORDED, REQUEST_CHANGED, answer_view, compare, compare_pair, tool_calls,
)
from semula.recordings.diffview import markdown, to_json
from semula.store.types import NewEntry


def answer(text: str, **extra: Any) -> bytes:
    return json.dumps({"id": extra.pop("id", "chatcmpl-1"), "model": extra.pop("model", "gpt-4o-2024"),
                       "choices": [{"message": {"content": text, **extra}}]}).encode()


def recording(prompt: str = "what is two plus two", text: str = "four", **fields: Any) -> NewEntry:
    body = fields.pop("body", answer(text))
    return new_entry(chat(prompt, **fields.pop("params", {})), project="default", body=body, **fields)


SAME = recording()


@pytest.mark.parametrize("head, kind, answer_differences, changed", [
    (SAME, None, None, False),
    (recording(body=answer("four", id="chatcmpl-2")), RE_RECORDED, (), False),  # only an id: not a changed answer
    (recording(text="five"), RE_RECORDED, ("text",), True),
    (recording(body=answer("four", model="gpt-4o-2025")), RE_RECORDED, ("model",), True),
    (recording(prompt_tokens=7), None, None, False),  # the same bytes: usage alone is no change to list
    (replace(recording(text="4"), prompt_tokens=9), RE_RECORDED, ("text", "usage"), True),
    (replace(recording(body=b'{"error": {"message": "bad"}}'), status=400), RE_RECORDED,
     ("status", "text", "model"), True),
    (recording(prompt="what is three plus three"), REQUEST_CHANGED, (), False),
])
def test_a_pair_says_what_changed_in_the_answer(head: NewEntry, kind: str | None,
                                               answer_differences: tuple[str, ...] | None, changed: bool) -> None:
    change = compare_pair("a.json", SAME, "a.json", head)
    if kind is None:
        assert change is None
        return
    assert change is not None and change.kind == kind
    assert change.answer_differences == answer_differences
    assert change.answer_changed is changed
    assert set(change.answer_differences) | set(change.answer_same) == {"status", "text", "tool calls", "model",
                                                                          "usage"}


def test_a_changed_request_is_told_with_the_miss_message_s_reasons_and_what_stayed_the_same() -> None:
    change = compare_pair("a.json", SAME, "b.json", recording(prompt="what is three plus three",
                                                              params={"temperature": 0.5}))
    assert change is not None and change.kind == REQUEST_CHANGED
    assert any(d.startswith("message 1 (user) text differs: ") for d in change.request_differences)
    assert "parameters differ: temperature=0.5 only in this request" in change.request_differences
    assert {"model", "stream", "tools", "system", "headers", "query"} <= set(change.request_same)


def test_an_error_answer_brought_in_is_flagged() -> None:
    error = replace(recording("a new test"), status=404)
    result = compare({"a.json": SAME}, {"a.json": SAME, "b.json": error})
    assert [(c.kind, c.error_status) for c in result.changes] == [(ADDED, 404)]
    assert result.error_answers == (("b.json", 404),) and result.unchanged == 1
    assert failures(result, ["error-answer", "answer-changed"]) == ["error-answer (1)"]


def test_pairs_by_path_then_by_request_then_by_the_nearest_request_of_the_same_shape() -> None:
    base = {"same.json": SAME, "moved.json": recording("a file that moves", "x"),
            "old-prompt.json": recording("summarise the quarterly report for the board", "y"),
            "gone.json": recording("an unrelated question about volcanoes", "z")}
    head = {"same.json": SAME, "moved/elsewhere.json": recording("a file that moves", "x2"),
            "new-prompt.json": recording("summarise the quarterly report for the board briefly", "y"),
            "streamed.json": recording("an unrelated question about volcanoes", "z", params={"stream": True}),
            "fresh.json": recording("something never asked before", "w")}
    result = compare(base, head)
    kinds = {(c.kind, c.base_path, c.head_path) for c in result.changes}
    assert kinds == {
        (RE_RECORDED, "moved.json", "moved/elsewhere.json"),
        (REQUEST_CHANGED, "old-prompt.json", "new-prompt.json"),
        (ADDED, None, "streamed.json"),  # another shape (a stream) is never paired: its answer differs in form
        (ADDED, None, "fresh.json"),
        (REMOVED, "gone.json", None),
    }
    assert result.unchanged == 1


OPENAI_CALL = {"choices": [{"message": {"tool_calls": [{"id": "c1", "type": "function", "function": {
    "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}]}
OPENAI_STREAM = [{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "get_weather",
                                                                                   "arguments": ""}}]}}]},
                 {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}}]},
                 {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"Oslo\"}"}}]}}]}]
ANTHROPIC = {"content": [{"type": "text", "text": "let me look"},
                         {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]}
GEMINI = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]}}]}
BEDROCK = {"output": {"message": {"content": [{"toolUse": {"toolUseId": "t", "name": "get_weather",
                                                           "input": {"city": "Oslo"}}}]}}}
RESPONSES = [{"type": "response.output_item.added", "item": {"type": "function_call", "name": "get_weather",
                                                             "arguments": ""}},
             {"type": "response.function_call_arguments.delta", "delta": "{\"city\":\"Oslo\"}"}]


@pytest.mark.parametrize("values, arguments", [
    ([OPENAI_CALL], '{"city":"Oslo"}'), (OPENAI_STREAM, '{"city":"Oslo"}'), ([ANTHROPIC], '{"city":"Oslo"}'),
    ([GEMINI], '{"city":"Oslo"}'), ([BEDROCK], '{"city":"Oslo"}'), (RESPONSES, '{"city":"Oslo"}'),
    ([{"choices": [{"message": {"content": "no call"}}]}], None),
])
def test_tool_calls_are_read_in_every_provider_s_shape(values: list[Any], arguments: str | None) -> None:
    names, joined = tool_calls(values)
    if arguments is None:
        assert names == () and joined == ""
    else:
        assert names == ("get_weather",) and joined == arguments


def test_a_streamed_answer_is_compared_as_the_text_it_assembles() -> None:
    frames = "".join(f"data: {json.dumps({'choices': [{'delta': {'content': piece}}]})}\n\n"
                     for piece in ("fo", "ur")) + "data: [DONE]\n\n"
    view = answer_view(recording(body=frames.encode(), params={"stream": True}, streamed=True))
    assert view.text == "four" and view.tool_calls == ()


def test_an_answer_without_text_is_compared_by_its_body() -> None:
    view = answer_view(recording(body=b'{"data": [{"embedding": [0.1, 0.2]}]}'))
    assert view.text == '{"data": [{"embedding": [0.1, 0.2]}]}'


def test_markdown_fits_a_comment_and_says_what_it_left_out() -> None:
    base = {f"{n}.json": recording(f"question number {n} about a topic", "old answer") for n in range(300)}
    head = {path: replace(entry, body=answer("a new answer " * 30)) for path, entry in base.items()}
    result = compare(base, head)
    text = markdown(result, "main", "feature", [], max_chars=5000)
    assert len(text) <= 5000 and "more change(s) left out to fit a comment" in text
    assert "300 re-recorded" in text


def test_every_output_is_redacted() -> None:
    planted = "sk-live-PLANTEDunitKEY0123456789abcdefABCDEF"
    result = compare({}, {}, (("head", "x.json", f"host '{planted}' is not one of openai's hosts"),))
    for text in (markdown(result, "main", planted, []), to_json(result, "main", planted, [])):
        assert planted not in text and "[REDACTED]" in text


def test_two_folders_compare_without_git_and_a_bad_side_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from semula.cli.recordings_cmd import recordings
    from semula.recordings.folder import recording_from_entry, relpath_of
    from semula.recordings.format import dumps
    from semula.store.types import Entry

    for side, text in (("old", "four"), ("new", "five")):
        entry = Entry.of(recording(text=text))
        path = tmp_path / side / relpath_of(entry)
        path.parent.mkdir(parents=True)
        path.write_text(dumps(recording_from_entry(entry)))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    done = runner.invoke(recordings, ["diff", "old", "new", "--fail-on", "answer-changed"])
    assert done.exit_code == 1 and "1 re-recorded; 0 unchanged" in done.output, done.output
    assert "-four" in done.output and "+five" in done.output
    bad = runner.invoke(recordings, ["diff", "no-such-thing", "new"])
    assert bad.exit_code == 2 and "is not in a git repository" in bad.output, bad.output
