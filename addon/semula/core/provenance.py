"""Where a recording came from: the client's user-agent, the model that answered, the semula version.

Pure: the request's user-agent and the answer's bytes in, a small dict out. The user-agent is
redacted like any header text (a key pasted into it never reaches a file), and cut to a line.
"""

from __future__ import annotations

import json
from typing import Any

from semula.core.redact import redact_text

MAX_CHARS = 200
_MODEL_KEYS = ("model", "modelVersion")  # OpenAI, Anthropic, Bedrock / Gemini, Vertex
_NESTED = ("message", "response")  # Anthropic's message_start, OpenAI Responses' response.* events


def _model_in(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    for key in _MODEL_KEYS:
        if isinstance(value.get(key), str) and value[key]:
            return value[key]
    for key in _NESTED:
        if (found := _model_in(value.get(key))) is not None:
            return found
    return None


def answered_model(body: bytes, streamed: bool) -> str | None:
    """The model the provider says answered: from a JSON answer, else the first SSE data frame naming one."""
    lines = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")] if streamed else [body]
    for line in lines:
        try:
            value = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(value, list) and value:  # Gemini's streamed JSON array
            value = value[0]
        if (found := _model_in(value)) is not None:
            return _line(found)
    return None


def _line(text: str) -> str:
    return "".join(c for c in text if c.isprintable())[:MAX_CHARS]


def provenance_of(user_agent: str | None, body: bytes, streamed: bool, semula_version: str) -> dict[str, str]:
    """The provenance a live recording keeps (absent values left out)."""
    out = {"semula": semula_version}
    if user_agent:
        out["user_agent"] = _line(redact_text(user_agent))
    if (model := answered_model(body, streamed)) is not None:
        out["answered_model"] = redact_text(model)
    return out
