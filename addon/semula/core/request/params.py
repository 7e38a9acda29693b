"""Request parameters in one canonical form, for the normalised view of a request.

Two requests whose parameters are written differently but mean the same thing should share
the normalised fingerprint: `temperature` 0 vs 0.0, Gemini's `generation_config` vs
`generationConfig` (its REST API accepts both spellings of every field), and a parameter set
to the provider's documented default vs left out. The exact fingerprint keeps the body as
sent; only the normalised and context views (and the near-match shape) use this form.

Defaults are listed only where the provider's API reference states them and they do not
depend on the model; every other parameter, at any value, keeps counting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DEFAULTS", "canonical_params", "canonical_number"]

# Documented defaults, per provider (and endpoint kind for OpenAI).
# OpenAI Chat Completions API reference: "n ... Defaults to 1", "temperature ... Defaults to 1",
# "top_p ... Defaults to 1", "presence_penalty ... Defaults to 0", "frequency_penalty ...
# Defaults to 0", "logprobs ... Defaults to false", "parallel_tool_calls ... Defaults to true",
# "service_tier ... Defaults to 'auto'"; response_format's default is plain text ({"type": "text"}).
# (`store` never matters: core.request.canonical.NEVER_MATTERS.)
_OPENAI_CHAT = {"n": 1, "temperature": 1, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0,
                "logprobs": False, "parallel_tool_calls": True, "service_tier": "auto",
                "response_format": {"type": "text"}}
# OpenAI Responses API reference: temperature and top_p "Defaults to 1", parallel_tool_calls
# "Defaults to true", truncation "Defaults to disabled", service_tier
# "Defaults to 'auto'", text.format "The default format is { "type": "text" }".
_OPENAI_RESPONSES = {"temperature": 1, "top_p": 1, "parallel_tool_calls": True, "truncation": "disabled",
                     "service_tier": "auto", "text": {"format": {"type": "text"}}}
# Anthropic Messages API reference: temperature "Defaults to 1.0".
_ANTHROPIC = {"temperature": 1}
# Gemini GenerationConfig reference: candidateCount "If unset, this will default to 1",
# responseMimeType "text/plain: (default) Text output".
# (Gemini's temperature, topP, topK and maxOutputTokens defaults depend on the model: kept.)
_GEMINI_GENERATION = {"candidateCount": 1, "responseMimeType": "text/plain"}
# tool_choice's default depends on the tools: OpenAI "none is the default when no tools are present.
# auto is the default if tools are present"; Anthropic's is auto ({"type": "auto"}).
_TOOL_CHOICE_DEFAULT = {"openai": ({"type": "auto"}, "auto"), "azure": ({"type": "auto"}, "auto"),
                        "anthropic": ({"type": "auto"},)}

DEFAULTS: dict[str, Mapping[str, Any]] = {
    "openai/chat": _OPENAI_CHAT,
    "openai/responses": _OPENAI_RESPONSES,
    "azure/chat": _OPENAI_CHAT,  # Azure OpenAI serves OpenAI's models with OpenAI's API
    "azure/responses": _OPENAI_RESPONSES,
    "anthropic/messages": _ANTHROPIC,
    "gemini/generationConfig": _GEMINI_GENERATION,
}

# Providers that serve another's request body, and whose parameters therefore mean the same:
# Vertex AI takes Gemini's generateContent body and Anthropic's Messages body (`providers/vertex.py`).
# The tables stay here, keyed by name, not in the adapters: the normalised view is computed from a
# stored request long after its adapter ran, and must not depend on which adapters were imported.
FAMILY = {"vertex-gemini": "gemini", "vertex-anthropic": "anthropic"}

# Gemini objects whose own field names come in both spellings. Field *values* that hold
# user-named keys (responseSchema properties, function parameters) are never renamed.
_GEMINI_CONFIGS = ("generationConfig", "thinkingConfig", "toolConfig", "functionCallingConfig")
_SNAKE = re.compile(r"_([a-z0-9])")


def canonical_number(value: Any) -> Any:
    """Integral floats as ints (JSON does not tell 0 from 0.0), in lists and objects too."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: canonical_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical_number(v) for v in value]
    return value


def _camel(name: str) -> str:
    return _SNAKE.sub(lambda m: m.group(1).upper(), name)


def _gemini_names(params: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """camelCase field names at the top level and inside Gemini's config objects."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = _camel(key)
        if name in _GEMINI_CONFIGS and isinstance(value, Mapping) and depth < 3:
            value = _gemini_names(value, depth + 1)
        if name in out and out[name] != value:
            return dict(params)  # both spellings with different values: leave it as sent
        out[name] = value
    return out


def _endpoint_kind(provider: str, endpoint: str) -> str:
    if provider in ("openai", "azure"):
        if endpoint.endswith("/chat/completions"):
            return "chat"
        if endpoint.endswith("/responses"):
            return "responses"
        return ""
    if provider == "anthropic":
        return "messages" if endpoint.endswith(("/v1/messages", ":rawPredict", ":streamRawPredict")) else ""
    return ""


def _default_tool_choice(provider: str, choice: Any, tools: bool) -> bool:
    if provider not in _TOOL_CHOICE_DEFAULT:
        return False
    if tools:
        return any(choice == default for default in _TOOL_CHOICE_DEFAULT[provider])
    return provider in ("openai", "azure") and choice == "none"


def _without_defaults(params: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items()
            if not (k in defaults and v == defaults[k] and type(v) is type(defaults[k]))}


def canonical_params(provider: str, endpoint: str, params: Mapping[str, Any],
                     ignore: Iterable[str] = (), tools: bool = False) -> dict[str, Any]:
    """`params` with numbers, Gemini's field names and documented defaults in one form,
    minus the top-level parameters named in `ignore` (in either Gemini spelling). A top-level
    `null` is the parameter left unset; `tools`: the request declares tools (tool_choice's default)."""
    provider = FAMILY.get(provider, provider)
    ignored = set(ignore)
    out = canonical_number({k: v for k, v in params.items() if k not in ignored and v is not None})
    if "tool_choice" in out and _default_tool_choice(provider, out["tool_choice"], tools):
        del out["tool_choice"]
    if provider == "gemini":
        ignored |= {_camel(name) for name in ignored}
        out = {k: v for k, v in _gemini_names(out).items() if k not in ignored}
        config = out.get("generationConfig")
        if isinstance(config, dict):
            config = _without_defaults(config, DEFAULTS["gemini/generationConfig"])
            if config:
                out["generationConfig"] = config
            else:
                del out["generationConfig"]
        return out
    defaults = DEFAULTS.get(f"{provider}/{_endpoint_kind(provider, endpoint)}")
    return _without_defaults(out, defaults) if defaults else out
