"""API keys must never land on disk or in the console.

Recordings and call logs get committed, shared and uploaded as CI artefacts, so a key
that leaks into them is a real incident. We plant realistic-looking keys where clients
really put them (Authorization, x-api-key, Gemini's `?key=` and x-goog-api-key) and
inside prompt text, record and replay through the proxy, stop it, then grep every byte
under the data dir and everything the proxy printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, anthropic_client, curl, openai_client, uniq

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
