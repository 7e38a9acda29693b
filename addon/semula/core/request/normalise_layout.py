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
from collections.abc import Iterator, Sequence

__all__ = [
    "MARK_END",
    "MARK_START",
    "QUOTED",
    "canonical_json_text",
    "code_lines",
    "drop_quoted",
    "json_spans",
    "mark_indentation",
    "quoted_spans",
    "render_marks",
    "try_json",
]

# ---------------------------------------------------------------- JSON


class _Object(list[tuple[str, object]]):
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


# A "{" or "[" where a JSON object or array can start: what follows its whitespace can begin
# its first key or value (or close it). Every other "{" or "[" fails to decode anyway, and
# skipping it here spares a text of many (" {{{{...") a decode attempt per character.
_JSON_START = re.compile(r"\{(?=[ \t\n\r]*[\"}])|\[(?=[ \t\n\r]*[\]\[{\"0-9tfnNI-])")

# Decoding is tried on a window of the text, never on all of it: a failed decode's
# JSONDecodeError counts the lines before the failure from the start of what it was given,
# which over a whole text made each failure cost its position. A window grows (doubling) only
# while the decode could have failed for want of text: the error lies within _WINDOW_MARGIN
# characters of the window's end (the scanner looks at most 12 characters ahead, for
# "-Infinity" or a surrogate pair) or a string runs off the end. Otherwise the failure is
# the same as on the whole text, and a success on a window is the same value and end.
_FIRST_WINDOW = 256
_WINDOW_MARGIN = 16
# The scanning a search may cost: JSON_WORK_PER_CHAR per character of the text plus
# JSON_WORK_BASE, a decode attempt costing the characters it scanned plus _ATTEMPT_WORK (its
# fixed cost, in characters' worth). Real prompts stay far below it: a valid span is scanned
# about twice, a failed start as far as its error. Text built to make every "{" or "[" scan far
# ("[[[[...", '{"a":{"a":...', "[1 x[1 x...") spends it, and then no further JSON spans are
# sought: the rest of the text is prose. Deterministic: it depends only on the text.
JSON_WORK_PER_CHAR = 8
JSON_WORK_BASE = 1 << 20
_ATTEMPT_WORK = 32


def _decode_at(text: str, pos: int, end: int) -> tuple[object, int, int]:
    """``(value, stop, work)`` of the JSON value starting at ``pos`` (value None if there is
    none ending by ``end``); ``work`` counts the characters scanned."""
    size, work = _FIRST_WINDOW, _ATTEMPT_WORK
    while True:
        limit = min(pos + size, end)
        window = text[pos:limit]
        try:
            value, stop = _DECODER.raw_decode(window)
            return value, pos + stop, work + stop
        except RecursionError:
            return None, pos, work + len(window)  # as deep within the window as on the whole text
        except json.JSONDecodeError as e:
            cut_short = e.pos >= len(window) - _WINDOW_MARGIN or e.msg.startswith("Unterminated string")
            if limit >= end or not cut_short:
                return None, pos, work + (len(window) if cut_short else e.pos + 1)
        except ValueError:
            return None, pos, work + len(window)
        work += len(window)
        size *= 2


def json_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, canonical)`` of each JSON object/array inside ``text[start:end]``."""
    end = len(text) if end is None else end
    budget = JSON_WORK_PER_CHAR * max(end - start, 0) + JSON_WORK_BASE
    spans: list[tuple[int, int, str]] = []
    search_from = start
    while budget > 0:
        m = _JSON_START.search(text, search_from, end)
        if m is None:
            return spans
        value, stop, work = _decode_at(text, m.start(), end)
        budget -= work
        if not isinstance(value, list):
            search_from = m.start() + 1
            continue
        try:
            canonical = canonical_json_text(value)
        except RecursionError:  # nested deeper than canonical_json_text recurses
            search_from = m.start() + 1
            continue
        spans.append((m.start(), stop, canonical))
        search_from = stop
    return spans


# ---------------------------------------------------------------- quotes

# A quoted string: the opening quote follows a space or bracket and the
# closing one precedes a space or punctuation, so apostrophes (it's, the
# drivers' cars) and inch marks (5' 11") do not open one; a double-quoted
# string may end in spaces ("Note:  "). It stops at a
# paragraph break. Its case and whitespace are kept.
_DOUBLE_PATTERN = r"""(?<![^\s(\[{:,;=/])"(?=[^\s"])(?:[^"\n]|\n(?![ \t]*\n))*?"(?!\w)"""
QUOTED = re.compile(
    _DOUBLE_PATTERN + r"""|(?<![^\s(\[{:,;=/])'(?=[^\s'])(?:[^'\n]|'(?=\w)|\n(?![ \t]*\n))*?(?<=[^\s'])'(?!\w)"""
)
# QUOTED's two kinds apart. Its single-quoted kind may hold quotes that a word character
# follows, so through QUOTED every opening quote of a paragraph like " 'a 'a 'a..." scans to
# the paragraph's end: quadratic. quoted_spans finds the same matches in linear time.
_DOUBLE_QUOTED = re.compile(_DOUBLE_PATTERN)
_SINGLE_OPEN = re.compile(r"(?<![^\s(\[{:,;=/])'(?=[^\s'])")
# Where a single-quoted string that opened before ends or fails: the first quote no word
# character follows (it closes the string if the character before it is no space or quote),
# or a paragraph break.
_SINGLE_STOP = re.compile(r"'(?!\w)|\n(?=[ \t]*\n)")
_SINGLE_CLOSE = re.compile(r"(?<=[^\s'])'")


class _SingleQuoted:
    """The single-quoted strings of a text, in order; each stop is searched for once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.scanned_from = self.stop = -1  # no stop in [scanned_from, stop); one at stop

    def first_from(self, pos: int) -> tuple[int, int] | None:
        text = self.text
        while (m := _SINGLE_OPEN.search(text, pos)) is not None:
            opened = m.start()
            if not self.scanned_from <= opened + 1 <= self.stop:
                found = _SINGLE_STOP.search(text, opened + 1)
                self.scanned_from, self.stop = opened + 1, found.start() if found else len(text)
            if self.stop < len(text) and _SINGLE_CLOSE.match(text, self.stop):
                return opened, self.stop + 1
            if self.stop >= len(text):
                return None
            pos = self.stop  # every opening quote before the stop fails at it too
        return None


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """The spans of ``QUOTED.finditer(text)``, found in time linear in the text."""
    if "'" not in text:
        return [m.span() for m in _DOUBLE_QUOTED.finditer(text)]
    single = _SingleQuoted(text)
    spans: list[tuple[int, int]] = []
    pos = 0
    double: tuple[int, int] | None = None
    single_next: tuple[int, int] | None = None
    double_done = single_done = False
    while True:
        if not double_done and (double is None or double[0] < pos):
            m = _DOUBLE_QUOTED.search(text, pos)
            double, double_done = (m.span(), False) if m else (None, True)
        if not single_done and (single_next is None or single_next[0] < pos):
            single_next = single.first_from(pos)
            single_done = single_next is None
        found = min((s for s in (double, single_next) if s is not None), default=None)
        if found is None:
            return spans
        spans.append(found)
        pos = found[1]


def drop_quoted(text: str, by: str) -> str:
    """``QUOTED.sub(by, text)``, in linear time."""
    out: list[str] = []
    pos = 0
    for start, end in quoted_spans(text):
        out.append(text[pos:start])
        out.append(by)
        pos = end
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------- indentation

# A prose line: starts with a capital (or a caseless letter, as in CJK), holds
# only plain words and numbers, and no "key: value" colon before its end.
_PROSE_TOKEN = re.compile(
    r"""["'(\[]*(?:[^\W\d_]+(?:['-][^\W\d_]+)*|\d+(?:[.,]\d+)*%?)["')\]]*[,.;:!?]*"""
)
# A Makefile rule line ("all: build", "%.o: %.c"); its recipe lines need tabs.
_MAKE_RULE = re.compile(r"[\w.%/$(){}-]+(?:[ \t]+[\w.%/$(){}-]+)*[ \t]*::?(?!=)(?:[ \t]|$)")
_TAB_WIDTH = 4


def _is_prose_line(content: str, lead_in: bool = False) -> bool:
    """Whether a line is a sentence, whose indentation says nothing. It starts with a capital; or,
    as a ``lead_in`` (unindented, the text's first line or ending in ``.?!``), with any letter, so
    that "what does this print?" over an indented block is prose as "What does this print?" is."""
    first = content[0]
    if lead_in and first.isalpha():
        first = first.upper()
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


# A Markdown list item: a bullet or a number, then a space ("- a", "* a", "+ a", "1. a", "2) a").
_LIST_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])[ \t]+\S")


def _list_ranks(entries: Sequence[tuple[int, int, str, str]], blocks: Sequence[int],
                ranks: list[tuple[bool, int]]) -> list[tuple[bool, int]]:
    """`ranks` with each Markdown list block ranked on its own: a list re-indented as a whole under an
    unindented lead-in ("Steps:" then "- a" or "  - a") is the same list.

    A block starts at a list item whose previous non-blank line is not indented, and holds the
    lines after it indented at least as deep (its nested items and their continuation lines, whose
    nesting among themselves still counts). Anywhere else, as under an indented YAML key
    ("  b:" then "  - x"), a list item's indentation counts as any line's does."""
    if all(b < 0 for b in blocks):
        return ranks
    outside = [ws for (_, _, ws, _), b in zip(entries, blocks) if b < 0]
    lines = [(ws, c) for (_, _, ws, c), b in zip(entries, blocks) if b < 0]
    out = iter(_ranks(outside, _tabs_matter(lines)))
    ranked: dict[int, Iterator[tuple[bool, int]]] = {}
    for block in set(blocks) - {-1}:
        members = [(ws, c) for (_, _, ws, c), b in zip(entries, blocks) if b == block]
        ranked[block] = iter(_ranks([ws for ws, _ in members], _tabs_matter(members)))
    return [next(out) if b < 0 else next(ranked[b]) for b in blocks]


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
# A marker and the whitespace after it; the whitespace before it is stripped apart, as a
# leading \s* would rescan a long run of spaces (kept in quotes or code) from each of its
# positions.
_MARK = re.compile(rf"{MARK_START}({_MARK_TAB}?)(\d+){MARK_END}\s*")


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
    blocks: list[int] = []  # per entry: the Markdown list block it belongs to (-1: none)
    # A line start is protected when a span opens before it and closes after it: the spans
    # sorted by opening, swept once as the line starts grow (not each span for each line).
    by_opening = sorted(protected)
    opened, reach = 0, -1  # the spans opened before this line start, and their furthest close
    pos = 0
    block, block_width, before = -1, 0, 0  # the open list block, its items' indent, the last line's indent
    first_line = True
    for line in text.split("\n"):
        start, pos = pos, pos + len(line) + 1
        while opened < len(by_opening) and by_opening[opened][0] < start:
            reach = max(reach, by_opening[opened][1])
            opened += 1
        stripped = line.lstrip(" \t")
        if not stripped.strip():
            continue
        ws = line[: len(line) - len(stripped)]
        width = len(ws.expandtabs(_TAB_WIDTH))
        if block >= 0 and width < block_width:
            block = -1
        if block < 0 and before == 0 and start >= reach and _LIST_ITEM.match(stripped):
            block, block_width = start, width
        lead_in = width == 0 and (first_line or stripped.rstrip()[-1] in ".?!")
        before, first_line = width, False
        if start < reach or _is_prose_line(stripped, lead_in):
            continue
        entries.append((start, start + len(ws), ws, stripped))
        blocks.append(block)
    indents = _list_ranks(entries, blocks,
                          _ranks([ws for _, _, ws, _ in entries], _tabs_matter([(ws, c) for _, _, ws, c in entries])))
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
    out: list[str] = []
    pos = 0
    for m in _MARK.finditer(text):
        out.append(text[pos : m.start()].rstrip())  # str.rstrip strips what \s matches
        out.append("\n" + ("\t" if m.group(1) else "") + " " * int(m.group(2)))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)
