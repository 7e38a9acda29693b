"""Google's Gemini API (generativelanguage.googleapis.com).

The model and the streaming choice live in the path
(``/v1beta/models/{model}:streamGenerateContent``), not the body. The API key
often travels as ``?key=`` and is removed by ``clean_query``; ``alt=sse``
stays, since it changes the response format. The REST API accepts both
camelCase and snake_case field names, so both are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from semula.core.request.canonical import CanonicalRequest, Layout, Message, content_layout
from semula.core.request.params import ANY_ENDPOINT, EndpointDefaults, ParamRules
from semula.providers.auth import Auth, KeyAuth
from semula.providers.base import Adapter, RawRequest, Usage
from semula.providers.jsonbody import BodyShapeError, as_int, event_json, frame_events, require_list

__all__ = ["GEMINI_PARAMS", "GEMINI_PATH", "GeminiAdapter"]

# Gemini's REST API accepts both spellings of every field (generation_config, generationConfig), at the
# top level and inside these objects; their field values that hold user-named keys (responseSchema
# properties, function parameters) are never renamed. GenerationConfig reference: candidateCount "If
# unset, this will default to 1", responseMimeType "text/plain: (default) Text output". (temperature,
# topP, topK and maxOutputTokens defaults depend on the model: kept.)
GEMINI_PARAMS = ParamRules(
    defaults=(EndpointDefaults(ANY_ENDPOINT, {"candidateCount": 1, "responseMimeType": "text/plain"}),),
    defaults_under="generationConfig",
    both_spellings=("generationConfig", "thinkingConfig", "toolConfig", "functionCallingConfig"),
    sampling_objects=("generationConfig", "generation_config"),
)

# The path names the model and the method (named groups `model` and `method`); Vertex AI serves the
# same bodies under its own paths (providers/vertex.py), so the pattern is the adapter's parameter.
GEMINI_PATH = re.compile(
    r"^/v1(?:beta|alpha)?/(?P<model>(?:models|tunedModels)/[^/:]+):"
    r"(?P<method>generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents)$"
)
_ROLES = {"model": "assistant", "function": "tool"}


def _parts(content: Any, what: str) -> tuple[str, list[Any], Layout | None]:
    """Text parts joined by newlines, the other parts as they are, and how they sat."""
    if content is None:
        return "", [], None
    if isinstance(content, str):
        return content, [], None
    if not isinstance(content, dict):
        raise BodyShapeError(f"{what} is not an object")
    texts: list[str] = []
    parts: list[Any] = []
    layout: list[int | str] = []
    for part in require_list(content.get("parts"), f"{what}.parts"):
        if not isinstance(part, dict):
            raise BodyShapeError(f"a part in {what} is not an object")
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
            layout.append(len(part["text"]))
            extra = {k: v for k, v in part.items() if k != "text"}
            if extra:
                parts.append(extra)  # thought, thoughtSignature
        else:
            parts.append(part)  # functionCall, functionResponse, inlineData, fileData
            layout.append(",".join(sorted(str(k) for k in part)) or "part")
    return "\n".join(texts), parts, content_layout(layout)


def _message(content: Any) -> Message:
    if not isinstance(content, dict):
        raise BodyShapeError("a content is not an object")
    text, parts, layout = _parts(content, "content")
    role = content.get("role") or "user"
    if not isinstance(role, str):
        raise BodyShapeError("a content role is not a string")
    return Message(role=_ROLES.get(role, role), text=text, parts=tuple(parts), layout=layout)


def _first(body: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in body:
            return body[name]
    return None


def _json_chunks(frames: list[bytes]) -> list[Any]:
    """Response chunks from SSE frames (alt=sse) or from a streamed JSON array."""
    chunks: list[Any] = []
    for frame, event in zip(frames, frame_events(frames)):
        if event.data:
            chunks.append(event_json(event))
            continue
        try:
            value = json.loads(frame)
        except ValueError:
            continue
        chunks.extend(value if isinstance(value, list) else [value])
    return chunks


def _is_final(chunk: Any) -> bool:
    if not isinstance(chunk, dict):
        return False
    feedback = chunk.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason"):
        return True  # the prompt was blocked: this is the whole answer
    candidates = chunk.get("candidates")
    return isinstance(candidates, list) and any(isinstance(c, dict) and c.get("finishReason") for c in candidates)


def _usage(chunk: Any) -> Usage | None:
    if not isinstance(chunk, dict) or not isinstance(chunk.get("usageMetadata"), dict):
        return None
    usage = chunk["usageMetadata"]
    return Usage(as_int(usage.get("promptTokenCount")), as_int(usage.get("candidatesTokenCount")))


class GeminiAdapter(Adapter):
    """Gemini's generateContent bodies, on the hosts and under the paths given (Google AI by default)."""

    param_rules = GEMINI_PARAMS

    def __init__(self, name: str = "gemini", hosts: tuple[str, ...] = ("generativelanguage.googleapis.com",),
                 path: re.Pattern[str] = GEMINI_PATH,
                 auth: Auth = KeyAuth(("GEMINI_API_KEY", "GOOGLE_API_KEY"), "x-goog-api-key", "{}")) -> None:
        self.name = name
        self.hosts = hosts
        self._path = path
        self._auth = auth

    def auth(self) -> Auth:
        return self._auth

    def key_variables(self) -> tuple[str, ...]:
        # google-genai reads GOOGLE_API_KEY first (and warns when both are set): the placeholder's name
        keys = super().key_variables()
        return tuple(sorted(keys, key=lambda name: name != "GOOGLE_API_KEY"))

    def _handles_path(self, path: str) -> bool:
        return self._path.match(path) is not None

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        m = self._path.match(raw.path)
        if m is None:
            raise BodyShapeError(f"unknown endpoint {raw.path}")
        model = m.group("model").removeprefix("models/")
        method = m.group("method")
        if method == "embedContent":
            messages = [_message(body.get("content"))]
            consumed: tuple[str, ...] = ("model", "content")
        elif method == "batchEmbedContents":
            messages = []
            for request in require_list(body.get("requests"), "requests"):
                if not isinstance(request, dict):
                    raise BodyShapeError("a request is not an object")
                msg = _message(request.get("content"))
                rest = {k: v for k, v in request.items() if k != "content"}
                messages.append(Message(msg.role, msg.text, msg.parts + ((rest,) if rest else ()), msg.layout))
            consumed = ("requests",)
        else:
            messages = [_message(c) for c in require_list(body.get("contents"), "contents")]
            consumed = ("contents", "systemInstruction", "system_instruction", "tools")
        system_value = _first(body, "systemInstruction", "system_instruction")
        system, system_layout = None, None
        if system_value is not None:
            system, system_parts, system_layout = _parts(system_value, "systemInstruction")
            if system_parts:
                raise BodyShapeError("systemInstruction holds parts other than text")
        return CanonicalRequest(
            **self.common(raw),
            model=model,
            system=system,
            system_layout=system_layout,
            messages=tuple(messages),
            tools=tuple(require_list(body.get("tools"), "tools")),
            params=self.params_of(body, consumed),
            stream=self.streams(raw, body),
            body=body,
        )

    def streams(self, raw: RawRequest, body: Mapping[str, Any]) -> bool:
        return raw.path.endswith(":streamGenerateContent")

    def stream_complete(self, frames: list[bytes]) -> bool:
        chunks = [c for c in _json_chunks(frames) if c is not None]
        return bool(chunks) and _is_final(chunks[-1])

    def usage_from_body(self, body: bytes) -> Usage:
        try:
            value = json.loads(body)
        except Exception:
            return Usage()
        chunks = value if isinstance(value, list) else [value]
        return self._last_usage(chunks)

    def usage_from_frames(self, frames: list[bytes]) -> Usage:
        try:
            return self._last_usage(_json_chunks(frames))
        except Exception:
            return Usage()

    @staticmethod
    def _last_usage(chunks: list[Any]) -> Usage:
        for chunk in reversed(chunks):
            usage = _usage(chunk)
            if usage is not None:
                return usage
        return Usage()

    def error_body(self, status: int, message: str, code: str = "semula_no_recording") -> bytes:
        return json.dumps({"error": {"code": status, "message": message, "status": "FAILED_PRECONDITION"}}).encode()

