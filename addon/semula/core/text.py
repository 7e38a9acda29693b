"""Small text helpers that matching, explaining and reviewing all need.

They were written several times over (a shortener in the cache, the review
queue and the miss explanation; Dice and the common-prefix search in the
near-match and the guard; the CJK character class in three places). One home
keeps the copies from drifting apart. Pure: strings in, values out.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence

__all__ = [
    "CJK_CHAR",
    "CJK_RANGES",
    "THAI_RANGE",
    "UNSPACED_CHAR",
    "UNSPACED_RANGES",
    "common_prefix",
    "common_suffix",
    "dice",
    "dice_counts",
    "overlap",
    "shorten",
    "symbol_runs",
    "similarity",
    "symbol_tokens",
    "word_diff",
]

# Character classes (the inside of a regex ``[...]``) for scripts written
# without spaces between words, where a word count must count characters.
#
# The copies disagreed: normalise and nearmatch had kana + Han only, the guard
# also had Thai. UNSPACED_RANGES is the union (the guard's, the most complete)
# and is the one to use for tokenising. The lexical words (normalise.words)
# deliberately keep the kana + Han subset: splitting Thai there too would change
# every Thai prompt's lexical score, and so what recorded projects serve.
# Hangul is written with spaces, so it is in neither.
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"  # kana, Han
THAI_RANGE = "\u0e00-\u0e7f"
UNSPACED_RANGES = CJK_RANGES + THAI_RANGE

CJK_CHAR = re.compile(f"[{CJK_RANGES}]")
UNSPACED_CHAR = re.compile(f"[{UNSPACED_RANGES}]")


# Symbols: each run of characters that are neither word characters nor space is
# a token ("==", "->", "(", "€", "😀"), so operators, brackets, arrows, set and
# math signs, currencies and emoji count. Plain sentence punctuation does not:
# quotes and ``¿¡`` opening a run, quotes closing it, and ``.,;:!?…`` ending a
# run before a space, the end or a non-ASCII letter ("Hello, world." has no
# symbols; "a,b", "x?.y" and "!done" keep theirs).
_SYMBOL_RUN = re.compile(r"[^\w\s]+")
_OPENING_PUNCT = "\"'`¿¡«‹“‘„"
_CLOSING_PUNCT = "\"'`»›”’"
_SENTENCE_PUNCT = ".,;:!?…。、，！？：；" + _CLOSING_PUNCT
_INVISIBLE = str.maketrans(dict.fromkeys("\ufe0e\ufe0f\u200b\u2060\ufeff\u00ad", " "))  # keeps offsets
_DASHES = str.maketrans(dict.fromkeys("‐‑‒–—―−", "-"))


def symbol_runs(text: str) -> list[tuple[int, str]]:
    """(offset, symbol) for each symbol run of ``text``, in order (see above)."""
    out: list[tuple[int, str]] = []
    if text.isascii():
        if not any(not c.isalnum() and not c.isspace() and c != "_" for c in text):
            return out
    else:
        text = text.translate(_INVISIBLE).translate(_DASHES)
    for m in _SYMBOL_RUN.finditer(text):
        run, end = m.group(), m.end()
        nxt = text[end : end + 1]
        if len(run) == 1 and run in ".,'-/:" and nxt.isdigit() and text[m.start() - 1 : m.start()].isdigit():
            continue  # inside a number, date or time (1,000.50, 2024-01-05, 9:30): the guard compares those
        if run == "-" and nxt.isalpha() and text[m.start() - 1 : m.start()].isalpha():
            continue  # a hyphen joining words (twenty-five, well-known): "a-b" against "a+b" still differs
        if not nxt or nxt.isspace() or not nxt.isascii():
            run = run.rstrip(_SENTENCE_PUNCT)
        else:
            run = run.rstrip(_CLOSING_PUNCT)
        start = len(run) - len(run.lstrip(_OPENING_PUNCT))
        if run[start:]:
            out.append((m.start() + start, run[start:]))
    return out


def symbol_tokens(text: str) -> list[str]:
    """The symbols of ``text`` in order ("if (a != b)" -> ["(", "!=", ")"])."""
    return [run for _, run in symbol_runs(text)]


def shorten(text: str, width: int = 60) -> str:
    """``text`` on one line (whitespace runs become one space), cut to at most
    ``width`` characters, the last of them "…" when anything was cut."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def overlap(a: Counter[str], b: Counter[str]) -> int:
    """How many words two multisets share, counting repeats (|A∩B|): the smaller one walked, without
    building `a & b` (twice as fast; the fresh-entry scan runs it once per fresh recording and miss)."""
    if len(a) > len(b):
        a, b = b, a
    return sum(n if n <= (m := b[w]) else m for w, n in a.items() if w in b)


def dice_counts(a: Counter[str], a_total: int, b: Counter[str], b_total: int) -> float:
    """:func:`dice` for word multisets already counted (callers cache the Counters)."""
    if not a_total or not b_total:
        return 0.0
    return 2.0 * overlap(a, b) / (a_total + b_total)


def dice(a: Sequence[str], b: Sequence[str]) -> float:
    """Sørensen-Dice over word multisets: 2·|A∩B| / (|A|+|B|).

    Multisets, not sets: with sets "open on weekdays, closed on weekends" and
    its swap would score 1.0. An empty side scores 0: two empty texts are not
    evidence of sameness."""
    if not a or not b:
        return 0.0
    return dice_counts(Counter(a), len(a), Counter(b), len(b))


def common_prefix(a: str, b: str) -> int:
    """Length of the longest shared prefix of two strings."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # a binary search, because slice comparison runs at memcmp speed on long texts
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int | None = None) -> int:
    """Length of the longest shared suffix, at most ``limit`` (default: the shorter length).

    Pass ``min(len(a), len(b)) - common_prefix(a, b)`` as the limit so the
    prefix and the suffix never overlap."""
    lo, hi = 0, min(len(a), len(b)) if limit is None else limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo


MAX_DIFF_LINES = 12  # a word diff's changed runs shown, then "…"


def similarity(old: str, new: str) -> float:
    """0..1: how much of two texts is alike, character by character (1.0: equal)."""
    if old == new:
        return 1.0
    return round(difflib.SequenceMatcher(None, old, new, autojunk=False).ratio(), 3)


def word_diff(old: str, new: str, limit: int = MAX_DIFF_LINES) -> tuple[str, ...]:
    """A short word-level diff of two texts (drift's answers, a recordings diff's): each changed run as
    `-old words` and `+new words`."""
    a, b = old.split(), new.split()
    lines: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            lines.append("-" + " ".join(a[i1:i2])[:200])
        if op in ("replace", "insert"):
            lines.append("+" + " ".join(b[j1:j2])[:200])
    return tuple(lines[:limit]) + (("…",) if len(lines) > limit else ())
