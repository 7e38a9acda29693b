"""Where two JSON values first differ, as a path a developer can find in a recording file.

A request semula could not parse (the exact-only tier) has no named fields to compare, but its
body is still JSON: a replay miss names the first path whose values differ ("$.input[2].id:
"call_a…" → "call_b…"") instead of a bare "body differs". Pure: plain values in, a string out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from semula.core.request.canonical import canonical_json
from semula.core.text import shorten

# Nesting deeper than this is reported at the depth reached: a hostile body must not recurse forever.
MAX_DEPTH = 64
VALUE_WIDTH = 40


def _show(value: Any) -> str:
    return shorten(canonical_json(value), VALUE_WIDTH)


def _key(path: str, key: str) -> str:
    plain = key.isidentifier()
    return f"{path}.{key}" if plain else f"{path}[{canonical_json(key)}]"


def first_difference(recorded: Any, incoming: Any, path: str = "$", depth: int = 0) -> str | None:
    """The first path (keys in sorted order, items in order) where `incoming` differs from `recorded`,
    with both values; None when they are equal as canonical JSON."""
    if canonical_json(recorded) == canonical_json(incoming):
        return None
    if depth < MAX_DEPTH and isinstance(recorded, Mapping) and isinstance(incoming, Mapping):
        for key in sorted(set(recorded) | set(incoming), key=str):
            where = _key(path, str(key))
            if key not in recorded:
                return f"{where}={_show(incoming[key])} only in this request"
            if key not in incoming:
                return f"{where}={_show(recorded[key])} only in the recording"
            found = first_difference(recorded[key], incoming[key], where, depth + 1)
            if found:
                return found
    if depth < MAX_DEPTH and isinstance(recorded, list) and isinstance(incoming, list):
        for index, (a, b) in enumerate(zip(recorded, incoming)):
            found = first_difference(a, b, f"{path}[{index}]", depth + 1)
            if found:
                return found
        if len(recorded) != len(incoming):
            return f"{path}: {len(incoming)} items, the recording has {len(recorded)}"
    if isinstance(recorded, str) and isinstance(incoming, str):  # shown around their first difference
        start = next((i for i, (x, y) in enumerate(zip(recorded, incoming)) if x != y),
                     min(len(recorded), len(incoming)))
        begin = max(0, start - VALUE_WIDTH // 3)
        recorded, incoming = (("…" if begin else "") + s[begin:] for s in (recorded, incoming))
    return f"{path} {_show(recorded)} → {_show(incoming)}"
