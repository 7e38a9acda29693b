"""Review never crosses a shape (issue 21), through a real `semula proxy`, the fake provider and the
real openai and anthropic SDKs: no candidate pairs two providers or two stream modes, auto mode
leaves no open candidate for the requests it recorded itself, approving never removes a recording,
and `review show` prints both shapes and the answer's text."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import openai
import pytest
from conftest import ProxyFactory
from e2e_helpers import FakeProvider, anthropic_client, openai_client, run_semula, uniq

pytestmark = pytest.mark.e2e
OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-haiku-5-5"


def ask_openai(client, text: str, stream: bool = False) -> str:
    messages = [{"role": "user", "content": text}]
    if not stream:
        return client.chat.completions.create(model=OPENAI_MODEL, messages=messages).choices[0].message.content
    chunks = client.chat.completions.create(model=OPENAI_MODEL, messages=messages, stream=True)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def ask_anthropic(client, text: str) -> str:
    message = client.messages.create(model=ANTHROPIC_MODEL, max_tokens=64, messages=[{"role": "user", "content": text}])
    return message.content[0].text


def semula(data_dir: Path, *args: str, ok: bool = True):
    result = run_semula(*args, "--data-dir", str(data_dir))
    if ok:
        assert result.returncode == 0, result.stderr + result.stdout
    return result


def candidates(data_dir: Path, status: str = "open") -> list[dict]:
    return json.loads(semula(data_dir, "review", "list", "--status", status, "--json").stdout)


def recording_files(root: Path) -> list[str]:
    """The recording files of the folder; not its shared files (aliases, rejections, settings)."""
    return sorted(str(p.relative_to(root)) for p in root.glob("*/*/**/*.json")
                  if p.relative_to(root).parts[1] in ("openai", "anthropic", "gemini"))


def recording_ids(data_dir: Path) -> list[int]:
    return sorted(r["id"] for r in json.loads(semula(data_dir, "entries", "list", "--json").stdout))


def test_an_openai_and_an_anthropic_call_with_the_same_prompt_are_never_paired(proxy_factory: ProxyFactory,
                                                                                 fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    prompt = f"Name one quiet beach near the old lighthouse {uniq('beach')}"
    before = fake_provider.count()
    ask_openai(openai_client(proxy.proxy_url, proxy.ca_path), prompt)
    ask_anthropic(anthropic_client(proxy.proxy_url, proxy.ca_path), prompt)  # the same words: score 1.0
    assert fake_provider.count() == before + 2, "the Anthropic call was not answered from the OpenAI recording"
    proxy.stop()
    assert candidates(proxy.data_dir, "all") == [], "never queued, not even for a moment"

    # Replay with the provider gone: an Anthropic paraphrase meets only the OpenAI recording of its words
    # and its own provider's recording; it may pair with the Anthropic one only.
    replay = proxy_factory("replay", proxy.data_dir, upstream="gone")
    paraphrase = prompt.replace("quiet", "calm")
    with pytest.raises(anthropic.NotFoundError):
        ask_anthropic(anthropic_client(replay.proxy_url, replay.ca_path), paraphrase)
    (queued,) = candidates(replay.data_dir)  # the same-shape pairing is still queued, and only that one
    printed = semula(replay.data_dir, "review", "show", str(queued["id"])).stdout
    assert f"this request: anthropic · POST /v1/messages · model {ANTHROPIC_MODEL} · non-stream" in printed, printed
    assert f"recording:    anthropic · POST /v1/messages · model {ANTHROPIC_MODEL} · non-stream" in printed


def test_a_stream_and_a_non_stream_call_are_never_paired(proxy_factory: ProxyFactory) -> None:
    recorder = proxy_factory("auto")
    tag = uniq("museum")
    original = f"When does the city museum open on Sunday mornings {tag}"
    streamed_original = f"Recommend two small bakeries beside the river in the city {tag}"
    client = openai_client(recorder.proxy_url, recorder.ca_path)
    ask_openai(client, original)
    streamed_answer = ask_openai(client, streamed_original, stream=True)
    recorder.stop()
    replay = proxy_factory("replay", recorder.data_dir, upstream="gone")
    client = openai_client(replay.proxy_url, replay.ca_path)
    with pytest.raises(openai.NotFoundError):  # a stream close to the non-stream recording only
        ask_openai(client, original.replace("city", "town"), stream=True)
    with pytest.raises(openai.NotFoundError):  # non-stream, close to the streamed recording only
        ask_openai(client, streamed_original.replace("city", "town"))
    assert candidates(replay.data_dir, "all") == []
    with pytest.raises(openai.NotFoundError):  # a stream close to the streamed recording: queued
        ask_openai(client, streamed_original.replace("city", "town"), stream=True)
    (candidate,) = candidates(replay.data_dir)
    printed = semula(replay.data_dir, "review", "show", str(candidate["id"])).stdout
    assert f"this request: openai · POST /v1/chat/completions · model {OPENAI_MODEL} · stream" in printed, printed
    assert f"recording:    openai · POST /v1/chat/completions · model {OPENAI_MODEL} · stream" in printed
    assert streamed_answer and streamed_answer in printed, "the stream's text, assembled"
    assert "data:" not in printed and "chat.completion.chunk" not in printed, "no raw frames"


def test_auto_mode_leaves_no_open_candidate_for_what_it_recorded(proxy_factory: ProxyFactory,
                                                                 fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    tag = uniq("hotels")
    words = ["quiet", "calm", "peaceful", "small", "cheap", "cosy"]
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    before = fake_provider.count()
    for word in words:
        ask_openai(client, f"Please list three {word} hotels near the old harbour for ticket {tag}")
    ask_openai(client, f"Please list three quiet hotels near the old harbour for ticket {tag} today", stream=True)
    assert fake_provider.count() == before + len(words) + 1, "each one forwarded and recorded"
    proxy.stop()
    assert candidates(proxy.data_dir) == []
    queued_then_closed = candidates(proxy.data_dir, "all")
    assert queued_then_closed and {c["status"] for c in queued_then_closed} == {"closed"}, queued_then_closed


def test_approving_a_candidate_never_removes_a_recording(proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    recorder = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    tag = uniq("harbour")
    original = f"Please list three quiet hotels near the old harbour for ticket {tag}"
    paraphrase = f"Please list three calm hotels near the old harbour for ticket {tag}"
    ask_openai(openai_client(recorder.proxy_url, recorder.ca_path), original)
    ask_openai(openai_client(recorder.proxy_url, recorder.ca_path), paraphrase)  # its own recording
    recorder.stop()
    (closed,) = candidates(recorder.data_dir, "all")
    refused = semula(recorder.data_dir, "review", "approve", str(closed["id"]), ok=False)
    assert refused.returncode != 0 and "already closed" in refused.stderr, refused.stderr

    replay = proxy_factory("replay", recorder.data_dir, upstream="gone", extra_args=("--recordings", str(folder)))
    client = openai_client(replay.proxy_url, replay.ca_path)
    third = f"Please list three peaceful hotels near the old harbour for ticket {tag}"
    with pytest.raises(openai.NotFoundError):
        ask_openai(client, third)
    open_now = candidates(replay.data_dir)
    assert open_now, "queued"
    files, ids = recording_files(folder), recording_ids(replay.data_dir)
    assert len(files) == len(ids) == 2, (files, ids)
    best = max(open_now, key=lambda c: c["score"])
    approved = semula(replay.data_dir, "review", "approve", str(best["id"]))
    assert "approved #" in approved.stdout and "no recording was deleted" in approved.stdout, approved.stdout
    assert recording_files(folder) == files and recording_ids(replay.data_dir) == ids
    assert list(folder.glob("*/_aliases/*")), "the alias is shared in the folder, beside the recordings"
    raw = client.chat.completions.with_raw_response.create(model=OPENAI_MODEL,
                                                            messages=[{"role": "user", "content": third}])
    assert raw.headers["x-semula-tier"] == "alias" and raw.parse().choices[0].message.content
    replay.stop()
    assert recording_files(folder) == files
