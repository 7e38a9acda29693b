"""The shape of one language's guard table, and how its compact spellings expand.

A language is data only: the words that negate, count, name a month or a weekday,
oppose each other or quantify. The guard's code (:mod:`semula.core.guard.lexicons`)
merges every table into one set of lookups, so adding a language is one module here
plus one line in ``languages/__init__.py``.

Spelling conventions, shared by every field that holds words:

- words are separated by spaces; ``|`` joins spellings of one pole of an opposition;
- a word ending in ``+`` is a stem: it expands with each of the table's ``endings``
  (Russian ``перв+`` -> первый, первая, первого, ...; over-generation is harmless,
  the forms are only ever compared with each other).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["LanguageTable", "expand"]


@dataclass(frozen=True)
class LanguageTable:
    """Everything the guard knows about one language. Every field is optional."""

    code: str
    name: str
    scripts: tuple[str, ...] = ("LATIN",)  # Unicode script names (first word of a character's name)
    # Negation: class -> words. Classes are compared, so "not" and "never" differ while
    # "nicht" and "not" agree. Classes: not, never, nothing, nobody, nowhere, without,
    # no-longer, neither, only (French ne ... que), except.
    negators: Mapping[str, str] = field(default_factory=dict)
    # Discontinuous negation: an opener (French "ne", "n'") that takes its class from a
    # partner a few words later ("ne ... pas", "ne ... jamais"); alone, it is "not".
    # Words that contain or look like a negator but do not negate (French "n'importe" = any,
    # Chinese 不过 = but, Japanese 少ない = few): matched first, so the negator inside is skipped.
    not_negators: str = ""
    frame_openers: str = ""
    frame_partners: Mapping[str, str] = field(default_factory=dict)  # class -> partner words
    # Affixes that negate the word they join: "un"+"happy"; Turkish "gel"+"me"+"di".
    negating_prefixes: str = ""
    negating_suffixes: str = ""
    # Numbers: value -> words. ``weak_numbers`` are also articles or common words
    # ("un", "ein", "bir", "on"): they count only when the other side changed a number too.
    numbers: Mapping[float, str] = field(default_factory=dict)  # 2.5: "zweieinhalb"
    # Numbers written as one word from a ten and a unit: German "einundzwanzig" (unit first,
    # the unit forms carry the joiner "und"), Italian "ventuno" (tens first).
    compound_tens: Mapping[int, str] = field(default_factory=dict)
    compound_units: Mapping[int, str] = field(default_factory=dict)
    compound_order: str = "tens-first"  # or "unit-first"
    weak_numbers: Mapping[float, str] = field(default_factory=dict)
    ordinals: Mapping[int, str] = field(default_factory=dict)
    months: Mapping[int, str] = field(default_factory=dict)
    weekdays: Mapping[int, str] = field(default_factory=dict)  # 1 = Monday
    # Opposites "a|a2 / b; c / d" (groups split by ";" or a newline) and comparatives.
    antonyms: str = ""
    # Quantifiers: canonical English value -> words ("alle" -> all).
    quantifiers: Mapping[str, str] = field(default_factory=dict)
    endings: str = ""  # what a "+" stem expands with
    # Words glued to particles or case endings (Turkish "ocakta", Korean "월요일에"):
    # an entry of at least 4 letters (any length outside Latin) also matches a token that
    # starts with it and has at most this many more characters.
    stem_suffix_max: int = 0
    clitic_prefixes: str = ""  # Arabic و ف ب ل ال ...: stripped before a lookup
    unspaced: bool = False  # written without spaces (Chinese, Japanese): entries are substrings


def expand(words: str, endings: str) -> list[str]:
    """The spellings of a word list, with every ``stem+`` expanded by ``endings``."""
    out: list[str] = []
    suffixes = endings.split() or [""]
    for word in words.split():
        if word.endswith("+") and len(word) > 1:
            out.extend(word[:-1] + e for e in ["", *suffixes])
        else:
            out.append(word)
    return out
