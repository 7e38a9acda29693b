"""What changed between a recorded answer and the live one: pure, values in and a `Drift` out.

Shapes are compared by JSON path (`$.choices[].message.content`), the items of a list merged into
one shape, so an answer with three choices and one with two have the same shape. Values are not
compared (ids, timestamps and token counts change on every call); their types are. Severity tiers:
a removed field or a changed type breaks a client that reads it (`breaking`), a new field does not
(`minor`). A stream is compared frame by frame as its event types and the shape of its data, and
as the text it assembles. An MCP result is also compared by value (`exact`): a server's tool
answers what it is asked, so any other value is a change (`minor`, unless its shape broke too).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from semula.core.text import similarity, word_diff

BREAKING, MINOR, NONE = "breaking", "minor", "none"
TEXT_DRIFT_BELOW = 0.6  # default --min-similarity: under it, the answer text counts as drifted


@dataclass(frozen=True)
class ShapeChange:
    path: str
    change: str  # added, removed, type
    old: str | None  # the type recorded
    new: str | None  # the type answered now

    @property
    def severity(self) -> str:
        return MINOR if self.change == "added" else BREAKING


@dataclass(frozen=True)
class Answer:
    """One answer as drift compares it."""

    status: int
    body: bytes
    streamed: bool
    frames: tuple[bytes, ...] = ()
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class Drift:
    status: tuple[int, int]
    shape: tuple[ShapeChange, ...] = ()
    events_added: tuple[str, ...] = ()
    events_removed: tuple[str, ...] = ()
    usage: tuple[tuple[int | None, int | None], tuple[int | None, int | None]] = ((None, None), (None, None))
    similarity: float = 1.0
    diff: tuple[str, ...] = field(default=())
    min_similarity: float = TEXT_DRIFT_BELOW
    values_changed: bool = False  # compared by value (`exact`) and another value came back

    @property
    def severity(self) -> str:
        if self.status[0] != self.status[1] or self.events_removed or any(
                c.severity == BREAKING for c in self.shape):
            return BREAKING
        if self.shape or self.events_added or self.values_changed or self.similarity < self.min_similarity:
            return MINOR
        return NONE

    @property
    def drifted(self) -> bool:
        return self.severity != NONE


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def shape(value: Any, path: str = "$", out: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Every JSON path of `value` with the types found there (a list's items merged under `[]`)."""
    out = {} if out is None else out
    out.setdefault(path, set()).add(json_type(value))
    if isinstance(value, dict):
        for key, item in value.items():
            shape(item, f"{path}.{key}", out)
    elif isinstance(value, list):
        for item in value:
            shape(item, f"{path}[]", out)
    return out


def shape_diff(old: dict[str, set[str]], new: dict[str, set[str]]) -> list[ShapeChange]:
    """Fields added, removed, or whose type changed; a path under one that is added or removed is not
    repeated, and `null` beside another type (an optional field) is not a type change."""
    changes: list[ShapeChange] = []
    reported: list[str] = []

    def under_reported(path: str) -> bool:
        return any(path.startswith(p + ".") or path.startswith(p + "[]") for p in reported)

    for path in sorted(set(old) | set(new)):
        if under_reported(path):
            continue
        if path not in new:
            changes.append(ShapeChange(path, "removed", _types(old[path]), None))
            reported.append(path)
        elif path not in old:
            changes.append(ShapeChange(path, "added", None, _types(new[path])))
            reported.append(path)
        elif (old[path] - {"null"}) and (new[path] - {"null"}) and old[path] - {"null"} != new[path] - {"null"}:
            changes.append(ShapeChange(path, "type", _types(old[path]), _types(new[path])))
    return changes


def _types(types: set[str]) -> str:
    return "|".join(sorted(types))


def parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def frame_data(frames: Iterable[bytes]) -> list[tuple[str, Any]]:
    """(event type, data JSON) of each frame: the `event:` field, else the data's `type` or `object`."""
    out = []
    for frame in frames:
        event, data_lines = None, []
        for line in frame.decode("utf-8", "replace").splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data_lines.append(line[5:].strip())
        data = "\n".join(data_lines)
        value = parsed(data.encode()) if data and data != "[DONE]" else None
        kind = event or (value.get("type") or value.get("object") if isinstance(value, dict) else None) or (
            "[DONE]" if data == "[DONE]" else "data")
        out.append((str(kind), value))
    return out


def compare(old: Answer, new: Answer, min_similarity: float = TEXT_DRIFT_BELOW, exact: bool = False) -> Drift:
    """The drift from `old` to `new`; `exact`: their JSON bodies are also compared by value."""
    if old.streamed and new.streamed:
        old_frames, new_frames = frame_data(old.frames), frame_data(new.frames)
        old_shape: dict[str, set[str]] = {}
        new_shape: dict[str, set[str]] = {}
        for kind, value in old_frames:
            if value is not None:
                shape(value, f"${kind}", old_shape)
        for kind, value in new_frames:
            if value is not None:
                shape(value, f"${kind}", new_shape)
        old_kinds, new_kinds = {k for k, _ in old_frames}, {k for k, _ in new_frames}
        added, removed = tuple(sorted(new_kinds - old_kinds)), tuple(sorted(old_kinds - new_kinds))
    else:
        old_value, new_value = parsed(old.body), parsed(new.body)
        old_shape = shape(old_value) if old_value is not None else {}
        new_shape = shape(new_value) if new_value is not None else {}
        added = removed = ()
        if old.streamed != new.streamed:
            added, removed = (("stream",), ()) if new.streamed else ((), ("stream",))
    # Another status is the change: an error body's shape against an answer's would only be noise.
    changes = tuple(shape_diff(old_shape, new_shape)) if old.status == new.status else ()
    return Drift(
        status=(old.status, new.status), shape=changes,
        events_added=added, events_removed=removed,
        usage=((old.prompt_tokens, old.completion_tokens), (new.prompt_tokens, new.completion_tokens)),
        similarity=similarity(old.text, new.text), diff=word_diff(old.text, new.text) if old.text != new.text else (),
        min_similarity=min_similarity,
        values_changed=exact and parsed(old.body) != parsed(new.body),
    )


def to_json(drift: Drift) -> dict[str, Any]:
    return {
        "severity": drift.severity, "status": list(drift.status),
        "shape": [{"path": c.path, "change": c.change, "old": c.old, "new": c.new, "severity": c.severity}
                  for c in drift.shape],
        "events_added": list(drift.events_added), "events_removed": list(drift.events_removed),
        "usage": {"recorded": list(drift.usage[0]), "live": list(drift.usage[1])},
        "similarity": drift.similarity, "diff": list(drift.diff), "values_changed": drift.values_changed,
    }
