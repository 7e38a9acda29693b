"""Small text helpers that matching, explaining and reviewing all need.

They were written several times over (a shortener in the cache, the review
queue and the miss explanation; Dice and the common-prefix search in the
near-match and the guard; the CJK character class in three places). One home
keeps the copies from drifting apart. Pure: strings in, values out.
"""

from __future__ import annotations

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


def shorten(text: str, width: int = 60) -> str:
    """``text`` on one line (whitespace runs become one space), cut to at most
    ``width`` characters, the last of them "…" when anything was cut."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def overlap(a: Counter[str], b: Counter[str]) -> int:
    """How many words two multisets share, counting repeats (|A∩B|)."""
    return sum((a & b).values())


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
