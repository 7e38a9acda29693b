"""Per-project settings: their names, defaults, validation, and the frozen value the core reads.

Settings live in the store (`semula config set`), one JSON value per key and project. The
core never reads mitmproxy options or the store: it receives a `ProjectSettings`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from collections.abc import Callable, Mapping
from typing import Any

from semula.core.expiry import POLICIES, parse_duration
from semula.core.scope import base_project
from semula.core.request.ignore import NO_IGNORE, IgnoreError, IgnoreRules, parse_ignore

PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_PROJECT = "default"


Parser = Callable[[str, Any], Any]  # (setting name, value as given) -> the value, or SettingsError


class SettingsError(ValueError):
    """A setting name or value is invalid; the message lists what is valid."""


# One spelling of "off" in what semula documents: `off` turns off a switch (SEMULA_EMBEDDINGS), the recordings
# folder, an optional project setting and SEMULA_STORE_LISTEN. The other spellings are accepted as synonyms (configs
# and CI variables hold them), never documented. (mitmproxy's own bool options take its `true`/`false`.)
OFF = "off"
SWITCH_ON = frozenset({"on", "1", "true", "yes"})
SWITCH_OFF = frozenset({OFF, "", "0", "false", "no", "none"})
# An optional setting (`max_age`, `tail_n`, a threshold): `off` unsets it; "0" stays a number there.
UNSET = frozenset({OFF, "", "none", "null", "all"})


def parse_switch(name: str, value: str | None) -> bool:
    """An on/off switch from an environment variable or option text (SEMULA_EMBEDDINGS=on)."""
    v = (value or "").strip().lower()
    if v in SWITCH_ON:
        return True
    if v in SWITCH_OFF:
        return False
    raise ValueError(f"{name}={value!r} is not a switch: use on or off")


def validate_project(name: str) -> str:
    """Project names reach SQL parameters, file names and log lines: keep them boring."""
    if not isinstance(name, str) or not PROJECT_NAME.match(name):
        raise SettingsError(
            f"invalid project name {name!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def _setting(default: Any, help: str) -> Any:
    """A setting's default and its one-line help (`semula config set --help` lists them)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ProjectSettings:
    scrub_patterns: tuple[str, ...] = _setting(
        (), "extra regexes whose matches are scrubbed before the normalised fingerprint")
    # Generated on each run (e.g. created_at): scrubbed wherever they appear (pasted JSON, tool
    # call arguments, tool results) before the normalised fingerprint.
    scrub_keys: tuple[str, ...] = _setting(
        (), "JSON keys whose values are generated on each run (e.g. created_at), scrubbed everywhere")
    ignore_params: tuple[str, ...] = _setting((), "body parameters that never change an answer in this project")
    # semula_ignore: applied to both fingerprints (core/request/ignore.py says what a rule may reach).
    ignore: IgnoreRules = _setting(
        NO_IGNORE, 'volatile fields (semula_ignore), in both fingerprints: {"paths": ["run_tag.id"], '
        '"patterns": ["seed=\\\\d+"]}')
    bypass_temperature: float = _setting(0.3, "above this temperature the near-match tiers (lexical, embedding) are skipped")
    # The peer gateway's rule.
    bypass_tools: bool = _setting(False, "requests that offer tools skip the near-match tiers")
    lexical_serve_threshold: float = _setting(1.0, "lexical tier (word-overlap Dice, 0..1): serve at or above")
    # 0.6 -> 0.55 on the odd dev-pair ids (recall .906 -> .969); 0.55 -> 0.50 for full review recall (dev and
    # heldout-1 .967 -> 1.0, public paraphrases .699 -> .800) at a cost measured on unrelated cross pairs:
    # 0 of 221 dev/heldout, 12 of 1,500 short public questions proposed (4 at 0.55). scripts/bench.py calibration.
    lexical_review_threshold: float = _setting(0.50, "lexical tier: queue for review at or above")
    tail_n: int | None = _setting(None, "only the last N messages count for near-match shape and context (null = all)")
    # Cosines mean different things for different models: each may be a mapping {model: threshold}.
    embedding_review_threshold: float | Mapping[str, float] = _setting(
        0.75, "embedding tier (cosine): queue for review at or above; a number or {model: number}")
    embedding_serve_threshold: float | Mapping[str, float] | None = _setting(
        None, "embedding tier: serve at or above (null = never serve); a number or {model: number}")
    near_serve: str = _setting(
        "threshold", "near-matches serve by the thresholds above (threshold) or also by thresholds learnt "
        "from this project's review verdicts (calibrated; see `semula calibrate`)")
    max_false_hit_rate: float = _setting(0.01, "calibrated mode: the false-hit rate its learnt thresholds keep under")
    max_age: str | None = _setting(None, "recordings older than this (30d, 12h, 2w) are expired (null = never)")
    max_age_policy: str = _setting("warn", "an expired recording: warn, fail (refused in replay) or re-record (auto)")

    @property
    def fingerprint_inputs(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], IgnoreRules]:
        """The settings that feed the normalised fingerprint (changing them re-fingerprints):
        `normalised_fingerprint(request, *settings.fingerprint_inputs)`. The last, `ignore`, feeds
        the exact fingerprint too."""
        return self.scrub_patterns, self.ignore_params, self.scrub_keys, self.ignore


FINGERPRINT_KEYS = frozenset({"scrub_patterns", "ignore_params", "scrub_keys", "ignore"})
SETTING_KEYS = tuple(f.name for f in fields(ProjectSettings))
SETTING_HELP = {f.name: f.metadata["help"] for f in fields(ProjectSettings)}


def _unit_interval(key: str, value: Any) -> float:
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise SettingsError(f"{key} must be between 0 and 1, got {value!r}")
    return number


def _string_list(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in (part.strip() for part in value.split(",")) if v] if value else []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"{key} must be a list of strings, got {value!r}")
    return tuple(value)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in SWITCH_ON:
        return True
    if text and text in SWITCH_OFF:
        return False
    raise SettingsError(f"{key} must be true or false, got {value!r}")


def _optional(convert: Parser) -> Parser:
    def parse(key: str, value: Any) -> Any:
        if value is None or str(value).strip().lower() in UNSET:
            return None
        return convert(key, value)

    return parse


def _positive_int(key: str, value: Any) -> int:
    number = int(value)
    if number < 1:
        raise SettingsError(f"{key} must be a positive integer, got {value!r}")
    return number


def _scrub_patterns(key: str, value: Any) -> tuple[str, ...]:
    patterns = _string_list(key, value)
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as e:
            raise SettingsError(f"{key}: invalid regular expression {pattern!r}: {e}") from None
    return patterns


def _scrub_keys(key: str, value: Any) -> tuple[str, ...]:
    keys = _string_list(key, value)
    for name in keys:
        if not name.strip() or name != name.strip():
            raise SettingsError(f"{key}: {name!r} is not a JSON key name (empty, or spaces around it)")
    return tuple(dict.fromkeys(keys))


def _ignore(key: str, value: Any) -> IgnoreRules:
    try:
        return parse_ignore(value)
    except IgnoreError as e:
        raise SettingsError(str(e)) from None


def _duration(key: str, value: Any) -> str:
    text = str(value).strip().lower()
    try:
        parse_duration(text)
    except ValueError as e:
        raise SettingsError(f"{key}: {e}") from None
    return text


def _policy(key: str, value: Any) -> str:
    if str(value) not in POLICIES:
        raise SettingsError(f"{key} must be one of {', '.join(POLICIES)}, got {value!r}")
    return str(value)


NEAR_SERVE_MODES = ("threshold", "calibrated")


def _near_serve(key: str, value: Any) -> str:
    if str(value) not in NEAR_SERVE_MODES:
        raise SettingsError(f"{key} must be one of {', '.join(NEAR_SERVE_MODES)}, got {value!r}")
    return str(value)


def _open_rate(key: str, value: Any) -> float:
    number = float(value)
    if not 0.0 < number < 1.0:
        raise SettingsError(f"{key} must be above 0 and below 1 (0.01 is 1 %), got {value!r}")
    return number


def _float(key: str, value: Any) -> float:
    return float(value)


def _per_model(parse: Parser) -> Parser:
    """A threshold, or {model name: threshold} (thresholds are per model)."""

    def parser(key: str, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(model): parse(f"{key}[{model}]", v) for model, v in value.items()}
        return parse(key, value)

    return parser


def threshold_for(value: float | Mapping[str, float] | None, model: str) -> float | None:
    if isinstance(value, Mapping):
        return value.get(model)
    return value


PARSERS = {
    "scrub_patterns": _scrub_patterns,
    "scrub_keys": _scrub_keys,
    "ignore_params": _string_list,
    "ignore": _ignore,
    "bypass_temperature": _float,
    "bypass_tools": _bool,
    "lexical_serve_threshold": _unit_interval,
    "lexical_review_threshold": _unit_interval,
    "tail_n": _optional(_positive_int),
    "embedding_review_threshold": _per_model(_unit_interval),
    "embedding_serve_threshold": _optional(_per_model(_unit_interval)),
    "near_serve": _near_serve,
    "max_false_hit_rate": _open_rate,
    "max_age": _optional(_duration),
    "max_age_policy": _policy,
}
assert set(PARSERS) == set(SETTING_KEYS)


def parse_setting(key: str, value: Any) -> Any:
    """Validate one setting; a raw string from the command line may hold JSON."""
    if key not in PARSERS:
        raise SettingsError(f"unknown setting {key!r}; valid settings: {', '.join(SETTING_KEYS)}")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    try:
        return PARSERS[key](key, value)
    except SettingsError:
        raise
    except (TypeError, ValueError) as e:
        raise SettingsError(f"invalid value for {key}: {value!r} ({e})") from None


def settings_from_mapping(values: dict[str, Any], base: ProjectSettings | None = None) -> ProjectSettings:
    parsed = {key: parse_setting(key, value) for key, value in values.items()}
    return replace(base or ProjectSettings(), **parsed)


def setting_json(value: Any) -> Any:
    """A parsed setting as the store and `_settings.json` keep it (plain JSON)."""
    if isinstance(value, IgnoreRules):
        return value.to_json()
    return list(value) if isinstance(value, tuple) else value


def settings_in(by_project: Mapping[str, ProjectSettings], project: str) -> ProjectSettings:
    """A project's settings; a test-scoped project without its own has its base project's (`core.scope`).
    Every place that fingerprints a project's requests asks this (its `ignore` keys the exact fingerprint)."""
    found = by_project.get(project)
    if found is None and (base := base_project(project)) is not None:
        found = by_project.get(base)
    return found or ProjectSettings()


def settings_to_json(settings: ProjectSettings) -> dict[str, Any]:
    return {f.name: setting_json(getattr(settings, f.name)) for f in fields(settings)}


@dataclass(frozen=True)
class AddonSettings:
    """The proxy-wide options, frozen after `configure` validated them."""

    mode: str = "auto"
    data_dir: str = ".semula"
    default_project: str = DEFAULT_PROJECT
    hosts: tuple[str, ...] = field(default_factory=tuple)  # semula_hosts (or the defaults) + semula_extra_hosts
    mcp_servers: tuple[str, ...] = ()  # semula_mcp_servers: host[:port][/path] of MCP servers (providers/mcp.py)
    side_paths: tuple[str, ...] = ()  # semula_side_paths: regexes of a project's own side calls (never recorded)
    record_errors: bool = False  # also 401/403/408/429/5xx (core/errorpolicy.py)
    namespace_by_key: bool = False
    admin: bool = True
    recordings: str | None = None  # the recordings folder; None: off
    load_timeout: float = 60.0
    max_body_mb: float = 32.0  # a request body that inflates beyond this is not matched
    repeats: str = "one"  # "sequence": the n-th identical request of a run gets the n-th answer
    repeats_exhausted: str = "last"  # sequence replay past the last answer: "last" serves it, "refuse" refuses
    read_only: bool = False  # never write the data dir: the store opens read-only, the logs go to a temp dir
    console_calls: bool = True  # one console line per call (the call log has every row either way)
    # The server store's URL (semula_store, else $SEMULA_STORE); None: the DuckDB file in the data dir.
    # Out of repr: a URL may hold a password.
    store: str | None = field(default=None, repr=False)
    embeddings: bool = False  # semula_embeddings: the embedding tier is on (a missing model refuses to start)
    realtime_max_message_mb: float = 16.0  # a bigger Realtime message closes its connection (1009)
    realtime_max_session_mb: float = 64.0  # a bigger Realtime conversation is not recorded (and never over the file cap)
    # semula_otel: "off", "on" (the OTEL_EXPORTER_OTLP_* endpoint) or an endpoint URL; out of repr: a URL
    # may hold a password. semula_otel_content: prompt and answer text in the spans (redacted).
    otel: str = field(default="off", repr=False)
    otel_content: bool = False
    # mitmproxy's own options the addon reads: where its CA is, and the address asked for (the ready line).
    confdir: str = "~/.mitmproxy"
    listen_host: str = ""
    listen_port: int | None = None
    ignore: IgnoreRules | None = None  # semula_ignore: the default project's `ignore` to set at start; None: leave it
