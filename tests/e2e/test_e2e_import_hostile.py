"""`semula import` on hostile files, run as the real command: each bad file or entry costs only itself.

A cassette, HAR or flow file comes from anyone (a pull request, a bug report's attachment). Each
test puts a good exchange beside the hostile one in the same command and checks: no traceback, a
one-line reason naming the file by the path the user gave and the entry's number, the good one
written, and exit status 1 (something could not be imported).
"""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path
from typing import Any

import pytest

from e2e_helpers import clean_env, semula_cmd

pytestmark = pytest.mark.e2e

KEY = "sk-proj-PLANTEDhostileKEY0123456789abcdefABCDEFgh"
MEMORY_LIMIT = 1 << 30  # the command's address space: an alias bomb expanded needs gigabytes


def chat(text: str) -> str:
    return json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})


def answer(text: str) -> str:
    return json.dumps({"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})


def vcr_item(prompt: str) -> dict[str, Any]:
    return {"request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions", "body": chat(prompt),
                        "headers": {"Authorization": [f"Bearer {KEY}"], "Content-Type": ["application/json"]}},
            "response": {"status": {"code": 200, "message": "OK"}, "headers": {"Content-Type": ["application/json"]},
                         "body": {"string": answer(f"answer to {prompt}")}}}


def har_entry(url: str, prompt: str) -> dict[str, Any]:
    return {"startedDateTime": "2025-01-02T03:04:05.000Z", "time": 12.5,
            "request": {"method": "POST", "url": url, "headers": [{"name": "content-type", "value": "application/json"}],
                        "postData": {"mimeType": "application/json", "text": chat(prompt)}},
            "response": {"status": 200, "headers": [{"name": "content-type", "value": "application/json"}],
                         "content": {"mimeType": "application/json", "text": answer(f"answer to {prompt}")}}}


def semula_import(cwd: Path, source: str, *paths: str, args: tuple[str, ...] = (),
                  timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    """The real command in `cwd` (paths relative, as a user types them), its address space capped."""
    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.run([*semula_cmd(), "import", "--from", source, *paths, "--recordings", "rec", "--json", *args],
                          cwd=cwd, capture_output=True, text=True, env=clean_env(), timeout=timeout,
                          preexec_fn=cap_memory)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert KEY not in proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def results(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {i["source"]: (i["result"], i["reason"]) for i in report["items"]}


def written(cwd: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((cwd / "rec").rglob("*.json")) if not p.name.startswith("_")]


def prompts(cwd: Path) -> set[str]:
    return {doc["request"]["body"]["messages"][-1]["content"] for doc in written(cwd)}


ALIAS_BOMB = "\n".join([
    "interactions:",
    "- request:",
    "    method: POST",
    "    uri: https://api.openai.com/v1/chat/completions",
    "    headers: {content-type: [application/json]}",
    "    parsed_body:",
    '      a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    *(f"      a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)),
    "  response:",
    "    status: {code: 200}",
    "    headers: {content-type: [application/json]}",
    "    body: {string: '{}'}",
]) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    suite = tmp_path / "tests" / "cassettes"
    suite.mkdir(parents=True)
    (suite / "bomb.yaml").write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 1024
    (suite / "good.json").write_text(json.dumps({"interactions": [vcr_item("beside the bomb")]}))
    code, report, stderr = semula_import(tmp_path, "vcr", "tests/cassettes/bomb.yaml", "tests/cassettes/good.json")
    got = results(report)
    assert code == 1 and "1 entry could not be imported" in stderr, stderr
    result, reason = got["tests/cassettes/bomb.yaml"]
    assert result == "error" and "alias bomb" in reason, got
    assert got["tests/cassettes/good.json#1"][0] == "written"
    assert prompts(tmp_path) == {"beside the bomb"}


def flow_file(path: Path, flows: list[Any]) -> None:
    from mitmproxy import io as mitm_io

    with open(path, "wb") as f:
        writer = mitm_io.FlowWriter(f)
        for flow in flows:
            writer.add(flow)


def chat_flow(prompt: str) -> Any:
    from mitmproxy.test import tflow

    flow = tflow.tflow(resp=True)
    flow.request.url = "https://api.openai.com/v1/chat/completions"
    flow.request.headers["authorization"] = f"Bearer {KEY}"
    flow.request.content = chat(prompt).encode()
    flow.response.headers["content-type"] = "application/json"
    flow.response.content = answer(f"answer to {prompt}").encode()
    return flow


def test_mitmproxy_flows_with_wild_timestamps_or_header_bytes_cost_only_themselves(tmp_path: Path) -> None:
    far, before = chat_flow("timestamp 1e300"), chat_flow("timestamp -1e18")
    far.request.timestamp_start = 1e300
    before.request.timestamp_start = -1e18
    latin = chat_flow("latin-1 header")
    latin.response.headers.fields = (*latin.response.headers.fields, (b"x-note", b"caf\xe9"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    flow_file(tmp_path / "a" / "sync.mitm", [chat_flow("first good"), far, before, latin, chat_flow("last good")])
    flow_file(tmp_path / "b" / "sync.mitm", [chat_flow("other file")])
    code, report, _ = semula_import(tmp_path, "mitmproxy", "a/sync.mitm", "b/sync.mitm")
    got = results(report)
    assert code == 1, report
    assert got["a/sync.mitm#4"] == ("error", "a response header (x-note) is not UTF-8 text"), got
    # a date that is no date is not the recording's: the import's own time stands in, the flow is imported
    assert [got[f"a/sync.mitm#{n}"][0] for n in (1, 2, 3, 5)] == ["written"] * 4, got
    assert got["b/sync.mitm#1"][0] == "written", "files of one base name are told apart by their paths"
    assert prompts(tmp_path) == {"first good", "timestamp 1e300", "timestamp -1e18", "last good", "other file"}


def test_a_har_url_that_does_not_parse_costs_only_its_entry(tmp_path: Path) -> None:
    har = {"log": {"version": "1.2", "entries": [har_entry("https://[::1/v1/chat", "bad url"),
                                                 har_entry("https://api.openai.com/v1/chat/completions", "good")]}}
    (tmp_path / "calls.har").write_text(json.dumps(har))
    code, report, stderr = semula_import(tmp_path, "har", "calls.har")
    got = results(report)
    assert code == 1 and got["calls.har#2"][0] == "written", (got, stderr)
    result, reason = got["calls.har#1"]
    assert result == "error" and reason == "cannot be converted: ValueError: Invalid IPv6 URL", got
    assert prompts(tmp_path) == {"good"}


def test_a_request_body_over_the_proxys_cap_is_refused_and_one_under_it_imports(tmp_path: Path) -> None:
    """The proxy matches no request body over semula_max_body_mb, so it records none: neither does import."""
    mb = 2**20
    items = [vcr_item("under " + "w " * int(0.45 * mb)), vcr_item("over " + "w " * int(0.55 * mb))]
    (tmp_path / "c.json").write_text(json.dumps({"interactions": items}))
    code, report, _ = semula_import(tmp_path, "vcr", "c.json", args=("--max-body-mb", "1"))
    got = results(report)
    assert code == 1 and got["c.json#1"][0] == "written", got
    assert got["c.json#2"] == ("error", "a body of 1.1 MB is over the 1 MB the proxy's request body cap "
                                        "(semula_max_body_mb, --max-body-mb)"), got


def test_a_60_mb_prompt_is_refused_by_the_default_cap_beside_a_good_entry(tmp_path: Path) -> None:
    big = vcr_item("huge " + "lorem ipsum " * (5 * 2**20))
    (tmp_path / "c.json").write_text(json.dumps({"interactions": [big, vcr_item("small")]}))
    code, report, _ = semula_import(tmp_path, "vcr", "c.json")
    got = results(report)
    assert code == 1 and got["c.json#2"][0] == "written", got
    assert got["c.json#1"][0] == "error" and "over the 32 MB the proxy's request body cap" in got["c.json#1"][1]
