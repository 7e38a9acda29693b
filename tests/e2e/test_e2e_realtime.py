"""The OpenAI Realtime client over WebSocket, recorded in auto and replayed offline, end to end.

One auto proxy relays the `openai` SDK's realtime client (`client.realtime.connect`, two text
turns) to a fake Realtime server (tests/support/fake_realtime.py, TLS WebSockets) and records the
conversation when the client closes it. A fresh replay proxy, with the provider gone and a clean
copy of the recordings folder, answers the same conversation from the recording through its local
answerer: the same server events byte for byte and no connection to the fake. A second turn that
changed ends the session with close code 4000 and a reason saying what differs. The planted key
(bearer header, `api_key` query, `openai-insecure-api-key.` subprotocol) is in no file and no
console line.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import openai
import pytest
from websockets.exceptions import ConnectionClosedError

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, dumped_if_stalled, run_semula, websocket_ssl_context
from fake_realtime import FakeRealtime, converse as fake_converse, synthetic_pcm

pytestmark = pytest.mark.e2e

KEY = "sk-realtime-planted-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
TURNS = ("Hello there, realtime", "What did I just say?")
AZURE = "semula-test.openai.azure.com"


def converse_audio(proxy: ProxyHandle, seconds: float = 1.0) -> list[bytes]:
    """An audio turn: 100 ms appends of 24 kHz PCM16, a commit, and the spoken answer's deltas."""
    client = openai.OpenAI(api_key=KEY, base_url="https://api.openai.com/v1", max_retries=0)
    received: list[bytes] = []
    pcm = synthetic_pcm(seconds)
    options: Any = {"proxy": proxy.proxy_url, "ssl": websocket_ssl_context(proxy.ca_path), "open_timeout": 20}
    with ExitStack() as stack:
        with dumped_if_stalled(proxy) as dumps:  # an upgrade that fails after 10 s says where the proxy waited
            try:
                connection = stack.enter_context(
                    client.realtime.connect(model="gpt-realtime", websocket_connection_options=options))
            except TimeoutError as e:
                raise TimeoutError(f"{e}\n{''.join(dumps)}") from e
        received.append(connection.recv_bytes())
        connection.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
        for start in range(0, len(pcm), 4800):
            connection.input_audio_buffer.append(audio=base64.b64encode(pcm[start:start + 4800]).decode())
        connection.input_audio_buffer.commit()
        connection.response.create()
        while json.loads(received[-1])["type"] != "response.done":
            received.append(connection.recv_bytes())
    return received


def converse(proxy: ProxyHandle, turns: tuple[str, ...] = TURNS, azure: bool = False) -> list[bytes]:
    """The server events the SDK received, raw, over a whole conversation the client closes itself; an upgrade
    that fails after 10 s says where the proxy's connection handlers waited."""
    return fake_converse(proxy.proxy_url, proxy.ca_path, KEY, turns, AZURE if azure else None,
                         watch=lambda: dumped_if_stalled(proxy))


def explained(proxy: ProxyHandle, fake: FakeRealtime, talk: Callable[[], list[bytes]]) -> list[bytes]:
    """The conversation's events; a failure says what the fake saw and the proxy's output."""
    try:
        return talk()
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}; the fake saw {fake.connections} connections "
                             f"({fake.paths}); {proxy.describe()}") from e


def converse_or_explain(proxy: ProxyHandle, fake: FakeRealtime, azure: bool = False) -> list[bytes]:
    return explained(proxy, fake, lambda: converse(proxy, azure=azure))


@pytest.fixture(scope="module")
def recorded(module_proxy_factory: ProxyFactory, fake_provider: FakeProvider, fake_realtime: FakeRealtime,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    recordings = tmp_path_factory.mktemp("realtime") / "recordings"
    # the provider hosts already go to the fake provider; its realtime path goes on to the WebSocket fake
    route = fake_realtime.route(fake_provider.port)
    azure = f"map_remote=|//{AZURE}/|//127.0.0.1:{fake_realtime.port}/"
    # mitmproxy's connection lines (info) in the output, so a stalled handshake shows where it stopped
    proxy = module_proxy_factory("auto", extra_args=("--recordings", str(recordings), "--set", route, "--set", azure,
                                                     "--set", "termlog_verbosity=info"))
    events = converse_or_explain(proxy, fake_realtime)
    assert proxy.pump.wait_for(lambda s: "openai-realtime GET api.openai.com/v1/realtime → miss #" in s
                               and "· recorded · 101" in s, 20), proxy.describe()
    azure_events = converse_or_explain(proxy, fake_realtime, azure=True)
    assert proxy.pump.wait_for(lambda s: f"GET {AZURE}/openai/realtime → miss #" in s, 20), proxy.describe()
    clean = tmp_path_factory.mktemp("realtime-clean") / "recordings"
    shutil.copytree(recordings, clean)
    return {"proxy": proxy, "events": events, "azure_events": azure_events, "recordings": clean,
            "connections": fake_realtime.connections}


@pytest.fixture(scope="module")
def replay(module_proxy_factory: ProxyFactory, recorded: dict[str, Any]) -> ProxyHandle:
    return module_proxy_factory("replay", upstream="gone", extra_args=("--recordings", str(recorded["recordings"])))


def test_auto_records_the_conversation_readable_with_its_events(recorded: dict[str, Any]) -> None:
    types = [json.loads(e)["type"] for e in recorded["events"]]
    assert types[:2] == ["session.created", "session.updated"] and types.count("response.done") == 2
    assert "response.output_text.delta" in types and recorded["connections"] == 2
    folder = recorded["recordings"] / "_realtime" / "default"
    files = {json.loads(p.read_text())["host"]: p for p in folder.glob("*.json")}
    assert set(files) == {"api.openai.com", AZURE}
    azure_url = json.loads(files[AZURE].read_text())["url"]
    assert azure_url == "/openai/realtime?api-version=2025-04-01-preview&deployment=gpt-realtime"
    document = json.loads(files["api.openai.com"].read_text())
    assert document["url"] == "/v1/realtime?model=gpt-realtime"
    assert [m["json"]["type"] for m in document["messages"] if m["from"] == "client"] == [
        "session.update", "conversation.item.create", "response.create", "conversation.item.create",
        "response.create"]


def test_replay_answers_offline_with_the_same_events(replay: ProxyHandle, recorded: dict[str, Any],
                                                     fake_realtime: FakeRealtime) -> None:
    assert converse(replay) == recorded["events"]  # byte for byte, ids included
    assert fake_realtime.connections == recorded["connections"]
    assert replay.pump.wait_for(lambda s: "openai-realtime GET api.openai.com/v1/realtime → hit exact" in s, 20), \
        replay.describe()
    assert converse(replay, azure=True) == recorded["azure_events"]
    assert fake_realtime.connections == recorded["connections"]


def test_a_changed_turn_ends_the_session_with_the_reason(replay: ProxyHandle, recorded: dict[str, Any],
                                                         fake_realtime: FakeRealtime) -> None:
    with pytest.raises(ConnectionClosedError) as closed:
        converse(replay, (TURNS[0], "Something else entirely"))
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4000
    assert closed.value.rcvd.reason.startswith("semula: no recording for this turn: client message 4: "
                                               "$.item.content[0].text")
    assert replay.pump.wait_for(lambda s: "realtime replay miss" in s and "Something else entirely" in s, 20), \
        replay.describe()
    assert fake_realtime.connections == recorded["connections"]


def test_the_key_never_reaches_disk_or_console(replay: ProxyHandle, recorded: dict[str, Any]) -> None:
    converse(replay)
    proxies = [recorded["proxy"], replay]
    for proxy in proxies:
        assert proxy.pump.wait_for(lambda s: "hit exact" in s or "recorded" in s, 20)
    roots = [recorded["recordings"], *(p.data_dir for p in proxies), *(p.data_dir.parent for p in proxies)]
    for root in roots:
        for path in Path(root).rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path
    for proxy in proxies:
        assert KEY not in proxy.output()


def test_audio_goes_to_one_sidecar_and_replays_byte_exact(recorded: dict[str, Any], replay: ProxyHandle,
                                                         fake_realtime: FakeRealtime) -> None:
    events = explained(recorded["proxy"], fake_realtime, lambda: converse_audio(recorded["proxy"]))
    assert any(json.loads(e)["type"] == "response.output_audio.delta" for e in events)
    # session.update + 10 appends + commit + response.create
    recorded_lines: list[str] = []  # its third recorded conversation (each line is looked at once)
    assert recorded["proxy"].pump.wait_for(
        lambda s: "· recorded · 101" in s and len(recorded_lines.append(s) or recorded_lines) >= 3, 20)
    source = recorded["proxy"].argv[recorded["proxy"].argv.index("--recordings") + 1]
    folder = Path(source) / "_realtime" / "default"
    sidecars = list(folder.glob("*.bin"))
    assert len(sidecars) == 1 and sidecars[0].stat().st_size == 48000 + 24000  # 1 s in, 0.5 s out, decoded
    target = recorded["recordings"] / "_realtime" / "default"
    (audio_file,) = [p for p in folder.glob("*.json") if not (target / p.name).exists()]
    assert audio_file.stat().st_size < 20_000 and "AAAA" not in audio_file.read_text()
    for path in (audio_file, sidecars[0]):
        shutil.copy(path, target / path.name)
    connections = fake_realtime.connections
    assert converse_audio(replay) == events
    assert fake_realtime.connections == connections


def test_check_and_unused_know_realtime_recordings(module_proxy_factory: ProxyFactory, recorded: dict[str, Any],
                                                   tmp_path: Path) -> None:
    folder = tmp_path / "recordings"
    shutil.copytree(recorded["recordings"], folder)
    conversations = sorted(p.relative_to(folder).as_posix() for p in (folder / "_realtime").rglob("*.json"))
    check = run_semula("recordings", "check", str(folder))
    assert check.returncode == 0 and f"{len(conversations)} recording(s) load, 0 bad" in check.stdout, check

    # A run that replays only the OpenAI conversation leaves the others unused
    proxy = module_proxy_factory("replay", upstream="gone", extra_args=("--recordings", str(folder)))
    converse(proxy)
    # the client has its last event before the proxy's close hook logs the row: stop only once it has
    assert proxy.pump.wait_for(lambda s: "openai-realtime GET api.openai.com/v1/realtime → hit exact" in s, 20), \
        proxy.describe()
    proxy.stop()
    unused = run_semula("recordings", "unused", str(folder), "--data-dir", str(proxy.data_dir), "--json")
    assert unused.returncode == 0, unused.stderr
    listed = {json.loads(line).get("file") for line in unused.stdout.splitlines()}
    documents = {c: json.loads((folder / c).read_text()) for c in conversations}
    used = {c for c, d in documents.items() if d["host"] == "api.openai.com" and "audio_sidecar" not in d}
    assert len(used) == 1 and listed == set(conversations) - used, (listed, conversations)

    (folder / "_realtime" / "default" / "hostile.json").write_text('{"version": 1, "host": "../../etc"}')
    check = run_semula("recordings", "check", str(folder))
    assert check.returncode == 1 and "_realtime/default/hostile.json" in check.stderr, check
