"""Record once with the provider up, replay with the provider gone: the core promise.

One auto-mode proxy records a table of calls (OpenAI chat/responses, Anthropic
messages, Gemini via curl; JSON and streamed). Then a replay-mode proxy on the same
data dir, with every provider host mapped to a closed port, must give back the same
answers (same fake counter in the text), the same stream events, and say hit/exact.
A request nobody recorded must fail fast with a 404 the SDKs do not retry.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import (
    FakeProvider,
    ProxyHandle,
    anthropic_client,
    curl,
    openai_client,
    read_call_log,
    semula_meta,
    uniq,
    wait_for_rows,
)
from fakeprovider import iter_json_lines

pytestmark = pytest.mark.e2e

RUN = uniq("rr")
GEMINI_KEY = "AIza-test-key-for-record-replay-0000000"  # fake; the secrets test plants real-looking ones
GEMINI_BASE = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"
OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-haiku-5-5"


@dataclass(frozen=True)
class Outcome:
    """What a client saw: the answer text, parsed stream events ([] if not streamed), x-semula-* headers."""

    text: str
    events: list[Any]
    semula: dict[str, str | None]
    status: int = 200
    fake_count: str | None = None
    streamed: bool = False


def prompt(name: str) -> str:
    return f"{name} {RUN}: say something short"


# --- the scenarios: each makes one call through a proxy and reports what it saw -------------


def openai_chat(proxy: ProxyHandle) -> Outcome:
    raw = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.with_raw_response.create(
        model=OPENAI_MODEL, messages=[{"role": "user", "content": prompt("openai-chat")}])
    completion = raw.parse()
    return Outcome(completion.choices[0].message.content or "", [], semula_meta(raw.headers),
                   fake_count=raw.headers.get("x-fake-count"))


def openai_chat_stream(proxy: ProxyHandle) -> Outcome:
    raw = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.with_raw_response.create(
        model=OPENAI_MODEL, messages=[{"role": "user", "content": prompt("openai-chat-stream")}],
        stream=True, stream_options={"include_usage": True})
    chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return Outcome(text, [c.model_dump(mode="json") for c in chunks], semula_meta(raw.headers),
                   fake_count=raw.headers.get("x-fake-count"), streamed=True)


def openai_responses(proxy: ProxyHandle) -> Outcome:
    raw = openai_client(proxy.proxy_url, proxy.ca_path).responses.with_raw_response.create(
        model="gpt-4.1-mini", input=prompt("openai-responses"))
    return Outcome(raw.parse().output_text, [], semula_meta(raw.headers), fake_count=raw.headers.get("x-fake-count"))


def openai_responses_stream(proxy: ProxyHandle) -> Outcome:
    raw = openai_client(proxy.proxy_url, proxy.ca_path).responses.with_raw_response.create(
        model="gpt-4.1-mini", input=prompt("openai-responses-stream"), stream=True)
    events = list(raw.parse())
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    return Outcome(text, [e.model_dump(mode="json") for e in events], semula_meta(raw.headers),
                   fake_count=raw.headers.get("x-fake-count"), streamed=True)


def anthropic_messages(proxy: ProxyHandle) -> Outcome:
    raw = anthropic_client(proxy.proxy_url, proxy.ca_path).messages.with_raw_response.create(
        model=ANTHROPIC_MODEL, max_tokens=64, messages=[{"role": "user", "content": prompt("anthropic")}])
    msg = raw.parse()
    return Outcome(msg.content[0].text, [], semula_meta(raw.headers), fake_count=raw.headers.get("x-fake-count"))


def anthropic_stream(proxy: ProxyHandle) -> Outcome:
    raw = anthropic_client(proxy.proxy_url, proxy.ca_path).messages.with_raw_response.create(
        model=ANTHROPIC_MODEL, max_tokens=64, stream=True,
        messages=[{"role": "user", "content": prompt("anthropic-stream")}])
    events = list(raw.parse())
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    return Outcome(text, [e.model_dump(mode="json") for e in events], semula_meta(raw.headers),
                   fake_count=raw.headers.get("x-fake-count"), streamed=True)


def gemini_body(name: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": prompt(name)}]}]}


def gemini_generate(proxy: ProxyHandle) -> Outcome:
    res = curl(f"{GEMINI_BASE}:generateContent?key={GEMINI_KEY}", proxy_url=proxy.proxy_url,
               ca_path=proxy.ca_path, data=gemini_body("gemini"))
    assert res.returncode == 0 and res.status == 200, (res.status, res.body, res.stderr)
    text = json.loads(res.body)["candidates"][0]["content"]["parts"][0]["text"]
    return Outcome(text, [], semula_meta(res.headers), fake_count=res.headers.get("x-fake-count"))


def gemini_stream(proxy: ProxyHandle) -> Outcome:
    res = curl(f"{GEMINI_BASE}:streamGenerateContent?alt=sse&key={GEMINI_KEY}", proxy_url=proxy.proxy_url,
               ca_path=proxy.ca_path, data=gemini_body("gemini-stream"))
    assert res.returncode == 0 and res.status == 200, (res.status, res.body, res.stderr)
    chunks = list(iter_json_lines(res.body))
    text = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
    return Outcome(text, chunks, semula_meta(res.headers), fake_count=res.headers.get("x-fake-count"), streamed=True)


SCENARIOS: dict[str, Callable[[ProxyHandle], Outcome]] = {
    "openai_chat": openai_chat,
    "openai_chat_stream": openai_chat_stream,
    "openai_responses": openai_responses,
    "openai_responses_stream": openai_responses_stream,
    "anthropic_messages": anthropic_messages,
    "anthropic_stream": anthropic_stream,
    "gemini_generate": gemini_generate,
    "gemini_stream": gemini_stream,
}


# --- fixtures: one recording session, one replay session ------------------------------------


@dataclass
class Recording:
    proxy: ProxyHandle
    outcomes: dict[str, Outcome]
    count_before: int
    count_after: int
    repeat: Outcome  # openai_chat called a second time in auto mode
    count_after_repeat: int
    errors: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def recording(module_proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> Recording:
    proxy = module_proxy_factory("auto", module_proxy_factory.new_data_dir("record-replay"))
    before = fake_provider.count()
    outcomes, errors = {}, {}
    for name, scenario in SCENARIOS.items():
        try:
            outcomes[name] = scenario(proxy)
        except Exception as e:  # noqa: BLE001 - reported per scenario by the tests below
            errors[name] = f"{type(e).__name__}: {e}\n{proxy.output()[-3000:]}"
    after = fake_provider.count()
    repeat = openai_chat(proxy) if "openai_chat" in outcomes else Outcome("", [], {})
    after_repeat = fake_provider.count()
    proxy.stop()  # SIGINT: flushes the call log and releases the store for the replay proxy
    return Recording(proxy, outcomes, before, after, repeat, after_repeat, errors)


@pytest.fixture(scope="module")
def replay(module_proxy_factory: ProxyFactory, recording: Recording) -> ProxyHandle:
    return module_proxy_factory("replay", recording.proxy.data_dir, upstream="gone")


def recorded(recording: Recording, name: str) -> Outcome:
    if name in recording.errors:
        pytest.fail(f"recording {name} failed: {recording.errors[name]}")
    return recording.outcomes[name]


# --- recording --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCENARIOS)
def test_auto_mode_records_fresh_answers(recording: Recording, name: str) -> None:
    outcome = recorded(recording, name)
    assert outcome.text.startswith("fake answer #"), outcome
    assert outcome.semula["x-semula-decision"] == "miss", outcome.semula
    assert outcome.fake_count is not None and f"#{outcome.fake_count} " in outcome.text


def test_auto_mode_counts_one_upstream_call_per_scenario_and_hits_on_repeat(recording: Recording) -> None:
    assert not recording.errors, recording.errors
    assert recording.count_after - recording.count_before == len(SCENARIOS)
    assert recording.repeat.text == recording.outcomes["openai_chat"].text
    assert recording.repeat.semula["x-semula-decision"] == "hit"
    assert recording.count_after_repeat == recording.count_after, "a hit must not reach the provider"


def test_record_phase_call_log(recording: Recording) -> None:
    rows = [r for r in read_call_log(recording.proxy.data_dir) if r.get("mode") == "auto"]
    assert len(rows) == len(SCENARIOS) + 1, rows
    assert sorted(r["decision"] for r in rows) == sorted(["miss"] * len(SCENARIOS) + ["hit"])
    assert {r["provider"] for r in rows} == {"openai", "anthropic", "gemini"}
    assert sum(bool(r["streamed"]) for r in rows) == sum(o.streamed for o in recording.outcomes.values())
    for row in rows:
        assert row["status"] == 200 and row["request_fp"] and row["schema_version"] >= 1, row
        assert "?" not in (row["path"] or ""), "paths are logged without the query string"
    assert all(r["recorded"] for r in rows if r["decision"] == "miss")


# --- replay -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCENARIOS)
def test_replay_gives_identical_answers_without_provider(recording: Recording, replay: ProxyHandle,
                                                         fake_provider: FakeProvider, name: str) -> None:
    original = recorded(recording, name)
    before = fake_provider.count()
    again = SCENARIOS[name](replay)
    assert again.text == original.text, "same fake counter in the text = the recorded answer"
    assert again.events == original.events, "streamed events must replay identically"
    assert again.semula["x-semula-decision"] == "hit", again.semula
    assert again.semula["x-semula-tier"] == "exact", again.semula
    assert again.semula["x-semula-entry"], again.semula
    assert fake_provider.count() == before


def test_replay_call_log_rows(replay: ProxyHandle) -> None:
    rows = wait_for_rows(replay.data_dir, lambda r: r.get("mode") == "replay" and r.get("decision") == "hit",
                         at_least=len(SCENARIOS))
    assert len(rows) >= len(SCENARIOS), replay.describe()
    assert {r["tier"] for r in rows} == {"exact"}
    assert all(r["entry_id"] is not None for r in rows)


# --- misses -------------------------------------------------------------------------------------


def assert_miss_message(message: str, *, project: str) -> None:
    assert message.startswith("semula: no recording matches"), message
    assert project in message and "replay" in message, message
    assert "record" in message.split("no recording matches", 1)[1], f"should say how to record: {message}"


def test_replay_miss_openai_is_404_in_openai_shape_and_not_retried(recording: Recording, replay: ProxyHandle,
                                                                   fake_provider: FakeProvider) -> None:
    chat_entry = replay_entry_of(recording, replay, "openai_chat")
    before = fake_provider.count()
    client = openai_client(replay.proxy_url, replay.ca_path, max_retries=2)  # SDK default retries on
    with pytest.raises(openai.NotFoundError) as exc:
        client.chat.completions.create(model=OPENAI_MODEL, messages=[{"role": "user", "content": prompt("openai-chat") + " (changed)"}])
    body = exc.value.body
    assert isinstance(body, dict) and {"message", "type"} <= set(body), body  # the SDK unwraps {"error": {...}}
    message = body["message"]
    assert_miss_message(message, project="default")
    assert chat_entry in message, f"nearest recording id {chat_entry} should be named: {message}"
    assert "message 1 (user) text differs" in message, f"should name the differing field: {message}"
    assert fake_provider.count() == before

    rows = wait_for_rows(replay.data_dir, lambda r: r.get("mode") == "replay" and r.get("status") == 404
                         and r.get("provider") == "openai", at_least=1)
    time.sleep(2.5)  # one more flush interval: a retry would show up as a second row
    rows = [r for r in read_call_log(replay.data_dir)
            if r.get("mode") == "replay" and r.get("status") == 404 and r.get("provider") == "openai"]
    assert len(rows) == 1, rows
    assert rows[0]["decision"] == "miss", rows[0]


def replay_entry_of(recording: Recording, replay: ProxyHandle, name: str) -> str:
    entry = SCENARIOS[name](replay).semula["x-semula-entry"]
    assert entry, "replay hit must name its entry"
    return entry


def test_replay_miss_anthropic_shape(replay: ProxyHandle, fake_provider: FakeProvider) -> None:
    before = fake_provider.count()
    with pytest.raises(anthropic.NotFoundError) as exc:
        anthropic_client(replay.proxy_url, replay.ca_path, max_retries=2).messages.create(
            model=ANTHROPIC_MODEL, max_tokens=64, messages=[{"role": "user", "content": f"never recorded {RUN}"}])
    body = exc.value.body
    assert isinstance(body, dict) and body.get("type") == "error", body
    assert_miss_message(body["error"]["message"], project="default")
    assert fake_provider.count() == before


def test_replay_miss_gemini_shape(replay: ProxyHandle) -> None:
    res = curl(f"{GEMINI_BASE}:generateContent?key={GEMINI_KEY}", proxy_url=replay.proxy_url,
               ca_path=replay.ca_path, data=gemini_body("never recorded gemini"))
    assert res.status == 404, res
    error = json.loads(res.body)["error"]
    assert error["code"] == 404 and error.get("status"), error
    assert_miss_message(error["message"], project="default")
    assert GEMINI_KEY not in error["message"], "the error must not echo the key"


# --- upstream trouble: what must never become a recording ---------------------------------------


def test_errors_and_cut_streams_are_not_recorded_but_gzip_answers_are(proxy_factory: ProxyFactory,
                                                                      fake_provider: FakeProvider) -> None:
    """A recorded 500 or half a stream would poison every later replay; a gzip body must replay decoded."""
    proxy = proxy_factory("auto")
    client = openai_client(proxy.proxy_url, proxy.ca_path)

    def ask(content: str, **kwargs: Any) -> Any:
        return client.chat.completions.create(model=OPENAI_MODEL, messages=[{"role": "user", "content": content}],
                                              **kwargs)

    for word, exc_type in [("FAIL500", openai.InternalServerError), ("RATE429", openai.RateLimitError)]:
        for _ in range(2):
            before = fake_provider.count()
            with pytest.raises(exc_type):
                ask(f"{word} {RUN}")
            assert fake_provider.count() == before + 1, f"{word}: an error answer must not be replayed"

    for _ in range(2):
        before = fake_provider.count()
        with pytest.raises(Exception, match="(?i)incomplete|peer closed|connection"):
            list(ask(f"BREAKSTREAM {RUN}", stream=True))
        assert fake_provider.count() == before + 1, "a cut stream must not be replayed"

    # The SDK's http client sends Accept-Encoding: gzip, so the fake compresses these.
    plain = [ask(f"GZIP json {RUN}").choices[0].message.content for _ in range(2)]
    assert plain[0] == plain[1] and str(plain[0]).startswith("fake answer #")
    streamed = []
    for _ in range(2):
        streamed.append("".join(c.choices[0].delta.content or ""
                                for c in ask(f"GZIP stream {RUN}", stream=True) if c.choices))
    assert streamed[0] == streamed[1] and streamed[0].startswith("fake answer #")

    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    errors = [r for r in rows if r["status"] in (429, 500)]
    cut = [r for r in rows if r["status"] is None and r["error"]]  # the client got a cut answer, not a 200
    good = [r for r in rows if r["status"] == 200 and not r["error"]]
    assert len(errors) == 4 and not any(r["recorded"] for r in errors), errors
    assert len(cut) == 2 and not any(r["recorded"] for r in cut), cut
    assert [r["decision"] for r in good] == ["miss", "hit", "miss", "hit"], good


def test_an_immediate_repeat_of_a_stream_waits_for_its_recording(proxy_factory: ProxyFactory,
                                                                 fake_provider: FakeProvider) -> None:
    """A streamed answer reaches the client before it is stored: a repeat sent at once must still hit."""
    proxy = proxy_factory("auto")
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    before = fake_provider.count()
    for i in range(10):
        texts = []
        for _ in range(2):
            stream = client.chat.completions.create(
                model=OPENAI_MODEL, messages=[{"role": "user", "content": f"repeat at once {i} {RUN}"}], stream=True)
            texts.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
        assert texts[0] == texts[1], texts
    assert fake_provider.count() == before + 10, "every repeat must be served from the recording"
