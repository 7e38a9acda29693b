"""recordings.format and recordings.folder: the committed files, their round trip and the incremental sync."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from entries import chat, new_entry
from semula.core.settings import ProjectSettings
from semula.recordings.folder import RecordingsFolder, check
from semula.recordings.format import Recording, RecordingFileError, dumps, loads, relative_path, slug
from semula.store.duckdb.store import DuckDBStore

SSE = (b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
       b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\ndata: [DONE]\n\n')


def recording(body: bytes, streamed: bool = False) -> Recording:
    return Recording(project="p", provider="openai", host="api.openai.com", method="POST",
                     endpoint="/v1/chat/completions", model="gpt-4o", request=chat("Say hello").to_json(), status=200,
                     headers=[("content-type", "application/json")], body=body, streamed=streamed,
                     prompt_tokens=3, completion_tokens=2, upstream_ms=12.5, recorded_at="2026-12-01T00:00:00")


@pytest.mark.parametrize(("body", "streamed", "kind", "answer"), [
    (b'{"z":1,"choices":[{"message":{"content":"Hello"}}],"a":2}', False, "body_json", "Hello"),
    (b'{\n  "choices": [\n    {\n      "message": {\n        "content": "Hi"\n      }\n    }\n  ]\n}', False,
     "body_json", "Hi"),
    (b'{"choices":  [{"message": {"content": "Hi"}}]}', False, "body_text", "Hi"),
    (SSE, True, "body_sse", "Hello"),
    (b"\x00\xff\xfe binary", False, "body_base64", None),
    (b'{"id":1,"id":2}', False, "body_text", None),  # duplicate keys: kept as recorded
])
def test_a_body_round_trips_byte_for_byte(body: bytes, streamed: bool, kind: str, answer: str | None) -> None:
    text = dumps(recording(body, streamed))
    data = json.loads(text)
    assert kind in data["response"] and text.endswith("}\n") and "\r" not in text
    assert data["response"].get("answer_text") == answer
    assert loads(text).body == body


def test_the_envelope_is_sorted_and_the_json_body_keeps_its_order() -> None:
    data = json.loads(dumps(recording(b'{"z":1,"a":2}')))
    assert list(data) == sorted(data)
    assert list(data["response"]["body_json"]) == ["z", "a"]


@pytest.mark.parametrize(("text", "problem"), [
    ("{\n  \"format\": 1,\n<<<<<<< HEAD\n", "line 3: a git conflict marker"),
    ("{\n  \"format\": \n}", "line 3: not JSON"),
    ('{"format": "semula-recording/1"}', r"missing field\(s\): project"),
    ('[]', "a recording is a JSON object"),
])
def test_a_bad_file_names_its_line_and_problem(text: str, problem: str) -> None:
    with pytest.raises(RecordingFileError, match=problem):
        loads(text)


def test_paths_are_readable_and_distinct() -> None:
    assert slug("Déjà vu: what's 2+2?") == "deja-vu-what-s-2-2"
    a = relative_path("p", "openai", "/v1/chat/completions", "Say hello", "fp2:aaa")
    b = relative_path("p", "openai", "/v1/chat/completions", "Say hello", "fp2:bbb")
    assert a.startswith("p/openai/v1-chat-completions/say-hello-") and a != b


def store_with(tmp_path: Path, *texts: str) -> DuckDBStore:
    store = DuckDBStore.open(tmp_path / "data")
    for text in texts:
        store.upsert_entry(new_entry(chat(text)))
    return store


def defaults(project: str) -> ProjectSettings:
    return ProjectSettings()


def test_first_start_exports_the_store_then_syncs_incrementally(tmp_path: Path) -> None:
    store = store_with(tmp_path, "one", "two")
    folder = RecordingsFolder(tmp_path / "rec", tmp_path / "data")
    assert folder.sync(store, defaults).exported == 2
    store.close()

    fresh = DuckDBStore.open(tmp_path / "ci")  # a clean checkout: empty data dir, the committed folder
    clone = RecordingsFolder(tmp_path / "rec", tmp_path / "ci")
    report = clone.sync(fresh, defaults)
    assert (report.loaded, report.unchanged, report.removed) == (2, 0, 0)
    assert sorted(e["last_text"] for e in fresh.list_entries()) == ["one", "two"]
    again = RecordingsFolder(tmp_path / "rec", tmp_path / "ci").sync(fresh, defaults)
    assert (again.loaded, again.unchanged) == (0, 2)

    one = next(p for p in (tmp_path / "rec").rglob("one-*.json"))
    one.unlink()
    (tmp_path / "rec" / "p" / "broken.json").write_text("{ not json")
    report = RecordingsFolder(tmp_path / "rec", tmp_path / "ci").sync(fresh, defaults)
    assert report.removed == 1 and [rel for rel, _ in report.bad] == ["p/broken.json"]
    assert [e["last_text"] for e in fresh.list_entries()] == ["two"]
    assert check(tmp_path / "rec")[1][0][0] == "p/broken.json"
    fresh.close()


def test_an_export_reads_the_store_a_range_at_a_time_and_skips_the_gaps(tmp_path: Path) -> None:
    from semula.recordings.folder import EXPORT_BATCH

    store = store_with(tmp_path, *(f"question {i}" for i in range(2 * EXPORT_BATCH + 5)))
    ids = sorted(e["id"] for e in store.list_entries(limit=1000))
    for gone in (ids[0], ids[EXPORT_BATCH - 1], ids[EXPORT_BATCH], ids[-1]):  # at the batches' edges
        store.delete_entry(gone)
    assert RecordingsFolder(tmp_path / "rec", tmp_path / "data").export(store) == len(ids) - 4
    written = sorted(p.name.split("-")[1] for p in (tmp_path / "rec" / "p").rglob("question-*.json"))
    assert len(written) == len(set(written)) == len(ids) - 4
    store.close()


def test_only_entries_from_the_folder_are_removed(tmp_path: Path) -> None:
    store = store_with(tmp_path)
    folder = RecordingsFolder(tmp_path / "rec", tmp_path / "data")
    folder.sync(store, defaults)
    store.upsert_entry(new_entry(chat("recorded elsewhere")))
    folder.sync(store, defaults)
    assert [e["last_text"] for e in store.list_entries()] == ["recorded elsewhere"]
    store.close()


def test_written_files_are_atomic_and_deletable(tmp_path: Path) -> None:
    store = store_with(tmp_path, "hello")
    folder = RecordingsFolder(tmp_path / "rec", tmp_path / "data")
    entry = store.get_entry(store.list_entries()[0]["id"])
    path = folder.write(entry)
    assert path.exists() and not list(path.parent.glob(".tmp-*"))
    assert (tmp_path / "rec" / ".gitattributes").read_text().strip() == "*.json linguist-generated=true"
    assert folder.delete(entry.id) and not path.exists()
    store.close()


def test_base64_bodies_decode_strictly() -> None:
    data = json.loads(dumps(recording(b"\xff\x00")))
    data["response"]["body_base64"] = "!!!" + base64.b64encode(b"x").decode()
    with pytest.raises(RecordingFileError, match="response body"):
        loads(json.dumps(data))


def test_a_recording_file_deleted_by_a_teammate_closes_its_candidates_in_the_review_log(tmp_path: Path) -> None:
    from semula.core.cascade import Candidate
    from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
    from semula.core.nearmatch import Verdict
    from semula.engine.engine import Engine

    events: list = []
    folder = RecordingsFolder(tmp_path / "rec", tmp_path / "data")
    engine = Engine.open(DuckDBStore.open(tmp_path / "data"), review_log=events.append, folder=folder)
    entry_id = engine.record(new_entry(chat("one")))
    incoming = chat("one please")
    verdict = Verdict("lexical", 0.8, serve=False, review=True, reason="below")
    engine.review.queue("p", incoming, request_fingerprint(incoming), normalised_fingerprint(incoming, (), ()),
                        [Candidate(entry_id, verdict)], {})
    engine.close()
    next((tmp_path / "rec").rglob("one-*.json")).unlink()
    engine = Engine.open(DuckDBStore.open(tmp_path / "data"), review_log=events.append,
                    folder=RecordingsFolder(tmp_path / "rec", tmp_path / "data"))
    assert [e.event for e in events] == ["queued", "closed"]
    engine.close()


def test_a_sync_stopped_between_files_loses_nothing_the_next_one_loads(tmp_path: Path) -> None:
    """The proxy stopping while it loads the folder (`EngineStart.stopping`): the sync stops between files,
    and the next start loads every recording, the ones stored before the stop included."""
    from semula.recordings.files import SyncStopped

    store = store_with(tmp_path, *(f"text {i}" for i in range(5)))
    RecordingsFolder(tmp_path / "rec", tmp_path / "data").sync(store, defaults)
    store.close()
    fresh = DuckDBStore.open(tmp_path / "ci")
    stopping = RecordingsFolder(tmp_path / "rec", tmp_path / "ci")
    asked = iter([False, False, True])
    stopping.stopping = lambda left: next(asked, True)
    with pytest.raises(SyncStopped, match="stopped while loading"):
        stopping.sync(fresh, defaults)
    report = RecordingsFolder(tmp_path / "rec", tmp_path / "ci").sync(fresh, defaults)
    assert report.loaded == 5 and not report.bad
    assert sorted(e["last_text"] for e in fresh.list_entries()) == [f"text {i}" for i in range(5)]
    fresh.close()


def test_a_clean_clones_first_open_derives_nothing_twice(tmp_path: Path) -> None:
    """What the first sync loads is made by this code: no store upgrade re-derives it afterwards (it did,
    3 of 7.5 s at 5,000 recordings), and each project's settings are read once, not once a file."""
    from semula.engine.engine import Engine

    store = store_with(tmp_path, *(f"text {i}" for i in range(4)))
    RecordingsFolder(tmp_path / "rec", tmp_path / "data").sync(store, defaults)
    store.close()
    fresh = DuckDBStore.open(tmp_path / "ci")
    calls: list[tuple[str, int]] = []  # (method, rows it rewrites)
    for name in ("set_last_texts", "set_fingerprints", "project_settings"):
        method = getattr(fresh, name)
        setattr(fresh, name, lambda *a, _name=name, _method=method, **k:
                calls.append((_name, len(a[0]) if a and isinstance(a[0], list) else 0)) or _method(*a, **k))
    engine = Engine.open(fresh, folder=RecordingsFolder(tmp_path / "rec", tmp_path / "ci"))
    try:
        assert engine.sync_report is not None and engine.sync_report.loaded == 4
        assert not [c for c in calls if c[0] != "project_settings" and c[1]]
        assert [c[0] for c in calls].count("project_settings") <= 2  # the project's, its base's (stored_settings)
    finally:
        engine.close()
