"""API keys must never land on disk or in the console.

Recordings and call logs get committed, shared and uploaded as CI artefacts, so a key
that leaks into them is a real incident. We plant realistic-looking keys where clients
really put them (Authorization, x-api-key, Gemini's `?key=` and x-goog-api-key) and
inside prompt text, record and replay through the proxy, stop it, then grep every byte
under the data dir and everything the proxy printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import (
    FakeProvider,
    ProxyHandle,
    anthropic_client,
    clean_env,
    curl,
    openai_client,
    proxy_test_args,
    run_semula,
    semula_cmd,
    uniq,
    wait_for_rows,
)

pytestmark = pytest.mark.e2e

# Shaped like the real things so pattern-based scrubbers are exercised, not just exact matches.
OPENAI_KEY = "sk-proj-PLANTED" + "A1b2C3d4E5f6G7h8J9k0L1m2N"  # 40 chars
GEMINI_KEY = "AIzaPLANTED" + "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9L"  # 39 chars: AIza + 35
ANTHROPIC_KEY = "sk-ant-api03-PLANTED" + "Zx8Cv6Bn4Mq2Wr0Ty8Ui6Op4As2Df0Gh8Jk6L"
KEYS = {"openai": OPENAI_KEY, "gemini": GEMINI_KEY, "anthropic": ANTHROPIC_KEY}
GEMINI_BASE = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"

# The fake echoes the first 40 characters of the prompt, so keys sit after a long preamble:
# what we test is the proxy's handling of requests, not a provider echoing a key back.
PREAMBLE = "Please review this configuration file and tell me what it does; it is quite long: "


def test_preamble_keeps_keys_out_of_the_fake_echo() -> None:
    assert len(PREAMBLE) > 40
    assert len(OPENAI_KEY) == 40 and len(GEMINI_KEY) == 39


def make_calls(proxy: ProxyHandle, run: str) -> list[str]:
    """One call per key placement; returns the answer texts."""
    texts: list[str] = []
    oai = openai_client(proxy.proxy_url, proxy.ca_path, api_key=OPENAI_KEY)
    c = oai.chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "user", "content": f"{PREAMBLE}{run} OPENAI_API_KEY={OPENAI_KEY}\nGEMINI={GEMINI_KEY}"}])
    texts.append(c.choices[0].message.content or "")
    chunks = list(oai.chat.completions.create(model="gpt-4o-mini", stream=True, messages=[
        {"role": "user", "content": f"{PREAMBLE}{run} streamed, key {OPENAI_KEY}"}]))
    texts.append("".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices))

    # Newer SDKs send the key as a Bearer token; the explicit x-api-key covers the classic header too.
    ant = anthropic_client(proxy.proxy_url, proxy.ca_path, api_key=ANTHROPIC_KEY,
                           default_headers={"x-api-key": ANTHROPIC_KEY})
    m = ant.messages.create(model="claude-haiku-5-5", max_tokens=32, messages=[
        {"role": "user", "content": f"{PREAMBLE}{run} ANTHROPIC_API_KEY={ANTHROPIC_KEY}"}])
    texts.append(m.content[0].text)

    body = {"contents": [{"role": "user", "parts": [{"text": f"{PREAMBLE}{run} my key is {GEMINI_KEY}"}]}]}
    for url, headers in [
        (f"{GEMINI_BASE}:generateContent?key={GEMINI_KEY}", []),
        (f"{GEMINI_BASE}:streamGenerateContent?alt=sse&key={GEMINI_KEY}", []),
        (f"{GEMINI_BASE}:generateContent", [f"x-goog-api-key: {GEMINI_KEY}"]),
    ]:
        res = curl(url, proxy_url=proxy.proxy_url, ca_path=proxy.ca_path, data=body, headers=headers)
        assert res.status == 200, (url.split("?")[0], res.status, res.body, proxy.output()[-2000:])
        texts.append(res.body)
    return texts


def leaks_in_dir(data_dir: Path) -> list[str]:
    found = []
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        found += [f"{name} key in {path.relative_to(data_dir)}" for name, key in KEYS.items() if key.encode() in raw]
    return found


def test_planted_keys_never_reach_disk_or_console(proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    run = uniq("secrets")
    data_dir = proxy_factory.new_data_dir("secrets")

    recorder = proxy_factory("auto", data_dir)
    first = make_calls(recorder, run)
    second = make_calls(recorder, run)  # hits: the replay path logs too
    # Keys must still reach the provider: redaction is for storage, not for the wire.
    seen = [r["headers"] for r in fake_provider.requests()]
    assert any(h.get("authorization") == f"Bearer {OPENAI_KEY}" for h in seen)
    assert any(ANTHROPIC_KEY in (h.get("x-api-key", "") + h.get("authorization", "")) for h in seen)
    assert recorder.stop() is not None

    replayer = proxy_factory("replay", data_dir, upstream="gone")
    third = make_calls(replayer, run)
    replayer.stop()

    assert first[0].startswith("fake answer #"), "calls should have reached the fake"
    assert second == first == third, "repeat and replay serve the recorded answers"

    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files), f"nothing logged? {files}"
    assert any(p.name.startswith("semula.duckdb") for p in files), f"nothing stored? {files}"
    assert leaks_in_dir(data_dir) == []

    for proxy in (recorder, replayer):
        console = proxy.output()
        leaked = [name for name, key in KEYS.items() if key in console]
        assert leaked == [], f"{leaked} key(s) printed by the proxy:\n{console[-3000:]}"


# Two JWTs of one shape, differing in the subject: fp1 redacted both to the same "[REDACTED]",
# so the exact tier served A's answer to B. Each secret now becomes a tag keyed by the store's salt.
JWT_A = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJQTEFOVEVEYWxpY2UifQ.UExBTlRFRC1zaWduYXR1cmUtYWxpY2U"
JWT_B = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJQTEFOVEVEYm9iYnkifQ.UExBTlRFRC1zaWduYXR1cmUtYm9iYnk"
CHAT_URL = "https://api.openai.com/v1/chat/completions"


def jwt_chat(proxy: ProxyHandle, run: str, jwt: str):
    body = {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": f"{PREAMBLE}{run} who is this token for? {jwt}"}]}
    return curl(CHAT_URL, proxy_url=proxy.proxy_url, ca_path=proxy.ca_path, data=body,
                headers=[f"authorization: Bearer {OPENAI_KEY}"])


def test_different_jwts_in_a_prompt_never_share_a_recording(proxy_factory: ProxyFactory,
                                                            fake_provider: FakeProvider) -> None:
    run = uniq("jwts")
    data_dir = proxy_factory.new_data_dir("jwts")
    recorder = proxy_factory("record", data_dir)
    recorded = jwt_chat(recorder, run, JWT_A)
    assert recorded.status == 200, (recorded.body, recorder.output()[-2000:])
    recorder.stop()

    replayer = proxy_factory("replay", data_dir, upstream="gone")
    other = jwt_chat(replayer, run, JWT_B)
    same = jwt_chat(replayer, run, JWT_A)
    replayer.stop()
    assert other.status == 404, ("JWT B was served JWT A's answer", other.body, replayer.output()[-2000:])
    assert same.status == 200 and same.body == recorded.body, (same.status, same.body)
    assert same.headers.get("x-semula-tier") == "exact", same.headers

    for path in (p for p in data_dir.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        for jwt in (JWT_A, JWT_B):
            assert not any(part.encode() in raw for part in jwt.split(".")[1:]), f"a JWT in {path}"
    for proxy in (recorder, replayer):
        assert not any(jwt.split(".")[1] in proxy.output() for jwt in (JWT_A, JWT_B)), proxy.output()[-3000:]


# Every kind semula promises to redact, each planted in a prompt, a tool result, a header and the query.
# The AWS secret beside its access key id, after a label and (the second one) alone, found by its shape.
AWS_ID = "AKIAPLANTED0EXAMPLE7"
AWS_SECRET = "Pl4nTedK7MDENG/bPxRfiCYzQ9Wv2Xt5Hs8Lk1Nc"
AWS_SECRET_ALONE = "qZ8vPLANTED3mN/7xKb2Rt+Yw9Lc4Hj6Df1Gs0Ae"
STS_TOKEN = "IQoJb3JpZ2luX2VjEPLANTED//////////wEaCXVzLWVhc3QtMSJHMEUCIQD" + "kX9pQ2Lm7Rt/Vw+Yb3Nc8Hs1Jf0Ga4" * 10
BEARER_TOKEN = "PLANTEDbearer0123456789tokenXYZ"
EVERY_KIND = {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY, "jwt": JWT_A.split(".", 1)[1], "bearer": BEARER_TOKEN,
              "aws id": AWS_ID, "aws secret": AWS_SECRET, "aws secret alone": AWS_SECRET_ALONE, "sts": STS_TOKEN}
PLANTED_TEXT = (f"OPENAI_API_KEY={OPENAI_KEY}\nANTHROPIC_API_KEY={ANTHROPIC_KEY}\ntoken {JWT_A}\n"
                f"Authorization: Bearer {BEARER_TOKEN}\n[default]\naws_access_key_id = {AWS_ID}\n"
                f"aws_secret_access_key = {AWS_SECRET}\naws_session_token = {STS_TOKEN}\nand {AWS_SECRET_ALONE} too")
TOOL_RESULT = json.dumps({"note": PREAMBLE, "Credentials": {"AccessKeyId": AWS_ID, "SecretAccessKey": AWS_SECRET,
                                          "SessionToken": STS_TOKEN}, "found": [OPENAI_KEY, JWT_A, AWS_SECRET_ALONE]})

# What a user's test does, under `semula exec` (which points the SDKs at its proxy): a chat with the
# secrets in the prompt and in a tool's result, in custom headers and in the query string.
EVERY_KIND_CALLS = """
import json, sys
import anthropic, openai
prompt, tool_result, header_value, extra_query, openai_key, anthropic_key = sys.argv[1:7]
query = json.loads(extra_query)
oa = openai.OpenAI(api_key=openai_key, base_url="https://api.openai.com/v1", max_retries=0)
call = {"id": "call_1", "type": "function", "function": {"name": "get_credentials", "arguments": "{}"}}
out = []
for _ in range(2):  # the second is a hit: the replay path logs too
    out.append(oa.chat.completions.create(model="gpt-4o-mini", messages=[
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": tool_result}],
        extra_headers={"x-debug-credentials": header_value}, extra_query=query).choices[0].message.content)
an = anthropic.Anthropic(api_key=anthropic_key, base_url="https://api.anthropic.com", max_retries=0)
out.append(an.messages.create(model="claude-haiku-5-5", max_tokens=64, messages=[
    {"role": "user", "content": prompt},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "get_credentials", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": tool_result}]}],
    extra_headers={"x-debug-credentials": header_value}).content[0].text)
print("RESULT " + json.dumps(out))
"""


def exec_every_kind(mode: str, data_dir: Path, recordings: Path, confdir: Path, upstream_port: int,
                    run: str) -> tuple[list[str], str]:
    query = {"creds": AWS_SECRET_ALONE, "session": STS_TOKEN, "jwt": JWT_A, "note": f"id {AWS_ID} {AWS_SECRET}"}
    argv = [*semula_cmd(), "exec", "--mode", mode, "--data-dir", str(data_dir), "--recordings", str(recordings),
            *proxy_test_args(confdir, upstream_port), "--", sys.executable, "-c", EVERY_KIND_CALLS,
            f"{PREAMBLE}{run}\n{PLANTED_TEXT}", TOOL_RESULT, f"{AWS_ID}:{AWS_SECRET_ALONE} sts={STS_TOKEN}",
            json.dumps(query), OPENAI_KEY, ANTHROPIC_KEY]
    res = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=180, cwd=data_dir.parent)
    lines = [line for line in res.stdout.splitlines() if line.startswith("RESULT ")]
    assert res.returncode == 0 and lines, f"exit {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return json.loads(lines[-1][len("RESULT "):]), res.stdout + res.stderr


def planted_in(root: Path) -> list[str]:
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        found += [f"{name} in {path.relative_to(root)}" for name, value in EVERY_KIND.items() if value.encode() in raw]
    return found


def test_every_kind_of_secret_is_absent_from_every_byte_semula_writes(
        tmp_path: Path, fake_provider: FakeProvider, mitm_confdir: Path, dead_port: int,
        proxy_factory: ProxyFactory) -> None:
    run = uniq("every-kind")
    folder = tmp_path / "semula-recordings"
    recorded_in, replayed_in = tmp_path / "rec" / ".semula", tmp_path / "ci" / ".semula"
    for d in (recorded_in.parent, replayed_in.parent):
        d.mkdir()
    fake_provider.reset()
    recorded, console = exec_every_kind("auto", recorded_in, folder, mitm_confdir, fake_provider.port, run)
    assert all(text.startswith("fake answer #") for text in recorded), recorded
    # Planted for real: every secret reached the provider (redaction is for storage, not the wire).
    wire = json.dumps(fake_provider.requests())
    assert [name for name, value in EVERY_KIND.items() if value not in wire] == []

    # A clean checkout replays from the folder alone: the redacted files fingerprint as the live calls do.
    replayed, replay_console = exec_every_kind("replay", replayed_in, folder, mitm_confdir, dead_port, run)
    assert replayed == recorded

    report = tmp_path / "report" / "report.html"
    res = run_semula("report", "--data-dir", str(recorded_in), "--out", str(report), "--quiet", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr

    written = {p.name for d in (recorded_in, replayed_in) for p in d.rglob("*") if p.is_file()}
    assert {"semula.duckdb", "proxy.log"} <= written and any(n.endswith(".parquet") for n in written), written
    assert len(list(folder.rglob("*.json"))) >= 3 and report.is_file()
    leaks = [f"{where}: {leak}" for where, root in (("folder", folder), ("recorded data dir", recorded_in),
                                                  ("replayed data dir", replayed_in), ("report", report.parent))
             for leak in planted_in(root)]
    leaks += [f"console: {name}" for name, value in EVERY_KIND.items() if value in console + replay_console]
    assert leaks == []


def test_every_kind_of_secret_is_absent_from_a_running_proxys_store_and_wal(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    """The store's write-ahead log holds the rows until a checkpoint: scanned while the proxy still runs."""
    data_dir = proxy_factory.new_data_dir("every-kind-live")
    proxy = proxy_factory("auto", data_dir)
    query = f"creds={AWS_SECRET_ALONE}&session={STS_TOKEN}&jwt={JWT_A}&id={AWS_ID}"
    body = {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": f"{PREAMBLE}{uniq('every-kind-live')}\n{PLANTED_TEXT}"},
        {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT}]}
    res = curl(f"{CHAT_URL}?{query}", proxy_url=proxy.proxy_url, ca_path=proxy.ca_path, data=body,
               headers=[f"authorization: Bearer {OPENAI_KEY}", f"x-debug-credentials: {AWS_ID}:{AWS_SECRET_ALONE}",
                        f"x-amz-security-token: {STS_TOKEN}"])
    assert res.status == 200, (res.body, proxy.output()[-2000:])
    assert wait_for_rows(data_dir, lambda r: r.get("decision") == "miss" or r.get("recorded"), timeout=20)
    live = {p.name for p in data_dir.rglob("*") if p.is_file()}
    assert "semula.duckdb.wal" in live, live
    assert planted_in(data_dir) == []
    proxy.stop()
    assert planted_in(data_dir) == []
    assert [name for name, value in EVERY_KIND.items() if value in proxy.output()] == []
