"""Bedrock request bodies: Converse's one shape, and each model family's own InvokeModel body.

Converse (and Amazon Nova's InvokeModel body, which is the same shape) holds ``messages`` of
content blocks, ``system`` as text blocks, ``toolConfig`` and ``inferenceConfig``. InvokeModel
carries the family's native body: Anthropic's Messages body with ``anthropic_version`` (read by
the Anthropic adapter), Meta's and Mistral's ``prompt``, Mistral's chat ``messages``, Cohere's
``message``/``chat_history`` (chat) or ``texts`` (embed), Amazon Titan's ``inputText``. A body of
any other shape raises ``BodyShapeError``: it is then matched by the exact tier only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from semula.core.request.canonical import Layout, Message, content_layout
from semula.providers.anthropic import AnthropicAdapter
from semula.providers.base import RawRequest
from semula.providers.jsonbody import BodyShapeError, require_list

__all__ = ["converse_message", "converse_text", "read_converse", "read_invoke"]

# Converse fields that never change the answer: tags for the caller's own logs.
_CALLER_TAGS = ("requestMetadata",)
_ANTHROPIC = AnthropicAdapter()
_COHERE_ROLES = {"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system", "TOOL": "tool"}


def converse_text(blocks: Any, what: str) -> tuple[str, list[Any], Layout | None]:
    """A Converse content list: its text blocks joined, and the other blocks (image, document,
    toolUse, toolResult, reasoningContent, guardContent …). ``cachePoint`` markers only steer the
    prompt cache, so they are left out (the exact tier still sees them in the body)."""
    texts: list[str] = []
    parts: list[Any] = []
    layout: list[int | str] = []
    for block in require_list(blocks, what):
        if not isinstance(block, dict):
            raise BodyShapeError(f"a block in {what} is not an object")
        if set(block) == {"text"} and isinstance(block["text"], str):
            texts.append(block["text"])
            layout.append(len(block["text"]))
        elif "cachePoint" not in block:
            parts.append(block)
            layout.append(",".join(sorted(str(k) for k in block)) or "block")
    return "\n".join(texts), parts, content_layout(layout)


def converse_message(item: Any) -> Message:
    if not isinstance(item, dict) or not isinstance(item.get("role"), str):
        raise BodyShapeError("a message is not an object with a role")
    content = item.get("content")
    layout: Layout | None = None
    if isinstance(content, str):  # Mistral's chat body on InvokeModel
        text, parts = content, list[Any]()
    else:
        text, parts, layout = converse_text(content, "content")
    parts.extend({k: item[k]} for k in sorted(item) if k not in ("role", "content"))
    return Message(role=item["role"], text=text, parts=tuple(parts), layout=layout)


def read_converse(body: Mapping[str, Any]) -> dict[str, Any]:
    """system, messages, tools and params of a Converse body (Amazon Nova's InvokeModel body too)."""
    system, system_layout = None, None
    params: dict[str, Any] = {}
    if "system" in body:
        system, system_parts, system_layout = converse_text(body["system"], "system")
        if system_parts:
            params["system_blocks"] = system_parts  # guardContent: kept, it changes the answer
    tool_config = body.get("toolConfig")
    if tool_config is not None and not isinstance(tool_config, dict):
        raise BodyShapeError("toolConfig is not an object")
    tool_config = tool_config or {}
    tools = [t for t in require_list(tool_config.get("tools"), "toolConfig.tools")
             if not (isinstance(t, dict) and "cachePoint" in t)]
    if rest := {k: v for k, v in tool_config.items() if k != "tools"}:
        params["toolConfig"] = rest  # toolChoice
    params.update((k, v) for k, v in body.items()
                  if k not in ("messages", "system", "toolConfig", *_CALLER_TAGS))
    return {
        "system": system,
        "system_layout": system_layout,
        "messages": tuple(converse_message(m) for m in require_list(body.get("messages"), "messages")),
        "tools": tuple(tools),
        "params": params,
    }


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise BodyShapeError(f"{what} is not text")
    return value


def _fields(messages: list[Message], body: Mapping[str, Any], consumed: tuple[str, ...],
            system: str | None = None, tools: Any = None) -> dict[str, Any]:
    return {
        "system": system, "messages": tuple(messages),
        "tools": tuple(require_list(tools, "tools")),
        "params": {k: v for k, v in body.items() if k not in consumed},
    }


def read_invoke(raw: RawRequest, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """system, messages, tools and params of an InvokeModel body, by its family's shape."""
    if "anthropic_version" in body:
        read = _ANTHROPIC._read(raw, dict(body))
        return {"system": read.system, "system_layout": read.system_layout, "messages": read.messages,
                "tools": read.tools, "params": dict(read.params)}
    if "messages" in body:  # Amazon Nova (Converse's shape), Mistral's chat body
        return read_converse(body)
    if "prompt" in body:  # Meta Llama, Mistral, Cohere Command (legacy)
        return _fields([Message("user", _text(body["prompt"], "prompt"))], body, ("prompt",))
    if "inputText" in body:  # Amazon Titan text and embeddings
        return _fields([Message("user", _text(body["inputText"], "inputText"))], body, ("inputText",))
    if "message" in body:  # Cohere Command R chat
        history = []
        for turn in require_list(body.get("chat_history"), "chat_history"):
            if not isinstance(turn, dict):
                raise BodyShapeError("a chat_history turn is not an object")
            role = _text(turn.get("role"), "a chat_history role")
            rest = tuple({k: turn[k]} for k in sorted(turn) if k not in ("role", "message"))
            history.append(Message(_COHERE_ROLES.get(role, role.lower()), _text(turn.get("message", ""), "message"), rest))
        history.append(Message("user", _text(body["message"], "message")))
        system = _text(body["preamble"], "preamble") if "preamble" in body else None
        return _fields(history, body, ("message", "chat_history", "preamble", "tools"), system, body.get("tools"))
    if "texts" in body:  # Cohere Embed
        texts = [Message("user", _text(t, "a text")) for t in require_list(body["texts"], "texts")]
        return _fields(texts, body, ("texts",))
    raise BodyShapeError(f"an InvokeModel body for {model} in no shape semula reads")
