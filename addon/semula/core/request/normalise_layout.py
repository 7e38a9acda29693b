"""Layout rules of :mod:`semula.core.request.normalise`: indentation, quotes and pasted JSON.

Normalising erases differences that never change the answer. Three kinds of
layout sit on the edge, and this module decides them:

- Indentation is compared as relative nesting: the distinct indent widths of
  a block become ranks 0, 1, 2..., so a block re-indented as a whole (4 -> 2
  spaces, or shifted right) stays the same while moving one line to another
  level does not. Leading tabs count as tabs where a Makefile needs them.
  Prose lines (a capitalised sentence of plain words) are left out, so a
  list indented under its lead-in line matches the same list unindented.
- Quoted strings keep their letter case and their whitespace.
- Pasted JSON is compared without its whitespace and with sorted keys, but
  repeated keys stay, in their order, and numbers keep their literal text.

Pure functions, no imports from the rest of the package.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = [
    "MARK_END",
    "MARK_START",
    "QUOTED",
    "canonical_json_text",
    "code_lines",
    "json_spans",
    "mark_indentation",
    "render_marks",
    "try_json",
]

# ---------------------------------------------------------------- JSON


class _Object(list):  # type: ignore[type-arg]
    """A JSON object as its (key, value) pairs, repeated keys included."""


class _Number(str):
    """A JSON number as written (1.10 is not 1.1 in a version field)."""


_DECODER = json.JSONDecoder(
    object_pairs_hook=_Object, parse_float=_Number, parse_int=_Number, parse_constant=_Number
)


def canonical_json_text(value: object) -> str:
    """Compact JSON with keys sorted; the sort is stable, so repeated keys
    (``{"id": 1, "id": 2}``) keep both values in their order."""
    if isinstance(value, _Object):
        items = sorted(value, key=lambda kv: kv[0])
        return "{" + ",".join(_string(k) + ":" + canonical_json_text(v) for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical_json_text(v) for v in value) + "]"
    if isinstance(value, _Number):
        return str.__str__(value)
    if isinstance(value, str):
        return _string(value)
    return json.dumps(value)


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def try_json(text: str) -> str | None:
    """The canonical form of ``text`` if all of it is a JSON object or array."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return canonical_json_text(_DECODER.decode(stripped))
    except (ValueError, RecursionError):
        return None


_JSON_START = re.compile(r"[\[{]")


def json_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, canonical)`` of each JSON object/array inside ``text[start:end]``."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int, str]] = []
    search_from = start
    while True:
        m = _JSON_START.search(text, search_from, end)
        if m is None:
            return spans
        try:
            value, stop = _DECODER.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            search_from = m.start() + 1
            continue
        if not isinstance(value, list) or stop > end:
            search_from = m.start() + 1
            continue
        spans.append((m.start(), stop, canonical_json_text(value)))
        search_from = stop


# ---------------------------------------------------------------- quotes

# A quoted string: the opening quote follows a space or bracket and the
# closing one precedes a space or punctuation, so apostrophes (it's, the
# drivers' cars) and inch marks (5' 11") do not open one; a double-quoted
# string may end in spaces ("Note:  "). It stops at a
# paragraph break. Its case and whitespace are kept.
QUOTED = re.compile(
    r"""(?<![^\s(\[{:,;=/])"(?=[^\s"])(?:[^"\n]|\n(?![ \t]*\n))*?"(?!\w)"""
    r"""|(?<![^\s(\[{:,;=/])'(?=[^\s'])(?:[^'\n]|'(?=\w)|\n(?![ \t]*\n))*?(?<=[^\s'])'(?!\w)"""
)


# ---------------------------------------------------------------- indentation

# A prose line: starts with a capital (or a caseless letter, as in CJK), holds
# only plain words and numbers, and no "key: value" colon before its end.
_PROSE_TOKEN = re.compile(
    r"""["'(\[]*(?:[^\W\d_]+(?:['-][^\W\d_]+)*|\d+(?:[.,]\d+)*%?)["')\]]*[,.;:!?]*"""
)
# A Makefile rule line ("all: build", "%.o: %.c"); its recipe lines need tabs.
_MAKE_RULE = re.compile(r"[\w.%/$(){}-]+(?:[ \t]+[\w.%/$(){}-]+)*[ \t]*::?(?!=)(?:[ \t]|$)")
_TAB_WIDTH = 4


def _is_prose_line(content: str) -> bool:
    first = content[0]
    if not (first.isupper() or (first.isalpha() and not first.islower())):
        return False
    tokens = content.split()
    if len(tokens) < 3 and not (first.isalpha() and not first.isupper() and len(content) >= 8):
        return False
    last = len(tokens) - 1
    return all(
        _PROSE_TOKEN.fullmatch(token) and (i == last or not token.endswith(":")) for i, token in enumerate(tokens)
    )


def _ranks(indents: Sequence[str], tabs_matter: bool) -> list[tuple[bool, int]]:
    """Each indent as (tab kept, nesting rank); a tab counts only where tabs matter."""
    widths = [len(ws.expandtabs(_TAB_WIDTH)) for ws in indents]
    rank = {w: i for i, w in enumerate(sorted(set(widths)))}
    return [(tabs_matter and "\t" in ws, rank[w]) for ws, w in zip(indents, widths)]


def _tabs_matter(lines: Sequence[tuple[str, str]]) -> bool:
    """True if a tab-indented line follows a Makefile-rule-like line."""
    has_tab = any("\t" in ws for ws, _ in lines)
    return has_tab and any(not ws and _MAKE_RULE.match(content) for ws, content in lines)


def code_lines(code: str, language: str = "") -> str:
    """A code block's lines with indentation as relative nesting; blank lines
    and trailing spaces dropped, everything else kept."""
    lines = []
    for line in code.split("\n"):
        content = line.rstrip()
        stripped = content.lstrip(" \t")
        if stripped:
            lines.append((content[: len(content) - len(stripped)], stripped))
    tabs = language in {"make", "makefile", "mk", "mak"} or _tabs_matter(lines)
    indents = _ranks([ws for ws, _ in lines], tabs)
    return "\n".join(
        ("\t" if tab else "") + " " * rank + content for (tab, rank), (_, content) in zip(indents, lines)
    )


# Private-use characters; normalise maps any in the input to U+FFFD first.
MARK_START, MARK_END, _MARK_TAB = "\ue000", "\ue001", "\ue002"
_MARK = re.compile(rf"\s*{MARK_START}({_MARK_TAB}?)(\d+){MARK_END}\s*")


def mark_indentation(text: str, protected: Sequence[tuple[int, int]]) -> str:
    """Replace the indentation of code-like lines outside a fence by a marker
    holding its nesting rank, where the text has any nesting at all.

    Lines starting inside a ``protected`` span (multi-line JSON, inline code)
    and prose lines are left alone; the rest of the text's whitespace is
    collapsed later, and :func:`render_marks` turns markers into line breaks.
    """
    if "\n" not in text:
        return text
    entries: list[tuple[int, int, str, str]] = []  # line start, indent end, indent, content
    pos = 0
    for line in text.split("\n"):
        start, pos = pos, pos + len(line) + 1
        stripped = line.lstrip(" \t")
        if not stripped.strip() or any(a < start < b for a, b in protected) or _is_prose_line(stripped):
            continue
        ws = line[: len(line) - len(stripped)]
        entries.append((start, start + len(ws), ws, stripped))
    indents = _ranks([ws for _, _, ws, _ in entries], _tabs_matter([(ws, c) for _, _, ws, c in entries]))
    if not any(rank for _, rank in indents):
        return text
    out: list[str] = []
    last, nested = 0, False
    for (start, indent_end, _, _), (tab, rank) in zip(entries, indents):
        if rank or nested:
            out.append(text[last:start])
            out.append(f" {MARK_START}{_MARK_TAB if tab else ''}{rank}{MARK_END} ")
            last = indent_end
        nested = rank > 0
    out.append(text[last:])
    return "".join(out)


def render_marks(text: str) -> str:
    """Turn indentation markers into a line break plus the nesting rank."""
    if MARK_START not in text:
        return text
    return _MARK.sub(lambda m: "\n" + ("\t" if m.group(1) else "") + " " * int(m.group(2)), text)
