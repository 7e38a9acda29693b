"""Bypass rules: a small, named list. Each returns None or a `Bypass` with its reason.

Scope "all" skips the cache entirely (the call goes upstream and is not recorded). Scope
"near" only skips the near-match tiers (lexical, embedding): exact, normalised and alias
still serve, because exact replay of recorded tests is this tool's purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from semula.core.request.canonical import CanonicalRequest
from semula.core.request.params import param_rules, sampling_objects
from semula.core.decision import Bypass
from semula.core.settings import ProjectSettings

NO_CACHE_HEADER = "x-semula-no-cache"


def no_cache_header(headers: Mapping[str, str]) -> Bypass | None:
    if NO_CACHE_HEADER in headers:
        return Bypass("no_cache_header", f"header {NO_CACHE_HEADER}")
    return None


def temperature_above(request: CanonicalRequest, settings: ProjectSettings) -> Bypass | None:
    params = request.params or {}
    temperature = params.get("temperature")
    # An object that holds the sampling parameters (Gemini's generationConfig, in either spelling): the
    # first such object the request has, whatever its provider, as the providers declare them.
    config = next((params[name] for name in sampling_objects() if name in params), None)
    if temperature is None and isinstance(config, dict):
        temperature = config.get("temperature")
    if isinstance(temperature, (int, float)) and temperature > settings.bypass_temperature:
        return Bypass("temperature_above", f"temperature {temperature:g} > {settings.bypass_temperature:g}", "near")
    return None


def tools_present(request: CanonicalRequest, settings: ProjectSettings) -> Bypass | None:
    if settings.bypass_tools and request.tools:
        return Bypass("tools_present", "request offers tools and bypass_tools is on", "near")
    return None


def review_only(request: CanonicalRequest, settings: ProjectSettings) -> Bypass | None:
    """The provider's near matches are reviewed, never served (its adapter says why: `ParamRules`)."""
    if (why := param_rules(request.provider).near_review_only) is not None:
        return Bypass("review_only", why, "near")
    return None


NEAR_RULES: tuple[Callable[[CanonicalRequest, ProjectSettings], Bypass | None], ...] = (
    review_only,
    temperature_above,
    tools_present,
)


def near_bypass(request: CanonicalRequest, settings: ProjectSettings) -> Bypass | None:
    for rule in NEAR_RULES:
        if (found := rule(request, settings)) is not None:
            return found
    return None
