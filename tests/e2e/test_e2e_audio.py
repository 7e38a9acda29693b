"""OpenAI's audio endpoints record in auto and replay offline, byte for byte.

A transcription uploads a WAV file in a multipart form (the SDK picks a new boundary each run), once
answered in JSON and once streamed (`stream=True`: SSE ending in `transcript.text.done`); a speech
call answers binary MP3 bytes. Both are matched by their exact bytes (`providers/rawbody.py`
for the upload, the JSON body for speech): replay from a fresh proxy, a fresh data dir, a clean copy
of the recordings folder and a dead upstream gives the same text and the same audio bytes, and
another audio file is a miss.
"""

from __future__ import annotations

import hashlib
import io
import math
import shutil
import struct
import wave
from pathlib import Path
from typing import Any

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, openai_client, uniq

pytestmark = pytest.mark.e2e

RUN = uniq("audio")


def wav(frequency: float, seconds: float = 0.05, rate: int = 8000) -> bytes:
    """A short mono 16-bit sine tone as a WAV file."""
    samples = b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * frequency * i / rate)))
                       for i in range(int(seconds * rate)))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)
    return out.getvalue()


TONE = wav(440.0)


def audio_calls(proxy: ProxyHandle) -> dict[str, Any]:
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    raw = client.audio.transcriptions.with_raw_response.create(model="whisper-1", file=("tone.wav", TONE, "audio/wav"),
                                                                prompt=f"a tone {RUN}")
    streamed = client.audio.transcriptions.create(model="gpt-4o-transcribe", file=("tone.wav", TONE, "audio/wav"),
                                                  prompt=f"a streamed tone {RUN}", stream=True)
    events = [event.model_dump(mode="json") for event in streamed]
    speech = client.audio.speech.with_raw_response.create(model="tts-1", voice="alloy", input=f"Say hello {RUN}")
    audio = speech.content
    return {"text": raw.parse().text, "streamed": events, "speech_type": speech.headers.get("content-type"),
            "speech_sha": hashlib.sha256(audio).hexdigest(), "speech_len": len(audio), "id3": audio[:3],
            "decisions": (raw.headers.get("x-semula-decision"), speech.headers.get("x-semula-decision"))}


def test_transcription_and_speech_replay_offline_byte_for_byte(proxy_factory: ProxyFactory,
                                                              fake_provider: FakeProvider, tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    recorder = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    recorded = audio_calls(recorder)
    assert recorded["decisions"] == ("miss", "miss"), recorded
    assert f"of {len(TONE)} bytes" in recorded["text"] and recorded["id3"] == b"ID3"
    assert recorded["speech_type"] == "audio/mpeg"
    assert recorded["streamed"][-1]["type"] == "transcript.text.done" and len(recorded["streamed"]) > 2
    before = fake_provider.count()
    assert audio_calls(recorder)["decisions"] == ("hit", "hit"), "auto serves what it recorded"
    assert fake_provider.count() == before
    recorder.stop()
    files = sorted(p for p in folder.rglob("*.json") if not p.name.startswith("_"))
    assert len(files) == 3, files
    upload = next(p.read_text() for p in files if "semula_raw_body" in p.read_text())
    assert hashlib.sha256(TONE).hexdigest() in upload, "the WAV file is named by its hash, never inlined"

    clean = tmp_path / "clean-recordings"
    shutil.copytree(folder, clean)
    replayer = proxy_factory("replay", proxy_factory.new_data_dir("fresh"), upstream="gone",
                             extra_args=("--recordings", str(clean)))
    replayed = audio_calls(replayer)
    assert replayed["decisions"] == ("hit", "hit"), replayed
    assert {k: v for k, v in replayed.items() if k != "decisions"} == \
           {k: v for k, v in recorded.items() if k != "decisions"}, "the same text and audio bytes"
    assert fake_provider.count() == before, "replay never reached the provider"

    client = openai_client(replayer.proxy_url, replayer.ca_path)
    with pytest.raises(openai.NotFoundError, match="no recording") as miss:
        client.audio.transcriptions.create(model="whisper-1", file=("tone.wav", wav(880.0), "audio/wav"),
                                           prompt=f"a tone {RUN}")
    assert miss.value.response.headers["x-semula-decision"] == "miss"
