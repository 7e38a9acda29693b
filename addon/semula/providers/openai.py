"""OpenAI's formats, and the OpenAI-compatible hosts and Azure that reuse them.

Chat completions, the Responses API, embeddings and legacy completions are
recognised by their path suffix, so ``/openai/v1/chat/completions`` (Groq),
``/api/v1/chat/completions`` (OpenRouter) and ``/chat/completions``
(DeepSeek) are read by the same code under their own provider name. Other
providers' OpenAI-compatible endpoints on their own hosts (Gemini's
``/v1beta/openai/…``, Anthropic's ``/v1/chat/completions``) get this reader too,
by path, under a name of their own (``gemini-openai``): their bodies are
OpenAI's, not the native format's.
"""

from __future__ import annotations

import re
from typing import Any

from semula.core.request.canonical import CanonicalRequest, Layout, Message, content_layout, joined_layout
from semula.core.request.params import NO_PARAM_RULES, EndpointDefaults, ParamRules, Renamed
from semula.providers.auth import Auth, KeyAuth
from semula.providers.base import Adapter, RawRequest, Usage
from semula.providers.jsonbody import BodyShapeError, as_int, event_json, frame_events, load_json_object, require_list
from semula.providers.sidepaths import SidePath

__all__ = ["AzureOpenAIAdapter", "COMPATIBLE_HOSTS", "COMPATIBLE_PATHS", "OPENAI_PARAMS", "OPENAI_SIDE_PATHS",
           "OpenAIAdapter", "OpenAIPathAdapter", "compatible"]

# Provider name -> hosts that speak OpenAI's chat format; each documented base path in a comment
# (the reader goes by the path's suffix, so any prefix works).
COMPATIBLE_HOSTS: dict[str, tuple[str, ...]] = {
    "mistral": ("api.mistral.ai",),  # /v1/chat/completions
    "groq": ("api.groq.com",),  # /openai/v1/...
    "openrouter": ("openrouter.ai",),  # /api/v1/...
    "together": ("api.together.xyz", "api.together.ai"),  # /v1/...
    "deepseek": ("api.deepseek.com",),  # /chat/completions, /v1/...
    "xai": ("api.x.ai",),  # /v1/...
    "cerebras": ("api.cerebras.ai",),  # /v1/chat/completions
    "fireworks": ("api.fireworks.ai",),  # /inference/v1/...
    "perplexity": ("api.perplexity.ai",),  # /chat/completions
    "deepinfra": ("api.deepinfra.com",),  # /v1/openai/...
    "huggingface": ("router.huggingface.co",),  # /v1/... (the Inference Providers router)
    "nebius": ("api.studio.nebius.com", "api.tokenfactory.nebius.com"),  # /v1/...
    "novita": ("api.novita.ai",),  # /v3/openai/..., /openai/v1/...
    "sambanova": ("api.sambanova.ai",),  # /v1/...
    "hyperbolic": ("api.hyperbolic.xyz",),  # /v1/...
    "nvidia": ("integrate.api.nvidia.com",),  # /v1/... (NVIDIA NIM)
    "moonshot": ("api.moonshot.ai", "api.moonshot.cn"),  # /v1/...
    "dashscope": ("dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com"),  # /compatible-mode/v1/...
    "cohere": ("api.cohere.ai", "api.cohere.com"),  # /compatibility/v1/... (native /v2/chat: generic)
    "github": ("models.github.ai",),  # /inference/chat/completions
}

# Provider name -> (host, path regex, the native SDK's key variables): OpenAI-compatible endpoints on a
# host whose native API is another format, which take the native key as a bearer token. Listed before
# the native adapters in the registry.
COMPATIBLE_PATHS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "gemini-openai": ("generativelanguage.googleapis.com", r"^/v1(?:beta|alpha)?/openai/",
                      ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    # the OpenAI SDK compatibility layer
    "anthropic-openai": ("api.anthropic.com", r"^/v1/chat/completions$", ("ANTHROPIC_API_KEY",)),
}

# OpenAI Chat Completions API reference: "n ... Defaults to 1", "temperature ... Defaults to 1",
# "top_p ... Defaults to 1", "presence_penalty ... Defaults to 0", "frequency_penalty ...
# Defaults to 0", "logprobs ... Defaults to false", "parallel_tool_calls ... Defaults to true",
# "service_tier ... Defaults to 'auto'"; response_format's default is plain text ({"type": "text"}).
# (`store` never matters: core.request.canonical.NEVER_MATTERS.)
_CHAT_DEFAULTS = {"n": 1, "temperature": 1, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0,
                  "logprobs": False, "parallel_tool_calls": True, "service_tier": "auto",
                  "response_format": {"type": "text"}}
# OpenAI Responses API reference: temperature and top_p "Defaults to 1", parallel_tool_calls
# "Defaults to true", truncation "Defaults to disabled", service_tier
# "Defaults to 'auto'", text.format "The default format is { "type": "text" }".
_RESPONSES_DEFAULTS = {"temperature": 1, "top_p": 1, "parallel_tool_calls": True, "truncation": "disabled",
                       "service_tier": "auto", "text": {"format": {"type": "text"}}}
# tool_choice's default depends on the tools: "none is the default when no tools are present. auto is
# the default if tools are present".
# max_tokens: "Deprecated in favor of max_completion_tokens ... not compatible with o-series models":
# on the GPT-3.5/GPT-4 families both set the same limit; the reasoning models (o1, o3, o4-mini, gpt-5 …)
# refuse max_tokens with a 400, so only the families named here (a fine-tune of one too) merge them.
_NON_REASONING_CHAT_MODELS = r"(?:ft:)?(?:gpt-3\.5|gpt-4(?:o|\.\d+)?|chatgpt-4o)(?:[-:].*)?"
OPENAI_PARAMS = ParamRules(
    defaults=(EndpointDefaults(("/chat/completions",), _CHAT_DEFAULTS),
              EndpointDefaults(("/responses",), _RESPONSES_DEFAULTS)),
    tool_choice_defaults=({"type": "auto"}, "auto"),
    tool_choice_none_without_tools=True,
    # max_tokens is the name kept: the fingerprints of requests that use it stay as they were
    renamed=(Renamed("max_completion_tokens", "max_tokens", ("/chat/completions",), _NON_REASONING_CHAT_MODELS),),
)

# openai-agents' BackendSpanExporter posts its traces here from a background thread; the server
# answers 204 No Content, and the exporter takes any status below 300 as success.
OPENAI_SIDE_PATHS: tuple[SidePath, ...] = (
    SidePath(r"^/v1/traces/ingest$", "openai-agents trace upload", status=204, body=b"", content_type=None),
)

_SYSTEM_ROLES = {"system": "system", "developer": "system"}
_ROLE_NAMES = {"developer": "system", "function": "tool"}
_TEXT_PART_TYPES = {"text", "input_text", "output_text"}
# Responses API items that carry a tool's output, not a model action.
_TOOL_OUTPUT_SUFFIX = "_output"
_UNFINISHED_EVENTS = {"response.failed", "response.incomplete", "error"}
# A stream's terminal event: the Responses API's; a streamed transcription's (`stream=True` on
# /v1/audio/transcriptions) and a speech answer's with `stream_format="sse"` end so, without `[DONE]`.
_COMPLETED_EVENTS = {"response.completed", "transcript.text.done", "speech.audio.done"}


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


def _content(content: Any) -> tuple[str, list[Any], Layout | None]:
    """Text parts joined by newlines, the non-text parts as they are, and how they sat."""
    if content is None:
        return "", [], None
    if isinstance(content, str):
        return content, [], None
    if not isinstance(content, list):
        raise BodyShapeError("content is neither a string nor a list of parts")
    texts: list[str] = []
    parts: list[Any] = []
    layout: list[int | str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            layout.append(len(part))
        elif isinstance(part, dict) and part.get("type") in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
            layout.append(len(part["text"]))
            extra = {k: v for k, v in part.items() if k not in ("type", "text")}
            if extra:
                parts.append(extra)  # annotations, logprobs
        else:
            parts.append(part)
            kind = part.get("type") if isinstance(part, dict) else None
            layout.append(kind if isinstance(kind, str) else "part")
    return "\n".join(texts), parts, content_layout(layout)


def _message(item: dict[str, Any], skip: tuple[str, ...] = ("role", "content")) -> Message:
    role = item.get("role")
    if not isinstance(role, str):
        raise BodyShapeError("message has no role")
    text, parts, layout = _content(item.get("content"))
    # tool_calls, tool_call_id, name, refusal...: all can change the answer.
    parts.extend({k: item[k]} for k in sorted(item) if k not in skip)
    return Message(role=_ROLE_NAMES.get(role, role), text=text, parts=tuple(parts), layout=layout)


def _split_system(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    """Leading system/developer turns become the system text; later ones stay
    in place, since where they sit can matter."""
    index = 0
    while index < len(messages) and messages[index].role == "system" and not messages[index].parts:
        index += 1
    return messages[:index], messages[index:]


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

    def __init__(self, name: str = "openai", hosts: tuple[str, ...] = ("api.openai.com", "*.api.openai.com"),
                 side_paths: tuple[SidePath, ...] = OPENAI_SIDE_PATHS, *,
                 param_rules: ParamRules = OPENAI_PARAMS, auth: Auth | None = None) -> None:
        # *.api.openai.com: the data-residency hosts (us., eu., …) the openai SDK's data_residency picks.
        self.name = name
        self.hosts = hosts
        self.side_paths = side_paths
        self.param_rules = param_rules
        self._auth = auth

    def auth(self) -> Auth:
        return self._auth or super().auth()

    def _handles_path(self, path: str) -> bool:
        return _endpoint_kind(path) is not None

    def _model(self, raw: RawRequest, body: dict[str, Any]) -> str | None:
        model = body.get("model")
        return model if isinstance(model, str) else None

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        kind = _endpoint_kind(raw.path)
        if kind == "chat":
            system, messages = _split_system([_dict_message(m) for m in require_list(body.get("messages"), "messages")])
            consumed: tuple[str, ...] = ("model", "messages", "tools")
        elif kind == "responses":
            system, messages = self._responses_input(body)
            instructions = _instructions(body)
            consumed = ("model", "input", "instructions", "tools")
        elif kind == "embeddings":
            system, messages = [], _as_messages(body.get("input"), "input")
            consumed = ("model", "input")
        elif kind == "completions":
            system, messages = [], _as_messages(body.get("prompt"), "prompt")
            consumed = ("model", "prompt")
        else:
            raise BodyShapeError(f"unknown endpoint {raw.path}")
        if kind != "responses":
            instructions = None
        return CanonicalRequest(
            **self.common(raw),
            model=self._model(raw, body),
            system="\n".join(m.text for m in system) if system else None,
            system_layout=joined_layout([(m.text, m.layout) for m in system]) if system else None,
            messages=tuple(messages),
            tools=tuple(require_list(body.get("tools"), "tools")),
            params=self.params_of(body, consumed),
            stream=kind != "embeddings" and self.streams(raw, body),
            body=body,
            instructions=instructions,
        )

    @staticmethod
    def _responses_input(body: dict[str, Any]) -> tuple[list[Message], list[Message]]:
        value = body.get("input")
        if isinstance(value, str):
            messages = [Message(role="user", text=value)]
        else:
            messages = [_response_item(item) for item in require_list(value, "input")]
        return _split_system(messages)

    # ---------------------------------------------------------------- responses

    def stream_complete(self, frames: list[bytes]) -> bool:
        events = [e for e in frame_events(frames) if e.data or e.event]
        completed = False
        for event in events:
            data = event_json(event)
            kind = event.event or (data.get("type") if isinstance(data, dict) else None)
            if kind in _UNFINISHED_EVENTS or (isinstance(data, dict) and "error" in data and kind is None):
                return False
            if kind in _COMPLETED_EVENTS:
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


def _instructions(body: dict[str, Any]) -> str | None:
    """The Responses API's `instructions`: its own field, never merged into the system text. They
    are not the same request: `instructions` do not carry over to a turn chained with
    `previous_response_id`, a system message in the input does."""
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise BodyShapeError("instructions is not a string")
    return instructions or None


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
            side_paths=(),
            # Azure OpenAI serves OpenAI's models with OpenAI's API, and its parameters.
            param_rules=OPENAI_PARAMS,
            auth=KeyAuth(("AZURE_OPENAI_API_KEY",), "api-key", "{}"),
        )

    def _handles_path(self, path: str) -> bool:
        return path.startswith("/openai/") and super()._handles_path(path)

    def key_variables(self) -> tuple[str, ...]:
        return ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN")  # the client's Entra ID token instead of a key

    def _model(self, raw: RawRequest, body: dict[str, Any]) -> str | None:
        m = _DEPLOYMENT.match(raw.path)
        return m.group(1) if m else super()._model(raw, body)


def compatible(name: str, hosts: tuple[str, ...]) -> OpenAIAdapter:
    """A host that copies OpenAI's API (COMPATIBLE_HOSTS). Its parameter defaults are its own and not
    stated here, so every parameter counts; its key is `Bearer $<NAME>_API_KEY`."""
    return OpenAIAdapter(name, hosts, side_paths=(), param_rules=NO_PARAM_RULES)


class OpenAIPathAdapter(OpenAIAdapter):
    """OpenAI's reader for the paths one host serves in OpenAI's format next to its native API."""

    def __init__(self, name: str, host: str, path: str, key_env: tuple[str, ...] = ()) -> None:
        super().__init__(name=name, hosts=(host,), side_paths=(), param_rules=NO_PARAM_RULES,
                         auth=KeyAuth(key_env) if key_env else None)
        self._path = re.compile(path)

    def key_variables(self) -> tuple[str, ...]:
        return ()  # the native adapter of its host declares its clients' keys

    def _handles_path(self, path: str) -> bool:
        return self._path.search(path) is not None and super()._handles_path(path)
