"""Request parameters in one canonical form, for the normalised view of a request.

Two requests whose parameters are written differently but mean the same thing should share
the normalised fingerprint: `temperature` 0 vs 0.0, Gemini's `generation_config` vs
`generationConfig` (its REST API accepts both spellings of every field), and a parameter set
to the provider's documented default vs left out. The exact fingerprint keeps the body as
sent; only the normalised and context views (and the near-match shape) use this form.

What a provider documents (its defaults, its endpoint kinds, its spellings) is declared by its
adapter (`providers/`, `Adapter.param_rules`) as a :class:`ParamRules` value. Core imports no
adapter: it receives the table, one frozen mapping from provider name to rules built from the
static adapter registry, as data, bound once when the `semula` package is imported
(`semula/__init__.py`). So the normalised view of a stored request never depends on which
adapters a process happened to import, and a provider the table does not name has no rules
(numbers in one form; every parameter, at any value, keeps counting).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["ANY_ENDPOINT", "NO_PARAM_RULES", "EndpointDefaults", "ParamRules", "Renamed", "bind_param_rules",
           "canonical_number", "canonical_params", "param_rules", "sampling_objects"]

# An endpoint suffix every endpoint ends with: the defaults hold whatever the path.
ANY_ENDPOINT = ("",)


@dataclass(frozen=True)
class EndpointDefaults:
    """The documented defaults of the endpoints whose path ends with one of `suffixes`."""

    suffixes: tuple[str, ...]
    values: Mapping[str, Any]


@dataclass(frozen=True)
class Renamed:
    """A parameter the reference spells two ways: on the endpoints whose path ends with one of
    `suffixes`, for a model `models` matches whole, `old` means the same as `new`. Only there: a
    model outside it may refuse one spelling (OpenAI's reasoning models answer `max_tokens` with a
    400), so an unknown model keeps both apart."""

    old: str
    new: str
    suffixes: tuple[str, ...]
    models: str  # a regular expression


@dataclass(frozen=True)
class ParamRules:
    """One provider's parameter rules, as its API reference states them (declared by its adapter).

    Defaults are listed only where the reference states them and they do not depend on the model."""

    # The first entry whose suffix the endpoint ends with gives the defaults left out.
    defaults: tuple[EndpointDefaults, ...] = ()
    # The defaults apply to the fields of this object (Gemini's generationConfig), not the top level.
    defaults_under: str | None = None
    # tool_choice values that are the default when the request declares tools.
    tool_choice_defaults: tuple[Any, ...] = ()
    # tool_choice "none" is the default when the request declares no tools.
    tool_choice_none_without_tools: bool = False
    # Field names come in both spellings (snake_case and camelCase) at the top level and inside these
    # objects; empty: names are kept as sent.
    both_spellings: tuple[str, ...] = ()
    # Objects (in the order looked at) that may hold the sampling parameters, temperature included.
    sampling_objects: tuple[str, ...] = ()
    # Top-level parameters that mean the same under another name, for some models.
    renamed: tuple[Renamed, ...] = ()
    # Why a near match (lexical, embedding, calibrated) never serves this provider's requests, only queues
    # them for review (MCP: a tool call with other arguments is another call); None: the thresholds decide.
    near_review_only: str | None = None

    def defaults_for(self, endpoint: str) -> Mapping[str, Any] | None:
        return next((d.values for d in self.defaults if endpoint.endswith(d.suffixes)), None)

    def default_tool_choice(self, choice: Any, tools: bool) -> bool:
        if tools:
            return any(choice == default for default in self.tool_choice_defaults)
        return self.tool_choice_none_without_tools and choice == "none"


NO_PARAM_RULES = ParamRules()

_table: Mapping[str, ParamRules] = MappingProxyType({})
_sampling: tuple[str, ...] = ()


def bind_param_rules(table: Mapping[str, ParamRules]) -> None:
    """Bind the providers' table; done once by the package (`semula/__init__.py`) from the static
    adapter registry. Binding another table later is refused: fingerprints would shift under a store."""
    global _table, _sampling
    frozen = MappingProxyType(dict(table))
    if _table and dict(_table) != dict(frozen):
        raise RuntimeError("the providers' parameter rules are already bound to another table")
    _table = frozen
    _sampling = tuple(dict.fromkeys(name for rules in frozen.values() for name in rules.sampling_objects))


def param_rules(provider: str) -> ParamRules:
    """The rules of `provider` in the bound table (none for a name the table does not hold)."""
    return _table.get(provider, NO_PARAM_RULES)


def sampling_objects() -> tuple[str, ...]:
    """Every provider's objects that may hold sampling parameters, for rules that read any body."""
    return _sampling


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


def _camel_names(params: Mapping[str, Any], objects: tuple[str, ...], depth: int = 0) -> dict[str, Any]:
    """camelCase field names at the top level and inside `objects`. Field *values* that hold
    user-named keys (a response schema's properties, function parameters) are never renamed."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = _camel(key)
        if name in objects and isinstance(value, Mapping) and depth < 3:
            value = _camel_names(value, objects, depth + 1)
        if name in out and out[name] != value:
            return dict(params)  # both spellings with different values: leave it as sent
        out[name] = value
    return out


def _without_defaults(params: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items()
            if not (k in defaults and v == defaults[k] and type(v) is type(defaults[k]))}


def _renamed(out: dict[str, Any], rules: ParamRules, endpoint: str, model: str | None) -> dict[str, Any]:
    for rename in rules.renamed:
        if rename.old in out and rename.new not in out and model is not None \
                and endpoint.endswith(rename.suffixes) and re.fullmatch(rename.models, model):
            out = {(rename.new if k == rename.old else k): v for k, v in out.items()}
    return out


def canonical_params(provider: str, endpoint: str, params: Mapping[str, Any],
                     ignore: Iterable[str] = (), tools: bool = False, model: str | None = None) -> dict[str, Any]:
    """`params` with numbers, field spellings and documented defaults in one form (the provider's
    rules), minus the top-level parameters named in `ignore` (in either spelling). A top-level
    `null` is the parameter left unset; `tools`: the request declares tools (tool_choice's default);
    `model`: the request's model, for a parameter spelled two ways on some models only."""
    rules = param_rules(provider)
    ignored = set(ignore)
    out = canonical_number({k: v for k, v in params.items() if k not in ignored and v is not None})
    if rules.renamed:
        out = _renamed(out, rules, endpoint, model)
    if "tool_choice" in out and rules.default_tool_choice(out["tool_choice"], tools):
        del out["tool_choice"]
    if rules.both_spellings:
        ignored |= {_camel(name) for name in ignored}
        out = {k: v for k, v in _camel_names(out, rules.both_spellings).items() if k not in ignored}
    defaults = rules.defaults_for(endpoint)
    if not defaults:
        return out
    if rules.defaults_under is None:
        return _without_defaults(out, defaults)
    inner = out.get(rules.defaults_under)
    if isinstance(inner, dict):
        inner = _without_defaults(inner, defaults)
        if inner:
            out[rules.defaults_under] = inner
        else:
            del out[rules.defaults_under]
    return out
