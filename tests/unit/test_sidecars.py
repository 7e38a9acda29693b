"""recordings.sidecars: large binary bodies beside their recording, content-addressed, checked like hostile input."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from entries import chat, new_entry
from semula.core.settings import ProjectSettings
from semula.recordings import sidecars
from semula.recordings.folder import RecordingsFolder, check
from semula.recordings.format import Recording, RecordingFileError, dumps_with_sidecars, loads
from semula.recordings.sidecars import SidecarError, SidecarRef, ref_for, reference_problem, sidecar_name
from semula.store.selection import StoreSpec, open_store

MP3 = b"ID3\x04\x00" + bytes(range(256)) * 400  # ~100 KiB, over the 64 KiB threshold
SMALL = b"\x00\xff" * 100


def recording(body: bytes, request_text: str = "Say it") -> Recording:
    return Recording(project="p", provider="openai", host="api.openai.com", method="POST",
                     endpoint="/v1/audio/speech", model="tts-1", request=chat(request_text).to_json(), status=200,
                     headers=[("content-type", "audio/mpeg")], body=body, streamed=False, prompt_tokens=None,
                     completion_tokens=None, upstream_ms=12.5, recorded_at="2026-12-01T00:00:00",
                     provenance={"user_agent": "OpenAI/Python 1.99.0", "semula": "0.1.0"})


def test_the_name_is_a_function_of_the_bytes() -> None:
    ref = ref_for(MP3)
    assert ref.file == f"mp3-{hashlib.sha256(MP3).hexdigest()[:16]}.bin" == sidecar_name(MP3)
    assert ref.size == len(MP3) and ref.sha256 == hashlib.sha256(MP3).hexdigest()
    assert sidecar_name(b"RIFF\0\0\0\0WAVEfmt ").startswith("wav-") and sidecar_name(b"xyz").startswith("data-")


def test_a_large_binary_body_becomes_a_reference_and_a_small_one_stays_inline() -> None:
    text, blobs = dumps_with_sidecars(recording(MP3), sidecars.DEFAULT_THRESHOLD)
    data = json.loads(text)
    assert data["response"]["body_sidecar"] == ref_for(MP3).to_json() and "body_base64" not in data["response"]
    assert blobs == [(ref_for(MP3), MP3)] and len(text) < 4000
    assert data["provenance"] == {"user_agent": "OpenAI/Python 1.99.0", "semula": "0.1.0"}
    small, none = dumps_with_sidecars(recording(SMALL), sidecars.DEFAULT_THRESHOLD)
    assert "body_base64" in json.loads(small)["response"] and none == []
    json_body = b'{"a": "' + b"x" * 100_000 + b'"}'
    assert "body_json" in json.loads(dumps_with_sidecars(recording(json_body), 10)[0])["response"]
    with pytest.raises(RecordingFileError, match="read without its folder"):
        loads(text)
    assert loads(text, sidecar=lambda ref: MP3).body == MP3


GOOD = ref_for(MP3).to_json()


@pytest.mark.parametrize(("value", "problem"), [
    ({**GOOD, "file": "../../etc/passwd"}, "not a sidecar name"),
    ({**GOOD, "file": "/etc/passwd"}, "not a sidecar name"),
    ({**GOOD, "file": "sub/" + GOOD["file"]}, "not a sidecar name"),
    ({**GOOD, "file": "mp3-0000000000000000.bin"}, "is not the name of sha256"),
    ({**GOOD, "size": 10**15}, "is not a number of bytes"),
    ({**GOOD, "size": -1}, "is not a number of bytes"),
    ({**GOOD, "size": True}, "is not a number of bytes"),
    ({**GOOD, "sha256": "ABC"}, "is not 64 lower-case hex"),
    ({**GOOD, "extra": 1}, "exactly sha256, size and file"),
    ("mp3.bin", "exactly sha256, size and file"),
])
def test_a_hostile_reference_is_refused_before_any_file_is_touched(value: object, problem: str) -> None:
    assert problem in (reference_problem(value) or "")


def _folder_with(tmp_path: Path, body: bytes = MP3, request_text: str = "Say it") -> tuple[Path, Path, dict]:
    root = tmp_path / "rec"
    directory = root / "p" / "openai" / "v1-audio-speech"
    text, blobs = dumps_with_sidecars(recording(body, request_text), sidecars.DEFAULT_THRESHOLD)
    directory.mkdir(parents=True, exist_ok=True)
    for ref, data in blobs:
        sidecars.write(root, "p/openai/v1-audio-speech", data)
    path = directory / f"say-it-{hashlib.sha256(request_text.encode()).hexdigest()[:12]}.json"
    path.write_text(text)
    return root, path, json.loads(text)


def test_read_checks_the_file_against_its_reference(tmp_path: Path) -> None:
    root, path, data = _folder_with(tmp_path)
    ref = SidecarRef.from_json(data["response"]["body_sidecar"])
    where = "p/openai/v1-audio-speech"
    assert sidecars.read(root, where, ref) == MP3
    sidecar = root / where / ref.file
    sidecar.write_bytes(MP3[:-1] + b"!")
    with pytest.raises(SidecarError, match="sha256 is not the recording's"):
        sidecars.read(root, where, ref)
    sidecar.write_bytes(MP3 + b"more")
    with pytest.raises(SidecarError, match="bytes, the recording says"):
        sidecars.read(root, where, ref)
    sidecar.unlink()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(MP3)
    sidecar.symlink_to(outside)
    with pytest.raises(SidecarError, match="symbolic link"):
        sidecars.read(root, where, ref)
    sidecar.unlink()
    with pytest.raises(SidecarError, match="missing"):
        sidecars.read(root, where, ref)


def test_the_same_bytes_are_stored_once_and_pruned_only_when_no_recording_refers_to_them(tmp_path: Path) -> None:
    root, first, _ = _folder_with(tmp_path, request_text="Say it")
    _, second, _ = _folder_with(tmp_path, request_text="Say it again")
    bins = sorted((root / "p/openai/v1-audio-speech").glob("*.bin"))
    assert len(bins) == 1
    assert sidecars.unreferenced(root) == []
    first.unlink()
    assert sidecars.prune(root) == [] and bins[0].exists(), "still shared by the second recording"
    second.unlink()
    assert sidecars.unreferenced(root) == [f"p/openai/v1-audio-speech/{bins[0].name}"]
    assert sidecars.prune(root, "p/openai/v1-audio-speech") == [f"p/openai/v1-audio-speech/{bins[0].name}"]
    assert not bins[0].exists()


def test_a_bad_sidecar_costs_only_its_own_recording(tmp_path: Path) -> None:
    root, good, _ = _folder_with(tmp_path, request_text="Say it")
    _, bad, data = _folder_with(tmp_path, body=MP3 + b"other", request_text="Say other")
    data["response"]["body_sidecar"]["file"] = "../../../etc/passwd"
    bad.write_text(json.dumps(data))
    good_count, problems = check(root)
    assert good_count == 1 and [rel for rel, _ in problems] == [bad.relative_to(root).as_posix()]
    assert "not a sidecar name" in problems[0][1]
    data["response"]["body_sidecar"] = ref_for(MP3 + b"tampered").to_json()
    bad.write_text(json.dumps(data))
    _, problems = check(root)
    assert "missing" in problems[0][1]


def test_the_folder_writes_a_sidecar_first_and_loads_it_back(tmp_path: Path) -> None:
    root = tmp_path / "rec"
    store = open_store(StoreSpec.parse(None, tmp_path / "data"))
    folder = RecordingsFolder(root, tmp_path / "data")
    entry_id = store.upsert_entry(new_entry(chat("Read it aloud"), body=MP3,
                                            provenance={"user_agent": "ua/1", "semula": "0.1.0"}))
    path = folder.write(store.get_entry(entry_id))
    assert [p.name for p in path.parent.glob("*.bin")] == [sidecar_name(MP3)]
    assert os.path.getsize(path) < 4000
    fresh = open_store(StoreSpec.parse(None, tmp_path / "fresh"))
    report = RecordingsFolder(root, tmp_path / "fresh").sync(fresh, lambda _p: ProjectSettings())
    assert report.loaded == 1 and not report.bad
    (loaded,) = [fresh.get_entry(i) for i, *_ in fresh.index_rows()]
    assert loaded.body == MP3
    assert loaded.provenance["user_agent"] == "ua/1" and loaded.provenance["recorded_at"]
    store.close()
    fresh.close()


def test_deleting_a_recording_keeps_a_sidecar_another_still_refers_to(tmp_path: Path) -> None:
    store = open_store(StoreSpec.parse(None, tmp_path / "data"))
    folder = RecordingsFolder(tmp_path / "rec", tmp_path / "data")
    ids = [store.upsert_entry(new_entry(chat(text), body=MP3)) for text in ("Read it aloud", "Read it again")]
    paths = [folder.write(store.get_entry(i)) for i in ids]
    (sidecar,) = paths[0].parent.glob("*.bin")
    assert paths[0].parent == paths[1].parent
    folder.delete(ids[0])
    assert sidecar.exists() and not paths[0].exists()
    folder.delete(ids[1])
    assert not sidecar.exists()
    store.close()


def test_a_realtime_conversation_keeps_its_audio_sidecar_from_pruning(tmp_path: Path) -> None:
    """`_realtime/<project>/` is outside the recordings scan, yet its files' sidecars are referenced."""
    audio = b"\x01\x02" * 40_000
    here = tmp_path / "_realtime" / "default"
    here.mkdir(parents=True)
    ref = sidecars.write(tmp_path / "_realtime", "default", audio)
    (here / "realtime-gpt-abc.json").write_text(json.dumps({"version": 1, "audio_sidecar": ref.to_json()}))
    assert sidecars.unreferenced(tmp_path) == [] and sidecars.prune(tmp_path) == []
    (here / "realtime-gpt-abc.json").unlink()
    assert sidecars.prune(tmp_path) == [f"_realtime/default/{ref.file}"]
