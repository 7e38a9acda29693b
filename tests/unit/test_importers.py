"""`semula import --from vcr|har|mitmproxy`: each layout read, each exchange converted or skipped with its reason.

The e2e test (tests/e2e/test_e2e_import.py) proves the files equal the proxy's own; these tables cover
the layouts met in the wild and hostile inputs, in-process.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from semula.cli import main
from semula.core.redact import FingerprintKey
from semula.recordings.folder import check
from semula.recordings.importers import convert, har, vcr
from semula.recordings.importers.interaction import Interaction, decoded

KEY = "sk-proj-PLANTEDunitKEY0123456789abcdefABCDEFghij"
GEMINI_KEY = "AIzaPLANTEDgeminiKEY0123456789abcdefABCDEFg"
CHAT = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello import"}]})
ANSWER = json.dumps({"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hi there"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
SSE = ('data: {"id":"c2","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":'
       '{"content":"streamed hi"}}]}\n\ndata: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,'
       '"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


def cassette(*interactions: Any) -> str:
    return json.dumps({"version": 1, "interactions": list(interactions)})


def vcr_item(body: Any = CHAT, answer: Any = ANSWER, *, uri: str = "https://api.openai.com/v1/chat/completions",
             status: Any = None, headers: Any = None) -> dict[str, Any]:
    return {"request": {"method": "POST", "uri": uri, "body": body,
                        "headers": {"Authorization": [f"Bearer {KEY}"], "Content-Type": ["application/json"]}},
            "response": {"status": status or {"code": 200, "message": "OK"},
                         "headers": headers or {"Content-Type": ["application/json"]}, "body": {"string": answer}}}


def run_import(tmp_path: Path, source: str, *files: Path, args: tuple[str, ...] = (),
               env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["import", "--from", source, *map(str, files), "--recordings",
                                    str(tmp_path / "rec"), "--json", *args], env=env)
    assert KEY not in res.output and GEMINI_KEY not in res.output
    assert "Traceback" not in res.output and res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, (json.loads(res.stdout) if res.stdout.startswith("{") else {"error": res.output})


def reasons(report: dict[str, Any]) -> list[str]:
    return [i["reason"] if i["result"] in ("skipped", "error") else "written" for i in report["items"]]


def written_files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "rec").rglob("*.json") if not p.name.startswith("_"))


def no_secrets(tmp_path: Path) -> None:
    """Every file the import wrote (the inputs hold the keys on purpose)."""
    for path in (tmp_path / "rec").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes() and GEMINI_KEY.encode() not in path.read_bytes(), path


def test_vcrpy_yaml_layouts_convert_and_load(tmp_path: Path) -> None:
    import yaml

    gemini = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent?key=" + GEMINI_KEY
    gemini_answer = json.dumps({"candidates": [{"content": {"parts": [{"text": "gem"}], "role": "model"}}],
                                "modelVersion": "gemini-2.0-flash"})
    data = {"version": 1, "interactions": [
        vcr_item(CHAT.encode()),  # vcrpy >= 4: bytes, written as !!binary
        {"request": {"method": "POST", "uri": gemini, "body": json.dumps({"contents": [{"parts": [{"text": "g"}]}]}),
                     "headers": {"x-goog-api-key": GEMINI_KEY}},
         "response": {"status_code": 200, "headers": [["content-type", "application/json"]],  # older httpx layout
                      "content": gemini_answer}},
        vcr_item(json.dumps({"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "s"}]}),
                 SSE, headers={"content-type": "text/event-stream"}),
        vcr_item(CHAT.replace("hello", "zipped"), gzip.compress(ANSWER.encode()),  # vcrpy keeps the wire bytes
                 headers={"content-type": ["application/json"], "content-encoding": ["gzip"]}),
    ]}
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "cassette.yaml"
    path.write_text(yaml.dump(data))
    assert "!!binary" in path.read_text()
    code, report = run_import(tmp_path, "vcr", path)
    assert code == 0 and reasons(report) == ["written"] * 4, report
    docs = [json.loads(p.read_text()) for p in written_files(tmp_path)]
    assert sorted(d["provider"] for d in docs) == ["gemini", "openai", "openai", "openai"]
    assert any(d["response"].get("body_sse") for d in docs), "a stream stored as one body becomes frames"
    assert all(d["response"].get("body_json") or d["response"].get("body_sse") for d in docs), "gzip is decoded"
    assert check(tmp_path / "rec")[1] == [], "every imported file loads"
    no_secrets(tmp_path)


def test_pydantic_ai_parsed_bodies_and_vcrpy_json(tmp_path: Path) -> None:
    item = vcr_item()
    item["request"]["parsed_body"] = json.loads(item["request"].pop("body"))
    item["response"]["parsed_body"] = json.loads(item["response"].pop("body")["string"])
    path = tmp_path / "pydantic.json"
    path.write_text(cassette(item))
    code, report = run_import(tmp_path, "vcr", path)
    assert code == 0 and reasons(report) == ["written"]
    (doc,) = [json.loads(p.read_text()) for p in written_files(tmp_path)]
    assert doc["response"]["answer_text"] == "hi there" and doc["response"]["body_layout"] == "spaced"


def test_har_entries_base64_streams_and_hosts(tmp_path: Path) -> None:
    def entry(url: str, text: str, mime: str = "application/json", encoding: str | None = None) -> dict[str, Any]:
        content = {"mimeType": mime, "text": text, **({"encoding": encoding} if encoding else {})}
        return {"startedDateTime": "2026-01-02T03:04:05.678Z", "time": 12.5,
                "request": {"method": "POST", "url": url, "headers": [{"name": "api-key", "value": KEY}],
                            "postData": {"mimeType": "application/json", "text": CHAT}},
                "response": {"status": 200, "headers": [{"name": "Content-Type", "value": mime},
                                                        {"name": "Content-Encoding", "value": "br"}],
                             "content": content}}

    path = tmp_path / "calls.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": [
        entry("https://api.openai.com/v1/chat/completions", ANSWER),  # decoded text under its br header
        entry("https://api.openai.com/v1/chat/completions?x=1", base64.b64encode(SSE.encode()).decode(),
              "text/event-stream", "base64"),
        entry("https://llm.example.com/v1/chat/completions", ANSWER),
    ]}}))
    code, report = run_import(tmp_path, "har", path)
    assert code == 0 and reasons(report)[:2] == ["written", "written"]
    assert reasons(report)[2].startswith("not a provider host: llm.example.com"), report
    code, report = run_import(tmp_path, "har", path, args=("--hosts", "llm.example.com"))
    assert reasons(report)[2] == "written" and reasons(report)[0].startswith("already in the folder")
    docs = [json.loads(p.read_text()) for p in written_files(tmp_path)]
    assert {d["recorded_at"] for d in docs} == {"2026-01-02T03:04:05.678000"} and {d["upstream_ms"] for d in docs} == {12.5}
    no_secrets(tmp_path)


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(cassette(vcr_item()))
    res = CliRunner().invoke(main, ["import", "--from", "vcr", str(path), "--recordings", str(tmp_path / "rec"),
                                    "--dry-run"])
    assert res.exit_code == 0 and "would write" in res.output and "nothing written" in res.output, res.output
    assert not (tmp_path / "rec").exists()


HOSTILE: list[tuple[str, Any, str]] = [
    ("a non-dict interaction", ["just a string"], "not an interaction"),
    ("a dict without a response", [{"request": {"method": "GET", "uri": "https://api.openai.com/v1/models"}}],
     "not an interaction"),
    ("a status that is not one", [vcr_item(status={"code": "two hundred"})], "is not an HTTP status"),
    ("a body that is a list", [vcr_item(body=[1, 2])], "the request body is a list"),
    ("a request body that cannot be matched", [vcr_item(body='{"a": "\\ud800"}')], "bad request body"),
    ("a 500", [vcr_item(status={"code": 500})], "not recorded: upstream answered 500"),
    ("a stream cut short", [vcr_item(json.dumps({"model": "m", "stream": True, "messages": []}), SSE[:120],
                                     headers={"content-type": ["text/event-stream"]})], "without its terminal event"),
    ("a duplicate", [vcr_item(), vcr_item()], "c.json#1, which is imported"),
    ("headers that are a number", [vcr_item(headers=5)], "headers are a int"),
    ("not http", [vcr_item(uri="file:///etc/passwd")], "not an http(s) URL"),
]


BROKEN = {"a non-dict interaction", "a dict without a response", "a status that is not one", "a body that is a list",
          "headers that are a number"}


@pytest.mark.parametrize(("label", "interactions", "reason"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_interactions_get_a_reason(tmp_path: Path, label: str, interactions: list[Any], reason: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"interactions": interactions}))
    code, report = run_import(tmp_path, "vcr", path)
    broken = any(i["result"] == "error" for i in report["items"])
    assert code == (1 if broken else 0), report  # a broken entry fails the command; a rule's skip does not
    assert broken == (label in BROKEN), report
    assert any(reason in r for r in reasons(report)), reasons(report)
    no_secrets(tmp_path)


def test_hostile_files(tmp_path: Path) -> None:
    files = {"latin1.yaml": "interactions: [caf\xe9]".encode("latin-1"),
             "code.yaml": b"interactions: !!python/object/apply:os.system ['echo pwned']",
             "list.json": b"[1, 2]",
             "deep.json": b'{"interactions": ' + b"[" * 100000 + b"]" * 100000 + b"}"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    code, report = run_import(tmp_path, "vcr", *(tmp_path / n for n in files))
    assert code == 1 and report["errors"] == 3, report  # a non-cassette is left out; a broken one is an error
    assert [r.split(":")[0] for r in reasons(report)] == ["not UTF-8 text", "not YAML", "not a VCR cassette",
                                                         "not JSON"], reasons(report)


def test_names_from_the_cassette_stay_inside_the_folder(tmp_path: Path) -> None:
    sneaky = json.dumps({"model": "../../../etc", "messages": [{"role": "user", "content": "../../../../etc/passwd"}]})
    import yaml

    path = tmp_path / "c.yaml"  # YAML: it holds bytes that are not UTF-8 (!!binary)
    path.write_text(yaml.dump({"interactions": [
        vcr_item(sneaky, uri="https://api.openai.com/v1/../../../chat/completions"),
        vcr_item(sneaky, b"\xff\xfe not utf-8 \x80")]}))
    code, report = run_import(tmp_path, "vcr", path)
    assert code == 0 and reasons(report) == ["written", "written"], report
    root = (tmp_path / "rec").resolve()
    for p in (tmp_path / "rec").rglob("*"):
        assert p.resolve().is_relative_to(root)
    assert check(root)[1] == []
    code, report = run_import(tmp_path, "vcr", path, args=("--project", "../up"))
    assert code != 0 and "invalid project name" in report["error"]


def test_a_huge_body_is_refused_by_the_file_cap(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    big = json.dumps({**json.loads(ANSWER), "pad": "x" * (2 * 2**20)})
    path.write_text(cassette(vcr_item(answer=big)))
    code, report = run_import(tmp_path, "vcr", path, env={"SEMULA_RECORDING_MAX_MB": "1"})
    assert code == 1 and "over the 1 MB" in reasons(report)[0], reasons(report)


def test_decoded_takes_a_body_that_does_not_decode_as_decoded() -> None:
    assert decoded(gzip.compress(b"abc"), "gzip") == b"abc"
    assert decoded(b"plain", "gzip") == b"plain"
    import brotli

    assert decoded(brotli.compress(b"abc"), "br") == b"abc"


def test_convert_is_pure_over_values() -> None:
    item = Interaction(source="x#1", method="POST", url="https://api.openai.com/v1/chat/completions",
                       request_headers=(("authorization", f"Bearer {KEY}"),), request_body=CHAT.encode(), status=200,
                       response_headers=(("content-type", "application/json"),), response_body=ANSWER.encode())
    key = FingerprintKey.generate()
    (first,) = convert.plan([item], convert.ImportOptions(), key)
    (second,) = convert.plan([item], convert.ImportOptions(), key)
    assert isinstance(first, convert.Planned) and first.rel == second.rel and KEY not in first.text
    assert list(vcr.read(Path("c.json"), b"{}"))[0].reason.startswith("not a VCR cassette")
    assert list(har.read(Path("h.har"), b"{}"))[0].reason.startswith("not a HAR file")


def test_mitmproxy_flow_files(tmp_path: Path) -> None:
    from mitmproxy import io as mitm_io
    from mitmproxy.test import tflow

    chat = tflow.tflow(resp=True)
    chat.request.url = "https://api.openai.com/v1/chat/completions"
    chat.request.headers["authorization"] = f"Bearer {KEY}"
    chat.request.content = CHAT.encode()
    chat.response.headers["content-type"] = "application/json"
    chat.response.content = ANSWER.encode()
    other = tflow.tflow(resp=True)  # http://address:22/path: not a provider
    unanswered = tflow.tflow()
    unanswered.request.url = "https://api.openai.com/v1/models"
    path = tmp_path / "calls.mitm"
    with open(path, "wb") as f:
        writer = mitm_io.FlowWriter(f)
        for flow in (chat, other, unanswered, tflow.ttcpflow()):
            writer.add(flow)
    (tmp_path / "garbage.mitm").write_bytes(b"\x00\x01 not a flow file at all")
    code, report = run_import(tmp_path, "mitmproxy", path, tmp_path / "garbage.mitm")
    assert code == 1 and report["errors"] == 1, report  # only the garbage file is an error
    got = reasons(report)
    assert got[0] == "written" and got[1].startswith("not a provider host") and got[2].startswith("no response")
    assert got[3] == "a TCPFlow, not an HTTP flow" and got[4].startswith("not a mitmproxy flow file"), got
    no_secrets(tmp_path)


def test_repeats_sequence_keeps_each_answer_in_order(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(cassette(vcr_item(), vcr_item(answer=ANSWER.replace("hi there", "second")),
                             vcr_item(answer=ANSWER.replace("hi there", "third"))))
    code, report = run_import(tmp_path, "vcr", path, args=("--repeats", "sequence"))
    assert code == 0 and reasons(report) == ["written"] * 3, report
    docs = {p.name: json.loads(p.read_text()) for p in written_files(tmp_path)}
    assert sorted((d.get("occurrence", 1), d["response"]["answer_text"]) for d in docs.values()) == [
        (1, "hi there"), (2, "second"), (3, "third")]
    assert check(tmp_path / "rec")[1] == []
