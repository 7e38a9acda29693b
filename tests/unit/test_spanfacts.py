"""What a span adds to its row (proxy/run/spanfacts.py): the recording's file without its prompt slug, and the
prompt and answer text only when opted in, redacted."""

from __future__ import annotations

import json

from semula.calllog.schema import CallRow
from semula.core.request.canonical import request_fingerprint
from semula.providers import RawRequest, adapter_for
from semula.proxy.run.spanfacts import CallEnd, span_facts

from entries import TEST_KEY

KEY = "sk-proj-PLANTED" + "A1b2C3d4E5f6G7h8J9k0L1m2N"
ANSWER = json.dumps({"model": "gpt-4o-mini-2024-07-18", "choices": [{"message": {"role": "assistant",
                     "content": f"the key was {KEY}"}}], "usage": {"prompt_tokens": 3}}).encode()


def ended(prompt: str, *, recorded: bool = True, chunks: tuple[bytes, ...] = ()) -> CallEnd:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "be brief"},
                                                 {"role": "user", "content": prompt}]}
    raw = RawRequest(method="POST", host="api.openai.com", path="/v1/chat/completions", query=(), headers={},
                     body=json.dumps(body).encode())
    canonical = adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)
    row = CallRow(project="default", provider="openai", model="gpt-4o-mini", decision="miss",
                  request_fp=request_fingerprint(canonical), streamed=bool(chunks))
    return CallEnd(row=row, run_id="r1", end_ns=5, refused=False, served=None, canonical=canonical,
                   recorded=recorded, mcp_server=None, response=None, chunks=chunks or (ANSWER,), streamed=False)


def test_without_content_no_text_and_the_file_as_a_glob() -> None:
    facts = span_facts(ended(f"tell me a secret {KEY}"), folder=True, content=False)
    assert facts.input_text is None and facts.output_text is None
    assert facts.recording is not None and facts.recording.startswith("default/openai/v1-chat-completions/*-")
    assert "secret" not in facts.recording and facts.response_model == "gpt-4o-mini-2024-07-18"
    assert facts.run_id == "r1" and facts.end_ns == 5


def test_with_content_the_text_is_there_redacted() -> None:
    facts = span_facts(ended(f"tell me a secret {KEY}"), folder=True, content=True)
    assert facts.input_text is not None and facts.output_text is not None and facts.recording is not None
    messages = json.loads(facts.input_text)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "tell me a secret" in messages[1]["parts"][0]["content"]
    assert json.loads(facts.output_text)[0]["parts"][0]["content"].startswith("the key was ")
    assert KEY not in facts.input_text + facts.output_text + facts.recording
    assert "tell-me-a-secret" in facts.recording


def test_no_folder_or_nothing_recorded_no_file() -> None:
    assert span_facts(ended("hi"), folder=False, content=True).recording is None
    assert span_facts(ended("hi", recorded=False), folder=True, content=True).recording is None


def test_a_hostile_answer_gives_no_model_and_no_text() -> None:
    end = ended("hi", chunks=(b"\xff\xfe not json \x00",))
    facts = span_facts(end, folder=True, content=True)
    assert facts.response_model is None and facts.output_text is None
