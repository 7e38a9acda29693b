"""OpenAI's streamed audio answers end with their own terminal event, not `[DONE]`: they are complete, and recorded."""

from __future__ import annotations

import json

import pytest

from semula.providers import adapter_for


def frames(*events: dict) -> list[bytes]:
    return [f"data: {json.dumps(e)}".encode() for e in events]


@pytest.mark.parametrize(("path", "events", "complete"), [
    ("/v1/audio/transcriptions", frames({"type": "transcript.text.delta", "delta": "hi"},
                                        {"type": "transcript.text.done", "text": "hi",
                                         "usage": {"input_tokens": 3, "output_tokens": 1}}), True),
    ("/v1/audio/transcriptions", frames({"type": "transcript.text.delta", "delta": "hi"}), False),  # cut
    ("/v1/audio/speech", frames({"type": "speech.audio.delta", "audio": "AAAA"},
                                {"type": "speech.audio.done", "usage": {"input_tokens": 2, "output_tokens": 9}}), True),
    ("/v1/audio/speech", frames({"type": "speech.audio.delta", "audio": "AAAA"}, {"type": "error"}), False),
])
def test_streamed_audio_answers_are_complete_at_their_terminal_event(path: str, events: list[bytes],
                                                                     complete: bool) -> None:
    adapter = adapter_for("api.openai.com", path)
    assert adapter.stream_complete(events) is complete
    if complete:
        usage = adapter.usage_from_frames(events)
        assert usage.prompt_tokens is not None and usage.completion_tokens is not None
