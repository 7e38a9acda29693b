"""`semula drift` against the fake provider, whose answers change on purpose (tests/support/fake_drift.py).

The recordings are real calls to the fake, captured as a HAR and imported (`semula import --from har`);
`semula drift` is then run as a user runs it, re-sending them with `x-fake-drift: on`, which makes the
fake answer as a changed API: a renamed field, a new field, a changed type, another answer, an error.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from e2e_helpers import FakeProvider, clean_env, run_semula, uniq

pytestmark = pytest.mark.e2e

PLANTED_KEY = "sk-proj-PLANTEDdriftKEY0123456789abcdefABCDEFghijk"
CASES = ("steady", "DRIFT_RENAME", "DRIFT_NEWFIELD", "DRIFT_TYPE", "DRIFT_ANSWER", "DRIFT_ERROR")


def fake_call(fake: FakeProvider, body: dict[str, Any]) -> dict[str, Any]:
    """One call straight to the fake, as a HAR entry (the key in it, as a browser's HAR keeps it)."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(fake.base + "/v1/chat/completions", data=data, method="POST", headers={
        "content-type": "application/json", "authorization": f"Bearer {PLANTED_KEY}"})
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(fake.ca_path))) as resp:
        answer, headers = resp.read(), list(resp.headers.items())
    return {"startedDateTime": "2025-01-01T00:00:00Z", "time": 5,
            "request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions",
                        "headers": [{"name": "Authorization", "value": f"Bearer {PLANTED_KEY}"}],
                        "postData": {"mimeType": "application/json", "text": data.decode()}},
            "response": {"status": 200, "headers": [{"name": k, "value": v} for k, v in headers],
                         "content": {"mimeType": dict(headers).get("Content-Type", ""), "text": answer.decode()}}}


@pytest.fixture(scope="module")
def folder(fake_provider: FakeProvider, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from click.testing import CliRunner

    from semula.cli import main

    tmp = tmp_path_factory.mktemp("drift")
    prompt = uniq("drift")
    entries = [fake_call(fake_provider, {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": f"{prompt} {case}"}]}) for case in CASES]
    entries.append(fake_call(fake_provider, {"model": "gpt-4o-mini", "stream": True, "messages": [
        {"role": "user", "content": f"{prompt} streamed DRIFT_NEWFIELD"}]}))
    (tmp / "calls.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    res = CliRunner().invoke(main, ["import", "--from", "har", str(tmp / "calls.har"), "--recordings",
                                    str(tmp / "rec")])
    assert res.exit_code == 0 and "7 recording(s) written" in res.output, res.output
    return tmp / "rec"


def drift(folder: Path, fake: FakeProvider, *args: str, key: str | None = PLANTED_KEY, in_process: bool = True,
          **env: str) -> Any:
    """`semula drift` at the fake; in-process (a CliRunner) unless asked, as the command starts no server."""
    argv = ["drift", "--recordings", str(folder), "--base-url", fake.base, "--ca-bundle", str(fake.ca_path),
            "--header", "x-fake-drift:on", *args]
    environ = {"OPENAI_API_KEY": key, "SEMULA_MODE": None, **env}
    if not in_process:
        full = {k: v for k, v in {**clean_env(), **environ}.items() if v is not None}
        return run_semula(*argv, env=full, timeout=120)
    from click.testing import CliRunner

    from semula.cli import main

    res = CliRunner().invoke(main, argv, env=environ)
    return Ran(res.exit_code, res.stdout, res.stderr)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.json")}


def by_case(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for row in report["rows"]:
        case = next((c for c in CASES if c.lower().replace("_", "-") in row["file"]), "steady")
        out["stream" if "streamed" in row["file"] else case] = row
    return out


def no_key_in(*texts: str | bytes) -> None:
    for text in texts:
        assert (PLANTED_KEY.encode() if isinstance(text, bytes) else PLANTED_KEY) not in text


def test_drift_reports_each_change_and_changes_nothing(folder: Path, fake_provider: FakeProvider,
                                                       tmp_path: Path) -> None:
    before, count = snapshot(folder), fake_provider.count()
    res = drift(folder, fake_provider, "--json", str(tmp_path / "report.json"), in_process=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "sending at most 7 call(s)" in res.stdout and "drift: 6 of 7 drifted" in res.stdout, res.stdout
    assert fake_provider.count() == count + 7
    rows = by_case(json.loads((tmp_path / "report.json").read_text()))
    changes = {case: {(c["path"], c["change"], c["severity"]) for c in row["drift"]["shape"]}
               for case, row in rows.items()}
    assert rows["steady"]["outcome"] == "same" and rows["steady"]["drift"]["similarity"] > 0.8
    assert changes["DRIFT_RENAME"] == {("$.choices[].message.content", "removed", "breaking"),
                                       ("$.choices[].message.text", "added", "minor")}
    assert changes["DRIFT_NEWFIELD"] == {("$.service_tier", "added", "minor")}
    assert rows["DRIFT_NEWFIELD"]["drift"]["severity"] == "minor"
    assert changes["DRIFT_TYPE"] == {("$.usage.prompt_tokens", "type", "breaking")}
    assert rows["DRIFT_ANSWER"]["drift"]["similarity"] < 0.6 and rows["DRIFT_ANSWER"]["drift"]["diff"]
    assert rows["DRIFT_ERROR"]["drift"]["status"] == [200, 503] and rows["DRIFT_ERROR"]["drift"]["severity"] == "breaking"
    assert ("$chat.completion.chunk.service_tier", "added", "minor") in changes["stream"]
    assert snapshot(folder) == before, "without --update no recording changes"
    no_key_in(res.stdout, res.stderr, (tmp_path / "report.json").read_bytes())


def test_cost_caps_and_refusals(folder: Path, fake_provider: FakeProvider, tmp_path: Path) -> None:
    count = fake_provider.count()
    res = drift(folder, fake_provider, "--max-calls", "2", "--json", str(tmp_path / "r.json"))
    assert res.returncode == 0 and "sending at most 2 call(s)" in res.stdout, res.stdout + res.stderr
    outcomes = [(r["outcome"], r["reason"]) for r in json.loads((tmp_path / "r.json").read_text())["rows"]]
    assert fake_provider.count() == count + 2 and outcomes.count(("skipped", "over --max-calls 2 or --max-tokens")) == 5
    res = drift(folder, fake_provider, "--max-tokens", "1")
    assert res.returncode == 0 and fake_provider.count() == count + 2, "one recording alone is over the token cap"
    for refused in (drift(folder, fake_provider, key=None), drift(folder, fake_provider, key="sk-test-placeholder"),
                    drift(folder, fake_provider, SEMULA_MODE="replay")):
        assert refused.returncode != 0 and ("no real API key" in refused.stderr or "replay" in refused.stderr)
    assert fake_provider.count() == count + 2, "a refused drift makes no call"
    res = drift(folder, fake_provider, "--path", "*steady*", "--sample", "1", "--fail")
    assert res.returncode == 0 and fake_provider.count() == count + 3


def test_update_rerecords_drifted_files_in_place(folder: Path, fake_provider: FakeProvider, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "rec"
    shutil.copytree(folder, copy)
    before = snapshot(copy)
    res = drift(copy, fake_provider, "--update", "--fail")
    assert res.returncode == 1, res.stdout + res.stderr
    after = snapshot(copy)
    assert set(after) == set(before), "re-recorded in place: the same files, no new ones"
    changed = {rel for rel in after if after[rel] != before[rel]}
    assert {r for r in changed if "drift-newfield" in r and "streamed" not in r}
    assert not {r for r in changed if "drift-error" in r}, "a 503 is never recorded over a good answer"
    assert not {r for r in changed if "steady" in r}, "an undrifted recording is left alone"
    newfield = next(json.loads(after[r]) for r in changed if "drift-newfield" in r and "streamed" not in r)
    assert newfield["response"]["body_json"]["service_tier"] == "default"
    check = run_semula("recordings", "check", str(copy))
    assert check.returncode == 0, check.stdout + check.stderr
    for data in after.values():
        no_key_in(data)
