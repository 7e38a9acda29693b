"""An error answer is recorded by its status, whatever its content type, and replays as it came.

Gemini answers a 400 or 404 on `streamGenerateContent` with `content-type: text/event-stream` and a
plain JSON body (the fake does too, for a prompt holding STREAM404). That body has no stream terminal
event, and must not be judged as a cut stream: the proxy records it (here with
`semula_record_errors=true`, the policy that records every answer) and `semula import` imports it.
Replayed offline it is the same 404, same content type, same bytes, marked a hit; a request with no
recording gets semula's own miss, which says so (`x-semula-decision: miss`, semula's error code, JSON),
so a refusal never passes a test by looking like the error it replaced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, curl, run_semula, uniq, wait_for_rows

pytestmark = pytest.mark.e2e

URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-9-nope:streamGenerateContent?alt=sse"
KEY = "x-goog-api-key: AIza-test-key-for-streamed-errors-0000000"


def ask(proxy: ProxyHandle, prompt: str) -> tuple[int, dict[str, str], str]:
    res = curl(URL, proxy_url=proxy.proxy_url, ca_path=proxy.ca_path, headers=[KEY],
               data={"contents": [{"role": "user", "parts": [{"text": prompt}]}]})
    assert res.returncode == 0, res.stderr
    return res.status, res.headers, res.body


def recording_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if not p.name.startswith(("_", ".")))


def test_a_streamed_error_is_recorded_and_replays_as_it_came(proxy_factory: ProxyFactory,
                                                             fake_provider: FakeProvider, tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    prompt = uniq("STREAM404 which model")
    recorder = proxy_factory("record", extra_args=("--recordings", str(folder),
                                                   "--set", "semula_record_errors=true"))
    status, headers, body = ask(recorder, prompt)
    assert status == 404 and headers["content-type"].startswith("text/event-stream"), (status, headers)
    assert json.loads(body)["error"]["status"] == "NOT_FOUND"
    # the proxy finishes a forwarded call after its client has the answer: wait for its row
    [row] = wait_for_rows(recorder.data_dir, lambda r: r["status"] == 404, timeout=30)
    assert row["recorded"] and row["streamed"], row
    recorder.stop()
    [file] = recording_files(folder)
    recorded = json.loads(file.read_text())
    assert recorded["response"]["status"] == 404 and recorded["streamed"] is True
    assert recorded["response"]["body_json"]["error"]["status"] == "NOT_FOUND", "an error answer reads as JSON"
    check = run_semula("recordings", "check", str(folder))
    assert check.returncode == 0, check.stdout + check.stderr

    before = fake_provider.count()
    replayer = proxy_factory("replay", proxy_factory.new_data_dir("fresh"), upstream="gone",
                             extra_args=("--recordings", str(folder)))
    status, again, replayed = ask(replayer, prompt)
    assert (status, again["content-type"], replayed) == (404, headers["content-type"], body)
    assert again["x-semula-decision"] == "hit"

    status, miss, missed = ask(replayer, uniq("STREAM404 another question"))
    assert status == 404 and miss["x-semula-decision"] == "miss", miss
    assert miss["content-type"].startswith("application/json") and missed != body
    assert json.loads(missed)["error"]["message"].startswith("semula"), missed
    assert fake_provider.count() == before, "replay never reached the provider"


def test_import_keeps_a_streamed_error(tmp_path: Path) -> None:
    answer = json.dumps({"error": {"code": 404, "message": "models/gemini-9-nope is not found", "status": "NOT_FOUND"}})
    entry = {"startedDateTime": "2025-01-01T00:00:00Z", "time": 5,
             "request": {"method": "POST", "url": URL, "headers": [],
                         "postData": {"mimeType": "application/json", "text": json.dumps(
                             {"contents": [{"role": "user", "parts": [{"text": "which model"}]}]})}},
             "response": {"status": 404, "headers": [{"name": "content-type", "value": "text/event-stream"}],
                          "content": {"mimeType": "text/event-stream", "text": answer}}}
    (tmp_path / "calls.har").write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))
    res = run_semula("import", "--from", "har", str(tmp_path / "calls.har"), "--recordings", str(tmp_path / "rec"))
    assert res.returncode == 0 and "1 recording(s) written" in res.stdout, res.stdout + res.stderr
    [file] = recording_files(tmp_path / "rec")
    recorded = json.loads(file.read_text())
    assert recorded["response"]["status"] == 404 and recorded["response"]["body_json"] == json.loads(answer)
