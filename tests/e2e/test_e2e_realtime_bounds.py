"""Realtime keeps the HTTP path's promises, end to end: redaction and bounds.

A key typed into a conversation (and echoed by the fake in its events and deltas) reaches no byte
semula writes; a client message over the message cap closes its connection with 1009 and a reason
while a plain HTTP call through the same proxy is answered, and the proxy's memory stays put; a
conversation over the loader's file cap is relayed but not recorded, so `recordings check` never
meets a file it refuses.
"""

from __future__ import annotations

import base64
import json
import secrets
import string
import threading
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from conftest import ProxyFactory
from e2e_helpers import (FakeProvider, ProxyHandle, dumped_if_stalled, openai_client, run_semula, wait_for_rows,
                         websocket_ssl_context)
from fake_realtime import FakeRealtime

pytestmark = pytest.mark.e2e

ALNUM = string.ascii_letters + string.digits
OPENAI_KEY = "sk-proj-" + "".join(secrets.choice(ALNUM) for _ in range(40))
AWS_ID = "AKIA" + "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16))
BIG_MB = 32  # twice the default message cap (16 MB)


def auto_proxy(factory: ProxyFactory, fake_provider: FakeProvider, fake_realtime: FakeRealtime,
               recordings: Path) -> ProxyHandle:
    route = fake_realtime.route(fake_provider.port)
    return factory("auto", extra_args=("--recordings", str(recordings), "--set", route))


def realtime_client() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test-not-a-real-key", base_url="https://api.openai.com/v1", max_retries=0)


def options(proxy: ProxyHandle) -> Any:
    return {"proxy": proxy.proxy_url, "ssl": websocket_ssl_context(proxy.ca_path), "open_timeout": 20}


def until_done(connection: Any) -> list[bytes]:
    received = [connection.recv_bytes()]
    while json.loads(received[-1])["type"] != "response.done":
        received.append(connection.recv_bytes())
    return received


def rss_kb(proxy: ProxyHandle) -> int:
    status = Path(f"/proc/{proxy.proc.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def logged_rss_kb(proxy: ProxyHandle) -> int:
    """The proxy's RSS once a call's log row is written: the first write imports pyarrow (~60 MB resident),
    which a baseline taken before it would count against whatever the test measures next."""
    assert wait_for_rows(proxy.data_dir, lambda row: True, timeout=30), proxy.describe()
    return rss_kb(proxy)


def test_a_key_typed_into_a_conversation_reaches_no_byte_semula_writes(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, fake_realtime: FakeRealtime, tmp_path: Path) -> None:
    recordings = tmp_path / "recordings"
    proxy = auto_proxy(proxy_factory, fake_provider, fake_realtime, recordings)
    text = f"my keys are {OPENAI_KEY} and {AWS_ID} ok"
    with realtime_client().realtime.connect(model="gpt-realtime", websocket_connection_options=options(proxy)) as rt:
        rt.recv_bytes()  # session.created
        rt.conversation.item.create(item={"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": text}]})
        rt.response.create()
        events = until_done(rt)
    assert any(OPENAI_KEY.encode() in e for e in events)  # the fake echoed it: the server's events carry it too
    assert proxy.pump.wait_for(lambda s: "openai-realtime GET api.openai.com/v1/realtime → miss #" in s, 20), \
        proxy.describe()
    proxy.stop()  # its store, WAL and call log flushed
    (recording,) = (recordings / "_realtime").rglob("*.json")
    assert "[REDACTED]" in recording.read_text()
    written = [p for root in (recordings, proxy.data_dir, proxy.data_dir.parent) for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in written), written
    for path in written:
        data = path.read_bytes()
        for secret in (OPENAI_KEY, AWS_ID):
            assert secret.encode() not in data, (secret, path)
    for secret in (OPENAI_KEY, AWS_ID):
        assert secret not in proxy.output()


def test_a_message_over_the_cap_closes_its_connection_and_other_flows_go_on(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, fake_realtime: FakeRealtime, tmp_path: Path) -> None:
    proxy = auto_proxy(proxy_factory, fake_provider, fake_realtime, tmp_path / "recordings")
    chat = openai_client(proxy.proxy_url, proxy.ca_path)
    chat.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "warm up"}])
    before = logged_rss_kb(proxy)
    big = json.dumps({"type": "input_audio_buffer.append", "audio": "A" * (BIG_MB * 1024 * 1024)})
    outcome: dict[str, Any] = {}

    started = time.monotonic()

    def send_big() -> None:
        with dumped_if_stalled(proxy) as dumps:  # where the proxy's handlers wait, if the upgrade stalls
            try:
                ws = connect("wss://api.openai.com/v1/realtime?model=gpt-realtime", proxy=proxy.proxy_url,
                             ssl=websocket_ssl_context(proxy.ca_path), open_timeout=20, max_size=None)
            except Exception as e:  # named in the assertion's message below, with when it happened
                outcome["error"] = f"{e!r} after {time.monotonic() - started:.3f} s"
                outcome["proxy state"] = "".join(dumps)
                return
        with ws:
            outcome["upgraded after s"] = round(time.monotonic() - started, 3)
            ws.recv(timeout=20)  # session.created
            try:
                ws.send(big)
                outcome["answer"] = ws.recv(timeout=120)
            except ConnectionClosed as e:
                outcome["closed"] = e.rcvd

    sender = threading.Thread(target=send_big, daemon=True)
    sender.start()
    # the proxy has read the big message's header and drops the rest as it comes: an HTTP call goes out beside it
    assert proxy.pump.wait_for(lambda s: "a client message of 32.0 MB or more is over the 16 MB cap" in s, 60), \
        "\n".join([*(f"{k}: {v}" for k, v in outcome.items()), proxy.describe()])  # a text: shown whole
    answer = chat.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "warm up"}])
    assert answer.choices[0].message.content
    sender.join(180)
    assert not sender.is_alive() and "answer" not in outcome, outcome
    closed = outcome.get("closed")
    assert closed is not None and closed.code == 1009, outcome
    assert closed.reason == "semula: message over the 16 MB cap (semula_realtime_max_message_mb)"
    assert proxy.pump.wait_for(lambda s: "not recorded: a client message over the 16 MB cap" in s, 20)
    assert rss_kb(proxy) - before < BIG_MB * 1024, (before, rss_kb(proxy))  # nothing of the message is kept
    assert not (tmp_path / "recordings" / "_realtime").exists()


def test_a_conversation_over_the_file_cap_is_relayed_but_never_written(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, fake_realtime: FakeRealtime, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMULA_RECORDING_MAX_MB", "1")  # the proxy and `recordings check` both read it
    recordings = tmp_path / "recordings"
    proxy = auto_proxy(proxy_factory, fake_provider, fake_realtime, recordings)
    with realtime_client().realtime.connect(model="gpt-realtime", websocket_connection_options=options(proxy)) as rt:
        rt.recv_bytes()
        rt.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
        for _ in range(24):  # 1.5 MB of audio: its sidecar alone would be over the 1 MB cap
            rt.input_audio_buffer.append(audio=base64.b64encode(secrets.token_bytes(64 * 1024)).decode())
        rt.input_audio_buffer.commit()
        rt.response.create()
        events = until_done(rt)
    assert any(json.loads(e)["type"] == "response.output_audio.delta" for e in events)  # relayed to the end
    # the conversation's console line comes once it is written (or not)
    assert proxy.pump.wait_for(lambda s: "openai-realtime GET api.openai.com/v1/realtime → miss" in s, 20), \
        proxy.describe()
    # the store (and the folder) opens beside the ready line: a conversation not written never waited for it
    assert proxy.pump.wait_for(lambda s: s.startswith(f"semula: recordings {recordings}:"), 20), proxy.describe()
    check = run_semula("recordings", "check", str(recordings))
    assert check.returncode == 0 and "0 bad" in check.stdout, (check.stdout, check.stderr)
    assert "not recorded: over the 1 MB a conversation may have (semula_realtime_max_session_mb)" in proxy.output()
    assert not list((recordings / "_realtime").rglob("*"))
