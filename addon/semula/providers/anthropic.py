"""Anthropic's Messages API.

``system`` and message content may be strings or block lists; ``cache_control``
markers on blocks and tools only steer Anthropic's prompt cache, so they are
left out of the canonical messages and tools (the exact tier still sees them
in the body). ``anthropic-version`` and ``anthropic-beta`` select behaviour,
so they are part of every fingerprint.
"""

from __future__ import annotations

import json
from typing import Any

from semula.core.request.canonical import CanonicalRequest, Layout, Message, content_layout
from semula.core.request.params import EndpointDefaults, ParamRules
from semula.providers.auth import Auth, KeyAuth
from semula.providers.base import Adapter, RawRequest, Usage
from semula.providers.jsonbody import BodyShapeError, as_int, event_json, frame_events, load_json_object, require_list
from semula.providers.sidepaths import SidePath

__all__ = ["AnthropicAdapter"]

_PATHS = ("/v1/messages", "/v1/messages/count_tokens")
# Claude Code (and the Claude Agent SDK, which runs it) uploads its event log and metrics to the API
# host in the background. Their success answer's body is not documented: an empty object.
_SIDE_PATHS = (
    SidePath(r"^/api/event_logging/(?:v\d+/)?batch$", "Claude Code event log upload"),
    SidePath(r"^/api/claude_code/metrics$", "Claude Code metrics upload"),
)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


def _blocks(content: Any, what: str) -> tuple[str, list[Any], Layout | None]:
    """Text blocks joined by newlines, the other blocks as they are, and how they sat."""
    if content is None:
        return "", [], None
    if isinstance(content, str):
        return content, [], None
    texts: list[str] = []
    parts: list[Any] = []
    layout: list[int | str] = []
    for block in require_list(content, what):
        if not isinstance(block, dict):
            raise BodyShapeError(f"a block in {what} is not an object")
        block = _without_cache_control(block)
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
            layout.append(len(block["text"]))
            extra = {k: v for k, v in block.items() if k not in ("type", "text")}
            if extra:
                parts.append(extra)  # citations
        else:
            parts.append(_tool_result(block))  # tool_use, tool_result, image, document, thinking
            kind = block.get("type")
            layout.append(kind if isinstance(kind, str) else "block")
    return "\n".join(texts), parts, content_layout(layout)


def _tool_result(block: dict[str, Any]) -> dict[str, Any]:
    """A tool_result whose content is one text block is the same request as one whose content is
    that text as a string (the Messages API reference: content is "a string or a list of content
    blocks"), so the one block is written as its string."""
    content = block.get("content")
    if block.get("type") == "tool_result" and isinstance(content, list) and len(content) == 1:
        only = content[0]
        if isinstance(only, dict) and set(only) == {"type", "text"} and only["type"] == "text" \
                and isinstance(only["text"], str):
            return {**block, "content": only["text"]}
    return block


# Messages API reference: temperature "Defaults to 1.0"; tool_choice's default is auto ({"type": "auto"}).
# Vertex AI's rawPredict endpoints take the same body.
ANTHROPIC_PARAMS = ParamRules(
    defaults=(EndpointDefaults(("/v1/messages", ":rawPredict", ":streamRawPredict"), {"temperature": 1}),),
    tool_choice_defaults=({"type": "auto"},),
)


class AnthropicAdapter(Adapter):
    name = "anthropic"
    hosts: tuple[str, ...] = ("api.anthropic.com",)
    behaviour_headers = ("anthropic-beta", "anthropic-version")
    side_paths: tuple[SidePath, ...] = _SIDE_PATHS
    param_rules = ANTHROPIC_PARAMS

    def key_variables(self) -> tuple[str, ...]:
        # the SDK also takes a bearer token, which drift cannot send as x-api-key
        keys = super().key_variables()
        return (*keys, "ANTHROPIC_AUTH_TOKEN") if keys else ()

    def auth(self) -> Auth:
        return KeyAuth(("ANTHROPIC_API_KEY",), "x-api-key", "{}")

    def _handles_path(self, path: str) -> bool:
        return path in _PATHS

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        system_text, system_parts, system_layout = _blocks(body.get("system"), "system")
        if system_parts:
            raise BodyShapeError("system holds blocks other than text")
        messages = []
        for item in require_list(body.get("messages"), "messages"):
            if not isinstance(item, dict) or not isinstance(item.get("role"), str):
                raise BodyShapeError("a message is not an object with a role")
            text, parts, layout = _blocks(item.get("content"), "content")
            parts.extend({k: item[k]} for k in sorted(item) if k not in ("role", "content"))
            messages.append(Message(role=item["role"], text=text, parts=tuple(parts), layout=layout))
        return CanonicalRequest(
            **self.common(raw),
            model=self._model(raw, body),
            system=system_text if "system" in body else None,
            system_layout=system_layout,
            messages=tuple(messages),
            tools=tuple(_without_cache_control(t) for t in require_list(body.get("tools"), "tools")),
            params=self.params_of(body, ("model", "messages", "system", "tools")),
            stream=self.streams(raw, body),
            body=body,
        )

    def _model(self, raw: RawRequest, body: dict[str, Any]) -> str | None:
        model = body.get("model")
        return model if isinstance(model, str) else None

    def stream_complete(self, frames: list[bytes]) -> bool:
        for event in reversed(frame_events(frames)):
            data = event_json(event)
            kind = event.event or (data.get("type") if isinstance(data, dict) else None)
            if kind == "ping" or kind is None:
                continue
            return kind == "message_stop"
        return False

    def usage_from_body(self, body: bytes) -> Usage:
        try:
            usage = load_json_object(body).get("usage")
        except Exception:
            return Usage()
        if not isinstance(usage, dict):
            return Usage()
        return Usage(as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens")))

    def usage_from_frames(self, frames: list[bytes]) -> Usage:
        prompt = completion = None
        try:
            for event in frame_events(frames):
                data = event_json(event)
                if not isinstance(data, dict):
                    continue
                if data.get("type") == "message_start" and isinstance(data.get("message"), dict):
                    usage = data["message"].get("usage")
                    if isinstance(usage, dict):
                        prompt = as_int(usage.get("input_tokens"))
                        completion = as_int(usage.get("output_tokens"))
                elif data.get("type") == "message_delta" and isinstance(data.get("usage"), dict):
                    completion = as_int(data["usage"].get("output_tokens"))
        except Exception:
            return Usage()
        return Usage(prompt_tokens=prompt, completion_tokens=completion)

    def error_body(self, status: int, message: str, code: str = "semula_no_recording") -> bytes:
        return json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).encode()
