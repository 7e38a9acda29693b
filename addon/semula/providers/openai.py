"""OpenAI's formats, and the OpenAI-compatible hosts and Azure that reuse them.

Chat completions, the Responses API, embeddings and legacy completions are
recognised by their path suffix, so ``/openai/v1/chat/completions`` (Groq),
``/api/v1/chat/completions`` (OpenRouter) and ``/chat/completions``
(DeepSeek) are read by the same code under their own provider name.
"""

from __future__ import annotations

import re
from typing import Any

from semula.core.canonical import CanonicalRequest, Message
from semula.providers.base import (
    Adapter,
    BodyShapeError,
    RawRequest,
    Usage,
    as_int,
    event_json,
    frame_events,
    load_json_object,
    require_list,
)

__all__ = ["AzureOpenAIAdapter", "OpenAIAdapter", "COMPATIBLE_HOSTS"]

# Provider name -> hosts that speak OpenAI's chat format.
COMPATIBLE_HOSTS: dict[str, tuple[str, ...]] = {
    "mistral": ("api.mistral.ai",),
    "groq": ("api.groq.com",),
    "openrouter": ("openrouter.ai",),
    "together": ("api.together.xyz", "api.together.ai"),
    "deepseek": ("api.deepseek.com",),
    "xai": ("api.x.ai",),
}

_SYSTEM_ROLES = {"system": "system", "developer": "system"}
_ROLE_NAMES = {"developer": "system", "function": "tool"}
_TEXT_PART_TYPES = {"text", "input_text", "output_text"}
# Responses API items that carry a tool's output, not a model action.
_TOOL_OUTPUT_SUFFIX = "_output"
_UNFINISHED_EVENTS = {"response.failed", "response.incomplete", "error"}


def _endpoint_kind(path: str) -> str | None:
    for suffix, kind in (
        ("/chat/completions", "chat"),
        ("/responses", "responses"),
        ("/embeddings", "embeddings"),
        ("/completions", "completions"),
    ):
        if path.endswith(suffix):
            return kind
    return None


def _content(content: Any) -> tuple[str, list[Any]]:
    """Text parts joined by newlines, and the non-text parts as they are."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise BodyShapeError("content is neither a string nor a list of parts")
    texts: list[str] = []
    parts: list[Any] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
            extra = {k: v for k, v in part.items() if k not in ("type", "text")}
            if extra:
                parts.append(extra)  # annotations, logprobs
        else:
            parts.append(part)
    return "\n".join(texts), parts


def _message(item: dict[str, Any], skip: tuple[str, ...] = ("role", "content")) -> Message:
    role = item.get("role")
    if not isinstance(role, str):
        raise BodyShapeError("message has no role")
    text, parts = _content(item.get("content"))
    # tool_calls, tool_call_id, name, refusal...: all can change the answer.
    parts.extend({k: item[k]} for k in sorted(item) if k not in skip)
    return Message(role=_ROLE_NAMES.get(role, role), text=text, parts=tuple(parts))


def _split_system(messages: list[Message]) -> tuple[list[str], list[Message]]:
    """Leading system/developer turns become the system text; later ones stay
    in place, since where they sit can matter."""
    system: list[str] = []
    index = 0
    while index < len(messages) and messages[index].role == "system" and not messages[index].parts:
        system.append(messages[index].text)
        index += 1
    return system, messages[index:]


def _as_messages(value: Any, what: str) -> list[Message]:
    """Embeddings/completions input: a string, a list of strings or token arrays."""
    if isinstance(value, str):
        return [Message(role="user", text=value)]
    items = require_list(value, what)
    if items and all(isinstance(i, int) for i in items):
        return [Message(role="user", text="", parts=(items,))]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(Message(role="user", text=item))
        else:
            out.append(Message(role="user", text="", parts=(item,)))
    return out


class OpenAIAdapter(Adapter):
    """OpenAI and every host that copies its API."""

    behaviour_headers = ("openai-beta",)

    def __init__(self, name: str = "openai", hosts: tuple[str, ...] = ("api.openai.com",)) -> None:
        self.name = name
        self.hosts = hosts

    def _handles_path(self, path: str) -> bool:
        return _endpoint_kind(path) is not None

    def _model(self, raw: RawRequest, body: dict[str, Any]) -> str | None:
        model = body.get("model")
        return model if isinstance(model, str) else None

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        kind = _endpoint_kind(raw.path)
        if kind == "chat":
            system, messages = _split_system([_dict_message(m) for m in require_list(body.get("messages"), "messages")])
            consumed = ("model", "messages", "tools")
        elif kind == "responses":
            system, messages = self._responses_input(body)
            consumed = ("model", "input", "instructions", "tools")
        elif kind == "embeddings":
            system, messages = [], _as_messages(body.get("input"), "input")
            consumed = ("model", "input")
        elif kind == "completions":
            system, messages = [], _as_messages(body.get("prompt"), "prompt")
            consumed = ("model", "prompt")
        else:
            raise BodyShapeError(f"unknown endpoint {raw.path}")
        return CanonicalRequest(
            **self.common(raw),
            model=self._model(raw, body),
            system="\n".join(system) if system else None,
            messages=tuple(messages),
            tools=tuple(require_list(body.get("tools"), "tools")),
            params=self.params_of(body, consumed),
            stream=kind != "embeddings" and self.streams(raw, body),
            body=body,
        )

    @staticmethod
    def _responses_input(body: dict[str, Any]) -> tuple[list[str], list[Message]]:
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise BodyShapeError("instructions is not a string")
        value = body.get("input")
        if isinstance(value, str):
            messages = [Message(role="user", text=value)]
        else:
            messages = [_response_item(item) for item in require_list(value, "input")]
        system, rest = _split_system(messages)
        return ([instructions] if instructions else []) + system, rest

    # ---------------------------------------------------------------- responses

    def stream_complete(self, frames: list[bytes]) -> bool:
        events = [e for e in frame_events(frames) if e.data or e.event]
        completed = False
        for event in events:
            data = event_json(event)
            kind = event.event or (data.get("type") if isinstance(data, dict) else None)
            if kind in _UNFINISHED_EVENTS or (isinstance(data, dict) and "error" in data and kind is None):
                return False
            if kind == "response.completed":
                completed = True
        if completed:
            return True
        return bool(events) and events[-1].data.strip() == "[DONE]"

    def usage_from_body(self, body: bytes) -> Usage:
        try:
            return _usage(load_json_object(body).get("usage"))
        except Exception:
            return Usage()

    def usage_from_frames(self, frames: list[bytes]) -> Usage:
        usage = Usage()
        try:
            for event in frame_events(frames):
                data = event_json(event)
                if not isinstance(data, dict):
                    continue
                if isinstance(data.get("usage"), dict):  # chat chunk with include_usage
                    usage = _usage(data["usage"])
                response = data.get("response")
                if data.get("type") == "response.completed" and isinstance(response, dict):
                    usage = _usage(response.get("usage"))
        except Exception:
            return Usage()
        return usage


def _dict_message(item: Any) -> Message:
    if not isinstance(item, dict):
        raise BodyShapeError("a message is not an object")
    return _message(item)


def _response_item(item: Any) -> Message:
    """One Responses API input item as a message."""
    if isinstance(item, str):
        return Message(role="user", text=item)
    if not isinstance(item, dict):
        raise BodyShapeError("an input item is not an object")
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return _message(item, skip=("role", "content", "type"))
    if not isinstance(kind, str):
        raise BodyShapeError("an input item has no type")
    if kind.endswith(_TOOL_OUTPUT_SUFFIX):
        output = item.get("output")
        text = output if isinstance(output, str) else ""
        rest = {k: v for k, v in item.items() if not (k == "output" and isinstance(v, str))}
        return Message(role="tool", text=text, parts=(rest,))
    return Message(role="assistant", text="", parts=(item,))


def _usage(value: Any) -> Usage:
    if not isinstance(value, dict):
        return Usage()
    prompt = as_int(value.get("prompt_tokens"))
    completion = as_int(value.get("completion_tokens"))
    if prompt is None and completion is None:  # Responses API names
        prompt = as_int(value.get("input_tokens"))
        completion = as_int(value.get("output_tokens"))
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


_DEPLOYMENT = re.compile(r"^/openai/deployments/([^/]+)/")


class AzureOpenAIAdapter(OpenAIAdapter):
    """Azure OpenAI: the model is the deployment named in the path.

    The ``api-version`` query parameter stays in the fingerprint: it selects
    the API behaviour and can change the answer.
    """

    def __init__(self) -> None:
        super().__init__(
            name="azure",
            hosts=("*.openai.azure.com", "*.cognitiveservices.azure.com", "*.services.ai.azure.com"),
        )

    def _handles_path(self, path: str) -> bool:
        return path.startswith("/openai/") and super()._handles_path(path)

    def _model(self, raw: RawRequest, body: dict[str, Any]) -> str | None:
        m = _DEPLOYMENT.match(raw.path)
        return m.group(1) if m else super()._model(raw, body)
