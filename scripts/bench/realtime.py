"""Realtime replay: latency per turn, and the size of a recording with 30 s of audio.

    .venv/bin/python scripts/bench.py realtime     # writes benchmark/results/realtime.md

Records, through a real `semula proxy --mode auto`, a text conversation of TURNS turns and an audio
conversation (30 s of synthetic 24 kHz PCM16 appended in 100 ms chunks, answered with 30 s of
audio) against the fake Realtime server (tests/support/fake_realtime.py), driven by the `openai` SDK's
realtime client. Then a replay proxy with the provider gone answers both: each turn's latency is
the time from `response.create` sent to `response.done` received, on the same client. Writes
benchmark/results/realtime.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from bench.common import REPO  # puts addon/ and tests/support on the path
from e2e_helpers import closed_port, ssl_context, start_proxy
from fake_realtime import FakeRealtime, synthetic_pcm

RESULT = REPO / "benchmark" / "results" / "realtime.md"
KEY = "sk-bench-not-a-real-key"


def connect(proxy: Any) -> Any:
    client = openai.OpenAI(api_key=KEY, base_url="https://api.openai.com/v1", max_retries=0)
    return client.realtime.connect(model="gpt-realtime", websocket_connection_options={
        "proxy": proxy.proxy_url, "ssl": ssl_context(proxy.ca_path), "open_timeout": 30})


def until_done(connection: Any) -> None:
    while json.loads(connection.recv_bytes())["type"] != "response.done":
        pass


def text_turns(proxy: Any, turns: int) -> list[float]:
    took = []
    with connect(proxy) as connection:
        connection.recv_bytes()
        connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        for n in range(turns):
            connection.conversation.item.create(item={"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": f"Turn {n}: tell me something short."}]})
            started = time.perf_counter()
            connection.response.create()
            until_done(connection)
            took.append((time.perf_counter() - started) * 1000)
    return took


def audio_turn(proxy: Any, seconds: float) -> float:
    pcm = synthetic_pcm(seconds)
    with connect(proxy) as connection:
        connection.recv_bytes()
        connection.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
        for start in range(0, len(pcm), 4800):
            connection.input_audio_buffer.append(audio=base64.b64encode(pcm[start:start + 4800]).decode())
        connection.input_audio_buffer.commit()
        started = time.perf_counter()
        connection.response.create()
        until_done(connection)
        return (time.perf_counter() - started) * 1000


def figures(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):.2f} ms · p95 {p95:.2f} ms · max {ordered[-1]:.2f} ms"


def read(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--audio-seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="semula-bench-realtime-"))
    fake = FakeRealtime.start(work / "certs", audio_seconds=args.audio_seconds)
    recordings, confdir = work / "recordings", work / "mitm"
    upstream = closed_port()  # the provider hosts go nowhere; only the realtime path reaches the fake
    route = f"map_remote=|//127.0.0.1:{upstream}/v1/realtime|//127.0.0.1:{fake.port}/v1/realtime"
    auto = start_proxy(mode="auto", data_dir=work / "auto", confdir=confdir, upstream_port=upstream,
                       extra_args=("--recordings", str(recordings), "--set", route))
    try:
        live_text = text_turns(auto, args.turns)
        live_audio = audio_turn(auto, args.audio_seconds)
        for lines in (f"{args.turns + 2} client messages", "recorded · 303 client messages"):
            auto.pump.wait_for(lambda s, lines=lines: lines in s, 60)
    finally:
        auto.stop()
    folder = recordings / "_realtime" / "default"
    files = sorted(folder.iterdir())
    audio_json = next(p for p in files if p.suffix == ".json" and "audio_sidecar" in p.read_text())
    document = json.loads(audio_json.read_text())
    sidecar = folder / document["audio_sidecar"]["file"]
    inline = sum(len(json.dumps(m)) for m in document["messages"]) + 4 * document["audio_sidecar"]["size"] // 3
    connections = fake.connections
    replay = start_proxy(mode="replay", data_dir=work / "replay", confdir=confdir, upstream_port=closed_port(),
                         extra_args=("--recordings", str(recordings)))
    try:
        replay_text = text_turns(replay, args.turns)
        replay_audio = audio_turn(replay, args.audio_seconds)
    finally:
        replay.stop()
    fake.stop()
    assert fake.connections == connections, "a replayed session reached the fake"
    lines = [
        "# Realtime replay: latency per turn and recording size",
        "",
        "`scripts/bench/realtime.py`: the `openai` SDK's realtime client through a real `semula proxy`, against",
        "the fake Realtime server (tests/support/fake_realtime.py, on this machine). A turn is `response.create` sent →",
        "`response.done` received. Replay: a fresh proxy, provider gone, answering from the recordings folder",
        f"(0 connections reached the fake: {fake.connections - connections}).",
        "",
        "| what | recording run (auto, via the fake) | replay (local answerer) |",
        "|---|---|---|",
        f"| text turn ({args.turns} turns, ~12 events each) | {figures(live_text)} | {figures(replay_text)} |",
        f"| audio turn ({args.audio_seconds:.0f} s answer, {int(args.audio_seconds * 10)} delta events) "
        f"| {live_audio:.1f} ms | {replay_audio:.1f} ms |",
        "",
        f"Recording with {args.audio_seconds:.0f} s of audio in ({int(args.audio_seconds * 10)} appends) and "
        f"{args.audio_seconds:.0f} s out (24 kHz PCM16):",
        "",
        f"- JSON file: {audio_json.stat().st_size / 1024:.1f} KiB ({len(document['messages'])} messages)",
        f"- audio sidecar: {sidecar.stat().st_size / 1024 / 1024:.2f} MiB (decoded PCM, both directions)",
        f"- the same messages with base64 audio inline: {inline / 1024 / 1024:.2f} MiB",
        "",
        "Machine:",
        "",
        f"- `uname -a`: {read(['uname', '-a'])}",
        f"- nproc: {read(['nproc'])}; Python {platform.python_version()}; load average while measuring "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} (the machine is shared: figures are noisy)",
        f"- commit: {read(['git', 'rev-parse', 'HEAD'])} (plus the working tree's uncommitted changes)",
        f"- measured: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
    ]
    RESULT.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0
