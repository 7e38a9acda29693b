"""Realtime: the conversation model, the turn-by-turn matcher, the file (audio in a sidecar, hostile input
refused), and a conversation as a recording of its kind in the store and the recordings folder."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from semula.core.conversation import (
    MAX_REASON_BYTES, Conversation, Message, ReplaySession, close_reason, normalised, realtime_path, url_key,
)
from semula.engine.engine import Engine
from semula.recordings import conversation_file as fileformat, sidecars
from semula.recordings.conversation_file import RealtimeFileError
from semula.recordings.conversations import new_entry
from semula.recordings.folder import RecordingsFolder
from semula.store.duckdb.store import DuckDBStore


def server(event: dict, at: float = 1.0) -> Message:
    return Message(False, at, text=json.dumps(event))


def client(event: dict, at: float = 1.0) -> Message:
    return Message(True, at, text=json.dumps(event))


def item(text: str, event_id: str = "evt_1") -> dict:
    return {"type": "conversation.item.create", "event_id": event_id,
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}


def conversation(*texts: str, url: str = "/v1/realtime?model=gpt-realtime") -> Conversation:
    messages = [server({"type": "session.created", "event_id": "e0", "session": {"id": "sess_1"}})]
    for n, text in enumerate(texts):
        messages += [client(item(text)), client({"type": "response.create"}),
                     server({"type": "response.created", "response": {"id": f"resp_{n}", "created_at": 5}}),
                     server({"type": "response.output_text.delta", "delta": f"re: {text}", "item_id": "item_9"}),
                     server({"type": "response.done"})]
    return Conversation("default", "api.openai.com", url, tuple(messages), 1000)


@pytest.mark.parametrize(("path", "key"), [
    ("/v1/realtime?model=gpt-realtime", "/v1/realtime?model=gpt-realtime"),
    ("/v1/realtime?model=m&api_key=sk-secret", "/v1/realtime?model=m"),
    ("/openai/realtime?deployment=d&api-version=2025-04-01-preview",
     "/openai/realtime?api-version=2025-04-01-preview&deployment=d"),
    ("/v1/realtime/", "/v1/realtime"),
    ("//v1/realtime?key=AIzaSecret", "/v1/realtime"),
])
def test_url_key_drops_credentials_and_sorts(path: str, key: str) -> None:
    assert url_key(path) == key


@pytest.mark.parametrize(("path", "expected"), [
    ("/v1/realtime?model=x", True), ("/openai/realtime", True), ("/v1/chat/completions", False),
    ("/v1/realtime/calls", False), ("/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
                                     False),  # Gemini Live: not yet
])
def test_realtime_paths(path: str, expected: bool) -> None:
    assert realtime_path(path) is expected


@pytest.mark.parametrize(("a", "b", "same"), [
    (item("hi", "evt_1"), item("hi", "evt_2"), True),  # event ids differ every run
    ({"type": "conversation.item.truncate", "item_id": "item_a"}, {"type": "conversation.item.truncate",
                                                                  "item_id": "item_b"}, True),
    ({"type": "x", "created_at": 1}, {"type": "x", "created_at": 2}, True),
    (item("hi"), item("ho"), False),
    ({"type": "response.create"}, {"type": "response.cancel"}, False),
])
def test_normalisation(a: dict, b: dict, same: bool) -> None:
    assert (normalised(client(a)) == normalised(client(b))) is same


def test_a_non_json_message_is_compared_as_it_is() -> None:
    assert normalised(Message(True, 0, text="hello")) != normalised(Message(True, 0, text="hellO"))
    assert normalised(Message(True, 0, data=b"\x00")) == normalised(Message(True, 0, data=b"\x00"))


def test_replay_answers_each_turn_with_what_followed() -> None:
    session = ReplaySession.open([conversation("one", "two")], "/v1/realtime?model=gpt-realtime")
    assert [json.loads(m.text)["type"] for m in session.greeting()] == ["session.created"]
    assert session.answer(client(item("one", "other-id"))).messages == ()  # nothing came before response.create
    answer = session.answer(client({"type": "response.create", "event_id": "e7"}))
    assert [json.loads(m.text)["type"] for m in answer.messages] == ["response.created",
                                                                      "response.output_text.delta", "response.done"]
    session.answer(client(item("two")))
    assert json.loads(session.answer(client({"type": "response.create"})).messages[1].text)["delta"] == "re: two"


def test_a_changed_turn_is_a_miss_that_says_what_differs() -> None:
    session = ReplaySession.open([conversation("one", "two")], "/v1/realtime?model=gpt-realtime")
    session.answer(client(item("one")))
    session.answer(client({"type": "response.create"}))
    answer = session.answer(client(item("three")))
    assert answer.messages == () and answer.miss is not None
    assert answer.miss.startswith("client message 3: $.item.content[0].text") and '"three"' in answer.miss


def test_candidates_narrow_turn_by_turn() -> None:
    session = ReplaySession.open([conversation("one", "two"), conversation("one", "zwei")],
                                 "/v1/realtime?model=gpt-realtime")
    for message in (item("one"), {"type": "response.create"}, item("zwei")):
        assert session.answer(client(message)).miss is None
    assert json.loads(session.answer(client({"type": "response.create"})).messages[1].text)["delta"] == "re: zwei"
    assert len(session.candidates) == 1


@pytest.mark.parametrize(("recordings", "url", "turns", "miss"), [
    ([], "/v1/realtime?model=gpt-realtime", [], "no recording of this URL"),
    ([conversation("one")], "/v1/realtime?model=other", [], "no recording of this URL"),
    ([conversation("one")], "/v1/realtime?model=gpt-realtime", [item("one"), {"type": "response.create"}],
     "the recording ends after 2 client messages; message 3 is new"),
])
def test_misses(recordings: list, url: str, turns: list, miss: str) -> None:
    session = ReplaySession.open(recordings, url)
    for message in turns:
        assert session.answer(client(message)).miss is None
    assert session.answer(client(item("more"))).miss == miss


def test_the_close_reason_fits_a_close_frame() -> None:
    reason = close_reason("é" * 200)
    assert len(reason.encode()) <= MAX_REASON_BYTES and reason.startswith("semula: no recording for this turn: ")


def test_identity_ignores_volatile_values() -> None:
    a, b = conversation("one"), conversation("one")
    b = Conversation(b.project, b.host, b.url, tuple(
        client({**item("one"), "event_id": "zz"}) if m.from_client and "item" in (m.text or "") else m
        for m in b.messages), 1000)
    assert a.identity == b.identity != conversation("two").identity


# ---------------------------------------------------------------- the file


def audio_conversation() -> Conversation:
    pcm = bytes(range(256)) * 40
    chunk = base64.b64encode(pcm).decode()
    return Conversation("default", "api.openai.com", "/v1/realtime?model=m", (
        server({"type": "session.created"}),
        Message(True, 2, text=json.dumps({"type": "input_audio_buffer.append", "audio": chunk}, separators=(",", ":"))),
        client({"type": "response.create"}),
        server({"type": "response.output_audio.delta", "delta": chunk, "item_id": "i"}),
        Message(False, 3, text='{"type":  "odd layout"}'),
        Message(False, 4, data=b"\x00\x01binary"),
    ), 1000, "2026-12-02T00:00:00")


def test_the_file_gives_back_every_message_byte_exact_and_stores_audio_once() -> None:
    recorded = audio_conversation()
    text, audio = fileformat.dumps(recorded, sidecars.ref_for)
    assert len(audio) == 2 * 10240 and "AAECAwQF" not in text  # no base64 audio in the JSON
    document = json.loads(text)
    assert document["messages"][1]["json"]["audio"] == fileformat.AUDIO_PLACEHOLDER
    assert document["messages"][4]["text"] == '{"type":  "odd layout"}'
    loaded = fileformat.loads(text, lambda ref: audio)
    assert loaded.messages == recorded.messages and loaded.url == recorded.url


def record(root: Path, data: Path, *conversations: Conversation) -> list[int]:
    """Record conversations as the proxy does: the engine stores each, then writes its file."""
    engine = Engine.open(DuckDBStore.open(data), folder=RecordingsFolder(root, data))
    try:
        return [engine.record(new_entry(c)) for c in conversations]
    finally:
        engine.close()


def replayable(root: Path, data: Path, url: str = "/v1/realtime?model=m") -> list[Conversation]:
    """What a proxy on a fresh data dir replays from the folder (loaded into its store at start)."""
    engine = Engine.open(DuckDBStore.open(data), folder=RecordingsFolder(root, data))
    try:
        return [c for _, c in engine.conversations("default", url)]
    finally:
        engine.close()


def test_folder_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "recs"
    record(root, tmp_path / "data", audio_conversation())
    (path,) = (root / "_realtime" / "default").glob("*.json")
    assert [p.suffix for p in sorted(path.parent.iterdir())] == [".bin", ".json"]
    document = json.loads(path.read_text())
    assert (document["format"], document["kind"], document["provider"]) == ("semula-recording/1", "realtime", "openai")
    assert replayable(root, tmp_path / "fresh")[0].messages == audio_conversation().messages
    assert replayable(root, tmp_path / "fresh", "/v1/realtime?model=other") == []


def test_a_file_in_the_old_format_still_loads(tmp_path: Path) -> None:
    """A conversation recorded before conversations were a kind of recording (`semula-realtime/1`)."""
    recorded = audio_conversation()
    text, audio = fileformat.dumps(recorded, sidecars.ref_for)
    document = json.loads(text)
    old = {"format": "semula-realtime/1", **{k: document[k] for k in (
        "project", "host", "url", "recorded_at", "close_code", "messages", "audio_sidecar")}}
    directory = tmp_path / "recs" / "_realtime" / "default"
    directory.mkdir(parents=True)
    (directory / "realtime-m-0123456789ab.json").write_text(json.dumps(old, indent=1))
    sidecars.write(tmp_path / "recs", "_realtime/default", audio)
    (loaded,) = replayable(tmp_path / "recs", tmp_path / "data")
    assert loaded.messages == recorded.messages and loaded.identity == recorded.identity


def good_document() -> dict:
    text, _ = fileformat.dumps(conversation("one"), sidecars.ref_for)
    return json.loads(text)


@pytest.mark.parametrize(("change", "problem"), [
    (lambda d: d.update(format="semula-realtime/2"), "not a semula-recording/1 file of kind realtime"),
    (lambda d: d.update(kind="http"), "not a semula-recording/1 file of kind realtime"),
    (lambda d: d.update(provider="anthropic"), "host 'api.openai.com' is not one of anthropic's hosts"),
    (lambda d: d.update(host="evil.example"), "host 'evil.example' is not one of openai's hosts"),
    (lambda d: d.update(endpoint="/v1/chat/completions"), "is not a Realtime connection"),
    (lambda d: d.update(url="/openai/realtime"), "url: is not a URL of the file's endpoint"),
    (lambda d: d.update(project="../x"), "project: '../x' is not a project name"),
    (lambda d: d.update(url="v1/realtime"), "url: does not start with /"),
    (lambda d: d.update(messages={}), "messages: is not a list"),
    (lambda d: d["messages"][0].update(**{"from": "middle"}), "messages[0].from: is neither client nor server"),
    (lambda d: d["messages"][0].update(at_ms=-1), "messages[0].at_ms: is not a time"),
    (lambda d: d["messages"][0].update(text="x"), "messages[0]: has not exactly one of json, text, base64"),
    (lambda d: d["messages"][0].update(layout="pretty"), "messages[0].layout: is not one of"),
    (lambda d: d["messages"][0].update(extra=1), "messages[0]: is not an object of"),
    (lambda d: d["messages"][0].update(audio={"field": "delta", "offset": 0, "size": 1}),
     "messages[0].audio: names no audio placeholder"),
    (lambda d: d.update(audio_sidecar={"sha256": "0" * 64, "size": 1, "file": "../../etc/passwd"}),
     "audio_sidecar.file '../../etc/passwd' is not a sidecar name"),
])
def test_a_hostile_file_is_refused_with_a_reason(change, problem: str) -> None:
    document = good_document()
    change(document)
    with pytest.raises(RealtimeFileError, match=None) as caught:
        fileformat.loads(json.dumps(document), lambda ref: b"")
    assert problem in str(caught.value)


def test_an_audio_slice_outside_the_sidecar_is_refused() -> None:
    text, audio = fileformat.dumps(audio_conversation(), sidecars.ref_for)
    with pytest.raises(RealtimeFileError, match="outside the 10-byte audio sidecar"):
        fileformat.loads(text, lambda ref: audio[:10])


def test_a_bad_file_is_skipped_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "recs"
    record(root, tmp_path / "data", conversation("one", url="/v1/realtime?model=m"))
    (root / "_realtime" / "default" / "broken.json").write_text("{nope")
    os.symlink("/etc/hostname", root / "_realtime" / "default" / "linked.json")
    assert len(replayable(root, tmp_path / "fresh")) == 1
    assert "broken.json skipped: not JSON" in caplog.text
    assert "linked.json skipped: a symbolic link out of the recordings folder" in caplog.text


def test_a_missing_sidecar_refuses_only_that_recording(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "recs"
    record(root, tmp_path / "data", audio_conversation(), conversation("one", url="/v1/realtime?model=m"))
    for sidecar in (root / "_realtime" / "default").glob("*.bin"):
        sidecar.unlink()
    assert len(replayable(root, tmp_path / "fresh")) == 1
    assert "is missing" in caplog.text


def test_a_conversation_is_never_matched_as_an_http_call(tmp_path: Path) -> None:
    """Kept in the store beside HTTP recordings, a conversation stays out of the index and the near tiers."""
    store = DuckDBStore.open(tmp_path)
    entry_id = store.upsert_entry(new_entry(conversation("one")))
    try:
        assert store.get_entry(entry_id).kind == "realtime"
        assert store.index_rows() == [] and store.project_canonicals("default") == []
        assert store.canonicals_after(0) == []
    finally:
        store.close()
