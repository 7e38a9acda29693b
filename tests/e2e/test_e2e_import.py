"""`semula import`: real VCR cassettes (vcrpy itself, recording the real SDKs), HAR and mitmproxy flow files
become the recording files the proxy writes for the same calls, and replay offline.

One proxy in auto mode records the calls into folder A while vcrpy, inside the client, records the same
calls into cassettes and mitmproxy's own `save_stream_file` writes them to a flow file. Imported into
other folders, each file must be the proxy's own (byte for byte but for the time it was recorded), and
a replay proxy with a dead upstream must give the SDKs the same answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e_helpers import anthropic_client, openai_client, uniq

pytestmark = pytest.mark.e2e

PLANTED_KEY = "sk-proj-PLANTEDimportKEY0123456789abcdefABCDEFgh"
PLANTED_QUERY_KEY = "AIzaPLANTEDqueryKEY0123456789abcdefABCDE"


# What each cassette records: vcrpy's YAML every kind of call, the others one call each.
CALLS = {"yaml": ("plain", "events", "anthropic"), "json": ("plain",), "pydantic_ai": ("anthropic",)}


def calls(proxy_url: str, ca: Path, prompt: str, suffix: str, which: tuple[str, ...]) -> dict[str, Any]:
    """What a user's test does: a chat, a stream and an Anthropic message, through the official SDKs."""
    oa, out = openai_client(proxy_url, ca, api_key=PLANTED_KEY), {}
    if "plain" in which:
        out["plain"] = oa.chat.completions.create(model="gpt-4o-mini", messages=[
            {"role": "user", "content": f"{prompt} plain {suffix}"}]).choices[0].message.content
    if "events" in which:
        stream = oa.chat.completions.create(model="gpt-4o-mini", stream=True,
                                            messages=[{"role": "user", "content": f"{prompt} streamed {suffix}"}])
        out["events"] = [c.model_dump(exclude_none=True) for c in stream]
    if "anthropic" in which:
        an = anthropic_client(proxy_url, ca, api_key=PLANTED_KEY)
        out["anthropic"] = an.messages.create(model="claude-haiku-5-5", max_tokens=64, messages=[
            {"role": "user", "content": f"{prompt} anthropic {suffix}"}]).content[0].text
    return out


class PydanticAiSerializer:
    """pydantic-ai's cassette serializer (tests/json_body_serializer.py): JSON bodies stored parsed, under
    `parsed_body`, with volatile and x- headers filtered out."""

    FILTERED = {"authorization", "date", "request-id", "server", "user-agent", "via", "set-cookie", "api-key"}

    @classmethod
    def serialize(cls, cassette: dict[str, Any]) -> str:
        import yaml

        for interaction in cassette["interactions"]:
            for data in interaction.values():
                headers = {k.lower(): v for k, v in data.get("headers", {}).items()}
                headers = {k: v for k, v in headers.items() if k not in cls.FILTERED
                           and not k.startswith(("anthropic-", "cf-", "x-"))}
                data["headers"] = headers
                if any(h.startswith("application/json") for h in headers.get("content-type", [])):
                    body = data.get("body")
                    body = body.get("string") if isinstance(body, dict) else body
                    if body is not None:
                        data["parsed_body"] = json.loads(body)
                        del data["body"]
        return yaml.dump(cassette, allow_unicode=True, width=120)

    @staticmethod
    def deserialize(text: str) -> dict[str, Any]:
        import yaml

        cassette = yaml.safe_load(text)
        for interaction in cassette["interactions"]:
            for kind, data in interaction.items():
                parsed = data.pop("parsed_body", None)
                if parsed is not None:
                    data["body"] = {"string": json.dumps(parsed)} if kind == "response" else json.dumps(parsed)
        return cassette


@pytest.fixture(scope="module")
def recorded(module_proxy_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import vcr

    tmp = tmp_path_factory.mktemp("import")
    folder_a, flows = tmp / "proxy-recordings", tmp / "flows.mitm"
    proxy = module_proxy_factory("auto", extra_args=("--recordings", str(folder_a),
                                                     "--set", f"save_stream_file={flows}"))
    prompt = uniq("imported")
    recorder = vcr.VCR(record_mode="all", decode_compressed_response=False)
    recorder.register_serializer("pydantic_ai", PydanticAiSerializer)
    answers = {}
    for serializer, name in (("yaml", "yaml.yaml"), ("json", "json.json"), ("pydantic_ai", "pydantic.yaml")):
        with recorder.use_cassette(str(tmp / "cassettes" / name), serializer=serializer):
            answers[serializer] = calls(proxy.proxy_url, proxy.ca_path, prompt, serializer, CALLS[serializer])
    proxy.stop()  # flushes the flow file
    return {"tmp": tmp, "folder_a": folder_a, "flows": flows, "cassettes": tmp / "cassettes", "answers": answers,
            "prompt": prompt, "ca": proxy.ca_path, "factory": module_proxy_factory}


def recordings(folder: Path) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for p in folder.rglob("*.json") if not p.name.startswith("_")}


def comparable(path: Path, *, header_order: bool = True) -> dict[str, Any]:
    """A recording file without what differs between two recordings of one call: when, and how long."""
    doc = json.loads(path.read_text())
    doc.pop("recorded_at")
    doc.pop("upstream_ms")
    if not header_order:
        doc["response"]["headers"] = sorted(doc["response"]["headers"])
    return doc


def semula_import(*args: str, folder: Path) -> Any:
    """The command in-process (a proxy is what needs its own process here, the import is a plain CLI run)."""
    from click.testing import CliRunner

    from semula.cli import main

    res = CliRunner().invoke(main, ["import", *args, "--recordings", str(folder), "--json"])
    assert res.exit_code == 0, res.output
    assert PLANTED_KEY not in res.output
    return json.loads(res.output)


def no_secret_in(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            assert PLANTED_KEY.encode() not in raw and PLANTED_QUERY_KEY.encode() not in raw, f"a key reached {path}"


def test_vcr_cassettes_import_as_the_proxys_own_files_and_replay_offline(recorded: dict[str, Any]) -> None:
    cassettes, folder_a = recorded["cassettes"], recorded["folder_a"]
    assert PLANTED_KEY.encode() in (cassettes / "yaml.yaml").read_bytes(), "vcrpy keeps the key: the import must drop it"
    folder_b = recorded["tmp"] / "imported"
    report = semula_import("--from", "vcr", str(cassettes), folder=folder_b)
    assert [i["result"] for i in report["items"]] == ["written"] * 5, report
    no_secret_in(folder_b)
    proxy_files, imported = recordings(folder_a), recordings(folder_b)
    assert set(imported) == set(proxy_files) and len(imported) == 5
    for rel, path in imported.items():
        if "pydantic" in rel:  # its serializer drops headers and re-dumps JSON bodies: the request and answer stay
            ours, theirs = comparable(path), comparable(proxy_files[rel])
            assert ours["request"] == theirs["request"] and ours["response"]["answer_text"] == theirs["response"][
                "answer_text"], rel
            continue
        # vcrpy's YAML sorts header names: the order is all that may differ from the proxy's own file
        assert comparable(path, header_order=False) == comparable(proxy_files[rel], header_order=False), rel
    streamed = [json.loads(p.read_text()) for r, p in imported.items() if "streamed" in r]
    assert streamed and all(doc["response"].get("body_sse") for doc in streamed), "a stream must become frames"

    again = semula_import("--from", "vcr", str(cassettes), folder=folder_b)
    assert {i["result"] for i in again["items"]} == {"skipped"}
    assert all("already in the folder" in i["reason"] for i in again["items"])

    replay = recorded["factory"]("replay", upstream="gone", extra_args=("--recordings", str(folder_b)))
    for serializer, expected in recorded["answers"].items():
        assert calls(replay.proxy_url, replay.ca_path, recorded["prompt"], serializer, CALLS[serializer]) == expected


def test_a_mitmproxy_flow_file_imports_byte_identical_to_the_proxys_files(recorded: dict[str, Any]) -> None:
    from mitmproxy import io as mitm_io

    with open(recorded["flows"], "rb") as f:
        flows = list(mitm_io.FlowReader(f).stream())
    assert flows, "the proxy's save_stream_file wrote no flow"
    for flow in flows:  # saved after map_remote sent them to the fake: back to the host the SDK asked for
        host = "api.anthropic.com" if flow.request.path.startswith("/v1/messages") else "api.openai.com"
        flow.request.host, flow.request.port, flow.request.headers["host"] = host, 443, host
    unmapped = recorded["tmp"] / "unmapped.mitm"
    with open(unmapped, "wb") as f:
        writer = mitm_io.FlowWriter(f)
        for flow in flows:
            writer.add(flow)
    folder_c = recorded["tmp"] / "from-flows"
    report = semula_import("--from", "mitmproxy", str(unmapped), folder=folder_c)
    written = [i for i in report["items"] if i["result"] == "written"]
    assert len(written) == 4, report  # the plain calls: a stream's body is not kept in a flow file
    assert [i["reason"] for i in report["items"] if i["result"] == "skipped"] == [
        "the response body was streamed through and not kept"]
    no_secret_in(folder_c)
    proxy_files = recordings(recorded["folder_a"])
    for rel, path in recordings(folder_c).items():
        assert comparable(path) == comparable(proxy_files[rel]), rel
