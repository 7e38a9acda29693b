"""Fields the user declares volatile: the project setting `ignore` (shown as `semula_ignore`).

A run id in a body parameter, a random seed pasted into a prompt, a timestamp in the project's own
format: values that never change an answer but change on every run, so every request misses. The
user names them, and both fingerprints (exact and normalised) see a placeholder in their place:

- a **path** names one value in the request body: keys joined by dots, ``[*]`` for every item of a
  list (``metadata.run_id``, ``extra_body.trace[*].id``). It matches exactly the path named (no
  wildcard key, no prefix, no recursive descent) and reaches only a body parameter: never the model,
  the prompt (messages, system, instructions, contents, input, prompt), the tools or ``stream``.
  A path whose first key names one of those is refused when the setting is read; a path whose first
  key an adapter turned into the prompt is not applied (the fingerprints must see the same thing).
- a **pattern** is a regular expression in RE2 syntax (google-re2: linear time, no backreferences or
  lookarounds, so no pattern can hang a request), replaced wherever it matches in the request's text
  (prompt, system, tool arguments and results, string parameters; never a key, never the model).
  A pattern that matches the empty text, would replace most of an ordinary sentence or matches a plain
  number whole (a bare run of digits) is refused: it would hide differences the user did not name.

Everything else still counts. Pure: the transformations take and return plain values; the
canonical request applies them (`canonical.ignored`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

__all__ = [
    "IGNORED",
    "NO_IGNORE",
    "IgnoreError",
    "IgnoreRules",
    "Taken",
    "ignore_in_value",
    "ignore_text",
    "parse_ignore",
    "strings_ignored",
]

# What an ignored value becomes in both fingerprints' view (never in the stored request).
IGNORED = "<ignored>"

# Caps: the setting travels in `_settings.json` and is applied to every request of the project.
MAX_PATHS = 32
MAX_PATTERNS = 32
MAX_PATH_CHARS = 200
MAX_PATTERN_CHARS = 500
MAX_DEPTH = 16  # keys in one path
RE2_MAX_MEM = 1 << 22  # 4 MB per compiled pattern: RE2 refuses a bigger program (a{1000}{1000})

# The first keys a path may never start with: the model, the prompt in every provider's spelling,
# the tools, and `stream` (the canonical request reads it apart from the body).
PROMPT_KEYS = frozenset({
    "model", "messages", "input", "prompt", "instructions", "system", "contents", "content",
    "systemInstruction", "system_instruction", "tools", "functions", "toolConfig", "requests", "stream",
})

_KEY = r"[A-Za-z0-9_$@-]+"
_PATH = re.compile(rf"{_KEY}(?:\.{_KEY}|\[\*\])*")
_STEP = re.compile(rf"\.?({_KEY})|(\[\*\])")

# Ordinary text a pattern must leave mostly alone: a pattern that replaces more than half of any of
# these (`.+`, `\w+`, `[^0-9]+`) would hide the prompt itself.
PROBES = (
    "What is the capital of France? Answer in one word.",
    "Summarise the following report for a busy engineer, in three bullet points.",
    "Écris un poème court sur la mer et le vent.",
    "def add(a, b):\n    return a + b",
)


# Plain numbers a pattern may not match whole (`\d+`, `[0-9.]+`): numbers change answers, and the guard
# compares them; a volatile number is named with its label (`seed=\d+`).
NUMBER_PROBES = ("3", "42", "120", "2.5", "2024")


class IgnoreError(ValueError):
    """The `ignore` setting is invalid: the message names the rule and why."""


@dataclass(frozen=True)
class IgnoreRules:
    """The declared volatile fields of one project; empty changes no fingerprint."""

    paths: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.paths or self.patterns)

    def to_json(self) -> dict[str, list[str]]:
        return {"paths": list(self.paths), "patterns": list(self.patterns)}


NO_IGNORE = IgnoreRules()


def _strings(name: str, value: Any, cap: int, chars: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise IgnoreError(f"semula_ignore: {name} must be a list of strings, got {value!r:.80}")
    if len(value) > cap:
        raise IgnoreError(f"semula_ignore: at most {cap} {name}, got {len(value)}")
    for item in value:
        if len(item) > chars:
            raise IgnoreError(f"semula_ignore: a {name[:-1]} is at most {chars} characters, got {len(item)}")
    return tuple(dict.fromkeys(value))


def _check_path(path: str) -> str:
    if not _PATH.fullmatch(path):
        raise IgnoreError(f"semula_ignore: path {path!r} is not keys joined by '.' with optional '[*]' "
                          "(e.g. metadata.run_id, extra_body.trace[*].id)")
    steps = _steps(path)
    if len(steps) > MAX_DEPTH:
        raise IgnoreError(f"semula_ignore: path {path!r} is deeper than {MAX_DEPTH} keys")
    if steps[0] in PROMPT_KEYS:
        raise IgnoreError(f"semula_ignore: path {path!r} reaches into the model, the prompt or the tools "
                          f"({steps[0]!r}), which always count; name the volatile value inside the text "
                          "with a pattern instead")
    return path


@lru_cache(maxsize=1024)
def _steps(path: str) -> tuple[str | None, ...]:
    """A path's steps: a key, or None for `[*]`."""
    return tuple(key if key else None for key, _ in _STEP.findall(path))


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # the error is raised, and said once, by the caller
    options.max_mem = RE2_MAX_MEM
    return re2.compile(pattern, options=options)


def _shown(pattern: str) -> str:
    """A pattern as messages show it: between slashes, as written (escaped only when not printable)."""
    return f"/{pattern}/" if pattern.isprintable() else repr(pattern)


def _check_pattern(pattern: str) -> str:
    try:
        compiled = _compiled(pattern)
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise IgnoreError(f"semula_ignore: pattern {_shown(pattern)} is not a valid RE2 regular expression: {reason} "
                          "(no backreferences or lookarounds)") from None
    if compiled.search("") is not None:
        raise IgnoreError(f"semula_ignore: pattern {_shown(pattern)} matches the empty text; make it match only "
                          "the volatile value (e.g. seed=\\d+)")
    for probe in PROBES:
        kept = len("".join(compiled.sub("", probe).split()))
        if kept * 2 < len("".join(probe.split())):
            raise IgnoreError(f"semula_ignore: pattern {_shown(pattern)} replaces most of an ordinary prompt "
                              f"({probe[:40]!r}…): it would hide differences that matter")
    if number := next((n for n in NUMBER_PROBES if compiled.fullmatch(n) is not None), None):
        raise IgnoreError(f"semula_ignore: pattern {_shown(pattern)} matches a plain number ({number}): numbers "
                          "change answers; tie it to its label (e.g. seed=\\d+)")
    return pattern


def parse_ignore(value: Any) -> IgnoreRules:
    """The setting from its JSON form: {"paths": [...], "patterns": [...]}; null or {} is none."""
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except ValueError as e:
            raise IgnoreError(f"semula_ignore is not JSON ({e}): write it as "
                              '{"paths": [...], "patterns": [...]}, a backslash in a pattern as \\\\') from None
    if value is None or value == {}:
        return NO_IGNORE
    if isinstance(value, IgnoreRules):
        value = value.to_json()
    if not isinstance(value, Mapping):
        raise IgnoreError('semula_ignore must be an object {"paths": [...], "patterns": [...]}, '
                          f"got {value!r:.80}")
    unknown = set(value) - {"paths", "patterns"}
    if unknown:
        raise IgnoreError(f"semula_ignore: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                          "valid: paths, patterns")
    paths = _strings("paths", value.get("paths"), MAX_PATHS, MAX_PATH_CHARS)
    patterns = _strings("patterns", value.get("patterns"), MAX_PATTERNS, MAX_PATTERN_CHARS)
    return IgnoreRules(tuple(_check_path(p) for p in paths), tuple(_check_pattern(p) for p in patterns))


Taken = set[str]  # the rules that changed something, by their name (`describe`)


def ignore_text(text: str, rules: IgnoreRules, taken: Taken | None = None) -> str:
    """`text` with every match of the rules' patterns replaced by the placeholder."""
    for pattern in rules.patterns:
        replaced, count = _compiled(pattern).subn(IGNORED, text)
        if count:
            text = replaced
            if taken is not None:
                taken.add(f"/{pattern}/")
    return text


def _strings_in(value: Any, text: Callable[[str], str]) -> Any:
    """Every string value (not key) in a JSON value, through `text`."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {k: _strings_in(v, text) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strings_in(v, text) for v in value]
    return value


def _at_path(value: Any, steps: tuple[str | None, ...]) -> tuple[Any, bool]:
    """`value` with what `steps` names replaced by the placeholder, and whether anything was."""
    if not steps:
        return IGNORED, True
    step, rest = steps[0], steps[1:]
    if step is None:
        if not isinstance(value, list):
            return value, False
        done = [_at_path(item, rest) for item in value]
        return [item for item, _ in done], any(hit for _, hit in done)
    if not isinstance(value, dict) or step not in value:
        return value, False
    inner, hit = _at_path(value[step], rest)
    return ({**value, step: inner} if hit else value), hit


def ignore_in_value(value: Mapping[str, Any], rules: IgnoreRules, top_keys: frozenset[str] | set[str],
                    taken: Taken | None = None, *, keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A body (or the parameters) with the rules applied: each path whose first key is in `top_keys`
    (a body parameter, as the adapter read it), then the patterns in every string value except under
    the top-level keys in `keep` (the model)."""
    out = dict(value)
    for path in rules.paths:
        steps = _steps(path)
        if steps[0] not in top_keys:
            continue
        out, hit = _at_path(out, steps)
        if hit and taken is not None:
            taken.add(path)
    if rules.patterns:
        out = {k: v if k in keep else _strings_in(v, lambda s: ignore_text(s, rules, taken)) for k, v in out.items()}
    return out


def strings_ignored(value: Any, rules: IgnoreRules, taken: Taken | None = None) -> Any:
    """Every string value in a JSON value with the rules' patterns applied (paths do not reach it)."""
    return _strings_in(value, lambda s: ignore_text(s, rules, taken)) if rules.patterns else value
