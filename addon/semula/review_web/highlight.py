"""What differs between a candidate's two requests, as escaped HTML: changed words and changed fields.

Pure: strings and JSON values in, HTML out. Every piece of request text goes through `html.escape`
(quotes included) before it is wrapped in markup, because prompts are written by whoever calls the
API, and a reviewer's browser must show `<script>` as text.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

SegmentKind = Literal["same", "removed", "added"]

# A word, a run of punctuation, or one Han/kana character (Chinese and Japanese put no spaces between
# words, so a whole sentence would otherwise be one token); the whitespace after a token stays with it.
_TOKEN = re.compile(r"(?:[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\u3040-\u30ff\u3400-\u4dbf"
                    r"\u4e00-\u9fff\uf900-\ufaff]+|[^\w\s]+)\s*|\s+")

ABSENT = "(absent)"


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    text: str


@dataclass(frozen=True)
class FieldChange:
    path: str  # "params.temperature", "model"
    recorded: str  # the value as compact JSON, or ABSENT
    incoming: str


def escape(text: str) -> str:
    return html.escape(text, quote=True)


def tokens(text: str) -> list[str]:
    """The text cut into tokens that join back to it exactly."""
    return _TOKEN.findall(text)


def word_segments(recorded: str, incoming: str) -> tuple[list[Segment], list[Segment]]:
    """The two texts as runs of same/removed (recorded side) and same/added (incoming side) tokens.

    Tokens are compared without their trailing whitespace, so a re-wrapped line is not a change."""
    a, b = tokens(recorded), tokens(incoming)
    matcher = difflib.SequenceMatcher(a=[t.strip() for t in a], b=[t.strip() for t in b], autojunk=False)
    left: list[Segment] = []
    right: list[Segment] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            left.append(Segment("same", "".join(a[i1:i2])))
            right.append(Segment("same", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(Segment("removed", "".join(a[i1:i2])))
        if j2 > j1:
            right.append(Segment("added", "".join(b[j1:j2])))
    return left, right


_MARKUP = {"same": "{}", "removed": '<del class="w">{}</del>', "added": '<ins class="w">{}</ins>'}


def segments_html(segments: list[Segment]) -> str:
    """The segments as HTML; a changed run's trailing whitespace stays outside its mark."""
    out = []
    for segment in segments:
        marked = segment.text.rstrip() if segment.kind != "same" else segment.text
        out.append(_MARKUP[segment.kind].format(escape(marked)) + escape(segment.text[len(marked):]))
    return "".join(out)


def side_by_side(recorded: str, incoming: str) -> tuple[str, str]:
    """(recorded, incoming) as escaped HTML with the removed and added words marked."""
    left, right = word_segments(recorded, incoming)
    return segments_html(left), segments_html(right)


def _flatten(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and (value or not path):  # an empty object is a value, except at the top
        for key in sorted(value):
            _flatten(value[key], f"{path}.{key}" if path else str(key), out)
    else:
        out[path] = value


def _shown(value: Any, present: bool) -> str:
    if not present:
        return ABSENT
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def field_changes(recorded: Mapping[str, Any] | None, incoming: Mapping[str, Any] | None) -> list[FieldChange]:
    """The leaf fields (nested objects flattened to dotted paths) whose values differ, in path order."""
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    _flatten(recorded or {}, "", old)
    _flatten(incoming or {}, "", new)
    changes = []
    for path in sorted(old.keys() | new.keys()):
        before, after = _shown(old.get(path), path in old), _shown(new.get(path), path in new)
        if before != after:  # as JSON text: 1 and true, 0 and 0.0 are shown apart, as they were sent
            changes.append(FieldChange(path, before, after))
    return changes
