"""Uploads and the provider's own errors travel in the recordings folder and replay offline.

Record with the provider up (the fake), then replay from a fresh data dir and the same recordings
folder with every provider host mapped to a closed port. An SDK's multipart upload picks a new
boundary on every run, and still matches; a raw-bytes upload by curl matches by its bytes; a file
with other content is a miss. A 400 or 404 the request itself caused replays as the same error (the
SDK raises the same exception with the same message); a 401, 429 or 500 is never recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import (
    FakeProvider,
    ProxyHandle,
    clean_env,
    openai_client,
    read_call_log,
    run_semula,
    uniq,
    wait_for_rows,
)

pytestmark = pytest.mark.e2e

RUN = uniq("uploads")
UPLOAD = os.urandom(4096) + f"\r\n--{RUN}\r\n".encode() + bytes(range(256)) * 4  # binary, boundary-like lines
GEMINI_UPLOAD_URL = "https://generativelanguage.googleapis.com/upload/v1beta/files?uploadType=media"
GEMINI_KEY = "AIza-test-key-for-uploads-000000000000000"


def recording_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if not p.name.startswith("_"))


def check_folder(folder: Path) -> None:
    check = run_semula("recordings", "check", str(folder))
    assert check.returncode == 0, f"semula recordings check failed:\n{check.stdout}\n{check.stderr}"


def curl_upload(proxy: ProxyHandle, path: Path) -> tuple[int, dict[str, str], str]:
    """A raw-bytes upload as a shell script sends it: `curl --data-binary @file`."""
    head = path.with_suffix(".headers")
    argv = ["curl", "-sS", "--max-time", "30", "--proxy", proxy.proxy_url, "--cacert", str(proxy.ca_path),
            "-D", str(head), "-H", "content-type: application/octet-stream", "-H", f"x-goog-api-key: {GEMINI_KEY}",
            "--data-binary", f"@{path}", GEMINI_UPLOAD_URL]
    res = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=60)
    assert res.returncode == 0, res.stderr
    block = head.read_text().replace("\r\n", "\n").strip().split("\n\n")[-1].splitlines()
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in block[1:])}
    return int(block[0].split()[1]), headers, res.stdout


def uploads(proxy: ProxyHandle, tmp: Path) -> dict[str, Any]:
    """What a test suite's uploads saw: the file object, the raw upload's answer, the file's content."""
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    raw = client.files.with_raw_response.create(file=("notes.bin", UPLOAD), purpose="assistants")
    created = raw.parse()
    content = client.files.content(created.id).content
    raw_file = tmp / "raw-upload.bin"
    raw_file.write_bytes(UPLOAD[::-1])
    status, headers, body = curl_upload(proxy, raw_file)
    return {"file": created.model_dump(), "decision": raw.headers.get("x-semula-decision"),
            "content_sha": hashlib.sha256(content).hexdigest(), "content_len": len(content),
            "curl": (status, json.loads(body)), "curl_decision": headers.get("x-semula-decision")}


def test_uploads_recorded_in_record_mode_replay_from_a_fresh_data_dir(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    recorder = proxy_factory("record", extra_args=("--recordings", str(folder)))
    recorded = uploads(recorder, tmp_path)
    assert recorded["file"]["object"] == "file" and recorded["file"]["bytes"] == len(UPLOAD)
    assert recorded["file"]["purpose"] == "assistants" and recorded["file"]["filename"] == "notes.bin"
    assert recorded["curl"][0] == 200 and recorded["curl"][1]["file"]["sizeBytes"] == str(len(UPLOAD))
    assert recorded["decision"] == "miss" and recorded["curl_decision"] == "miss"
    recorder.stop()
    rows = read_call_log(recorder.data_dir)
    assert [r["recorded"] for r in rows] == [True, True, True], rows

    files = recording_files(folder)
    assert len(files) == 3, files
    check_folder(folder)
    texts = "\n".join(p.read_text() for p in files)
    assert '"purpose"' in texts and '"assistants"' in texts, "the form's text fields stay readable"
    assert hashlib.sha256(UPLOAD).hexdigest() in texts, "the uploaded file is named by its hash"
    assert GEMINI_KEY not in texts
    upload_files = [p for p in files if "semula_raw_body" in p.read_text()]
    assert len(upload_files) == 2 and all(p.stat().st_size < 4000 for p in upload_files), \
        "an uploaded file's bytes are never inlined into its recording"

    before = fake_provider.count()
    replayer = proxy_factory("replay", proxy_factory.new_data_dir("fresh"), upstream="gone",
                             extra_args=("--recordings", str(folder)))
    replayed = uploads(replayer, tmp_path)
    assert replayed["decision"] == "hit" and replayed["curl_decision"] == "hit"
    assert {k: v for k, v in replayed.items() if "decision" not in k} == \
           {k: v for k, v in recorded.items() if "decision" not in k}, "the same answers, byte for byte"
    assert fake_provider.count() == before, "replay never reached the provider"

    client = openai_client(replayer.proxy_url, replayer.ca_path)
    with pytest.raises(openai.NotFoundError, match="no recording") as miss:
        client.files.create(file=("notes.bin", UPLOAD + b"changed"), purpose="assistants")
    assert miss.value.response.headers["x-semula-decision"] == "miss"


def ask(client: Any, **kwargs: Any) -> Any:
    return client.chat.completions.create(**{"model": "gpt-4o-mini", **kwargs})


ERRORS = {  # what each request gets from the provider, and whether it is a property of the request
    "temperature": ({"messages": [{"role": "user", "content": f"cold {RUN}"}], "temperature": -1},
                    openai.BadRequestError, True),
    "model": ({"model": "no-such-model-7", "messages": [{"role": "user", "content": f"who {RUN}"}]},
              openai.NotFoundError, True),
    "401": ({"messages": [{"role": "user", "content": f"AUTH401 {RUN}"}]}, openai.AuthenticationError, False),
    "429": ({"messages": [{"role": "user", "content": f"RATE429 {RUN}"}]}, openai.RateLimitError, False),
    "500": ({"messages": [{"role": "user", "content": f"FAIL500 {RUN}"}]}, openai.InternalServerError, False),
}


def test_request_errors_replay_as_they_came_and_transient_ones_are_not_recorded(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    recorder = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    client = openai_client(recorder.proxy_url, recorder.ca_path)
    seen: dict[str, openai.APIStatusError] = {}
    for name, (kwargs, exc_type, _) in ERRORS.items():
        with pytest.raises(exc_type) as caught:
            ask(client, **kwargs)
        seen[name] = caught.value
    for name, (kwargs, exc_type, deterministic) in ERRORS.items():  # asked again: only transient errors go upstream
        before = fake_provider.count()
        with pytest.raises(exc_type):
            ask(client, **kwargs)
        assert fake_provider.count() == before + (0 if deterministic else 1), name
    recorder.stop()
    statuses = sorted(json.loads(p.read_text())["response"]["status"] for p in recording_files(folder))
    assert statuses == [400, 404], statuses
    check_folder(folder)
    rows = read_call_log(recorder.data_dir)
    not_recorded = [r for r in rows if r["status"] in (401, 429, 500)]
    assert len(not_recorded) == 6 and not any(r["recorded"] for r in not_recorded)
    assert all("semula_record_errors=true" in (r["error"] or "") for r in not_recorded), not_recorded

    replayer = proxy_factory("replay", proxy_factory.new_data_dir("fresh"), upstream="gone",
                             extra_args=("--recordings", str(folder)))
    client = openai_client(replayer.proxy_url, replayer.ca_path)
    for name, (kwargs, exc_type, deterministic) in ERRORS.items():
        with pytest.raises(openai.APIStatusError) as caught:
            ask(client, **kwargs)
        got = caught.value
        if deterministic:
            assert type(got) is exc_type and str(got) == str(seen[name]) and got.body == seen[name].body, name
            assert got.response.headers["x-semula-decision"] == "hit"
        else:
            assert got.response.headers["x-semula-decision"] == "miss" and "no recording" in str(got), name
    served = wait_for_rows(replayer.data_dir, lambda r: r["decision"] == "hit", at_least=2)
    assert sorted((r["status"], r["error"]) for r in served) == [
        (400, "replayed a recorded 400 answer"), (404, "replayed a recorded 404 answer")], served
    for text in ("hit exact", "replayed a recorded 404 answer"):  # console lines may trail the answers
        assert replayer.pump.wait_for(lambda line: text in line, 20), replayer.describe()


def test_record_errors_true_records_transient_errors_too(proxy_factory: ProxyFactory,
                                                         fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto", extra_args=("--set", "semula_record_errors=true"))
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    kwargs = {"messages": [{"role": "user", "content": f"RATE429 recorded {RUN}"}]}
    with pytest.raises(openai.RateLimitError):
        ask(client, **kwargs)
    before = fake_provider.count()
    with pytest.raises(openai.RateLimitError) as again:
        ask(client, **kwargs)
    assert fake_provider.count() == before and again.value.response.headers["x-semula-decision"] == "hit"
