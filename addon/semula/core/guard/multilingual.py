"""The guard's features from the language tables: negations, numbers, months, weekdays,
opposites and quantifiers in every language :mod:`semula.core.guard.languages` holds.

Spaced languages are looked up token by token (:func:`semula.core.guard.lexicons.lookup`
strips Arabic clitics and Turkish or Korean endings). Chinese and Japanese are written
without spaces and the guard's tokeniser makes one token per character, so their entries
are found as substrings of the text and mapped back to the tokens they cover.
"""

from __future__ import annotations

from typing import Any, cast

from semula.core.guard.lexicons import (
    FRAME_OPENERS,
    FRAME_PARTNERS,
    NOT_NEGATORS,
    UNSPACED_ENTRIES,
    UNSPACED_PATTERN,
    lookup,
)
from semula.core.guard.tokens import Analysis, Feature, covered, token_span
from semula.core.guard.words import NEGATORS, WEEKDAYS
from semula.core.text import UNSPACED_CHAR

__all__ = ["meanings", "negations", "table_features"]

# How far a French "ne" looks for its "pas", "jamais", "plus", "que", ...
_FRAME_REACH = 6
_ENGLISH_CLASSES = {"never": "never", "without": "without", "w/o": "without", "neither": "neither", "nor": "neither"}


def meanings(a: Analysis) -> list[Feature]:
    """Every table word in the text, as Feature(value=(kind, value)); one token may mean several."""
    out: list[Feature] = []
    for i, key in enumerate(a.keys):
        if a.code[i] or key in NOT_NEGATORS:
            continue
        for meaning in lookup(key):
            out.append(Feature(i, i + 1, meaning, a.cores[i]))
    if not a.text.isascii() and UNSPACED_CHAR.search(a.text):
        for m in UNSPACED_PATTERN.finditer(a.text):
            first, last = token_span(a.starts, m.start(), m.end())
            for meaning in UNSPACED_ENTRIES[m.group()]:
                if meaning[0] != "not_negation":
                    out.append(Feature(first, last, meaning, m.group()))
    return out


def _opener(key: str) -> bool:
    if key in FRAME_OPENERS:
        return True
    head, apostrophe, rest = key.partition("'")
    return bool(apostrophe and rest) and head + "'" in FRAME_OPENERS and key not in NOT_NEGATORS


def negations(a: Analysis) -> list[Feature]:
    """Negators with their class ("not", "never", "without", ...). A frame ("ne ... pas")
    is one negation spanning both words; an opener alone is "not"."""
    out: list[Feature] = []
    consumed: set[int] = set()
    for f in a.features["meaning"]:
        if f.value[0] == "negation" and not consumed.intersection(range(f.start, f.end)):  # type: ignore[index]
            out.append(Feature(f.start, f.end, f.value[1], f.text))  # type: ignore[index]
            consumed.update(range(f.start, f.end))
    for i, key in enumerate(a.keys):
        if _opener(key) and i not in consumed:
            for j in range(i + 1, min(i + 1 + _FRAME_REACH, len(a.keys))):
                cls = FRAME_PARTNERS.get(a.keys[j])
                if cls is not None:
                    out = [f for f in out if f.start != j]  # "pas" joins its "ne"
                    out.append(Feature(i, j + 1, cls, f"{a.cores[i]} … {a.cores[j]}"))
                    consumed.update((i, j))
                    break
            else:
                out.append(Feature(i, i + 1, "not", a.cores[i]))
                consumed.add(i)
        elif i not in consumed and (key in NEGATORS or key.endswith("n't") or key.startswith("non-")):
            out.append(Feature(i, i + 1, _ENGLISH_CLASSES.get(key, "not"), a.cores[i]))
    out.sort(key=lambda f: f.start)
    return out


def table_features(a: Analysis, kind: str, skip_kinds: tuple[str, ...] = ()) -> list[Feature]:
    """The table words of one kind, as features, outside tokens that ``skip_kinds`` cover
    (the English extractors' numbers and dates, which know more context)."""
    skip = covered(a, skip_kinds) if skip_kinds else set()
    if kind in ("month", "weekday"):  # Italian "mai" (never) is French and German "mai" (May)
        skip |= {f.start for f in a.features["meaning"] if f.value[0] == "negation"}  # type: ignore[index]
    out: list[Feature] = []
    for f in a.features["meaning"]:
        what, value = cast("tuple[str, Any]", f.value)  # a "meaning" feature is (kind, value): `lexicons._add`
        if what != kind or f.start in skip:
            continue
        if kind == "month":
            value = ("month", value)
        elif kind == "weekday":
            value = ("weekday", WEEKDAYS[int(value) - 1])  # the English extractor's spelling
        out.append(Feature(f.start, f.end, value, f.text))
    return out
