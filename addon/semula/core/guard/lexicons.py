"""The language tables merged into the lookups the guard's extractors use.

Every table in :mod:`semula.core.guard.languages` is read once, at import: each word form
(stems expanded, compounds generated) maps to what it means to the guard, as
``(kind, value)`` pairs. Kinds: ``negation`` (a class such as "not" or "never"),
``number``, ``weak_number``, ``month``, ``weekday``, ``antonym`` ((group, pole)) and
``quantifier``. The tables never say which language a text is in: a word means the same
wherever it stands, and the few that collide across languages are marked weak.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from semula.core.guard.languages import TABLES, LanguageTable
from semula.core.guard.languages.table import expand

__all__ = [
    "CLITIC_PREFIXES",
    "COVERED_SCRIPTS",
    "FRAME_OPENERS",
    "FRAME_PARTNERS",
    "NEGATING_PREFIXES",
    "NEGATING_SUFFIXES",
    "NOT_NEGATORS",
    "UNSPACED_PATTERN",
    "UNSPACED_ENTRIES",
    "lookup",
    "script_of",
]

Meaning = tuple[str, object]
_WORDS: dict[str, list[Meaning]] = {}
_STEMS: dict[str, list[Meaning]] = {}  # entries that also match with a few more characters
UNSPACED_ENTRIES: dict[str, list[Meaning]] = {}
_ANTONYM_GROUP_BASE = 10_000  # group ids apart from the English lexicon's


def _fold(word: str) -> str:
    return unicodedata.normalize("NFKC", word).casefold()


def _number_value(value: float) -> str:
    return str(int(value)) if isinstance(value, int) or value.is_integer() else str(value)


def _add(table: LanguageTable, word: str, meaning: Meaning) -> None:
    key = _fold(word)
    target = UNSPACED_ENTRIES if table.unspaced else _WORDS
    bucket = target.setdefault(key, [])
    if meaning not in bucket:
        bucket.append(meaning)
    if table.stem_suffix_max and (len(key) >= 4 or not key.isascii()) and len(key) >= 2:
        stems = _STEMS.setdefault(key, [])
        if meaning not in stems:
            stems.append(meaning)


def _poles(spec: str) -> Iterable[list[str]]:
    """"a|b / c ; d / e" -> one list of poles (each a "|"-joined spelling list) per group."""
    for group in re.split(r"[;\n]", spec):
        if "/" in group:
            yield [pole.strip() for pole in group.split("/")]


def _load(table: LanguageTable, group_base: int) -> int:
    words = lambda spec: expand(spec.replace("|", " "), table.endings)  # noqa: E731
    for cls, spec in table.negators.items():
        for w in words(spec):
            _add(table, w, ("negation", cls))
    for w in words(table.not_negators):
        _add(table, w, ("not_negation", None))
    for value, spec in table.numbers.items():
        for w in words(spec):
            _add(table, w, ("number", _number_value(value)))
    for value, spec in table.weak_numbers.items():
        for w in words(spec):
            _add(table, w, ("weak_number", _number_value(value)))
    for tens, tens_spec in table.compound_tens.items():
        for unit, unit_spec in table.compound_units.items():
            for t in tens_spec.split():
                for u in unit_spec.split():
                    word = t + u if table.compound_order == "tens-first" else u + t
                    _add(table, word, ("number", str(tens + unit)))
    for value, spec in table.ordinals.items():
        for w in words(spec):
            _add(table, w, ("number", f"{value}th"))
    for value, spec in table.months.items():
        for w in words(spec):
            _add(table, w, ("month", value))
    for value, spec in table.weekdays.items():
        for w in words(spec):
            _add(table, w, ("weekday", value))
    for canonical, spec in table.quantifiers.items():
        for w in words(spec):
            _add(table, w, ("quantifier", canonical))
    for g, poles in enumerate(_poles(table.antonyms), group_base):
        for p, pole in enumerate(poles):
            for w in words(pole):
                _add(table, w, ("antonym", (g, p)))
    return group_base + len(list(_poles(table.antonyms)))


_base = _ANTONYM_GROUP_BASE
for _table in TABLES:
    _base = _load(_table, _base)

# The French "ne"/"n'" style openers, and the partners that give them their class.
FRAME_OPENERS = frozenset(_fold(w) for t in TABLES for w in t.frame_openers.split())
FRAME_PARTNERS: dict[str, str] = {
    _fold(w): cls for t in TABLES for cls, spec in t.frame_partners.items() for w in spec.split()
}
NOT_NEGATORS = frozenset(_fold(w) for t in TABLES if not t.unspaced for w in t.not_negators.split())
NEGATING_PREFIXES = frozenset(_fold(p) for t in TABLES for p in t.negating_prefixes.split())
NEGATING_SUFFIXES = tuple(
    sorted({_fold(s) for t in TABLES for s in t.negating_suffixes.split()}, key=len, reverse=True)
)
CLITIC_PREFIXES = tuple(sorted({p for t in TABLES for p in t.clitic_prefixes.split()}, key=len, reverse=True))
_STEM_MAX = max((t.stem_suffix_max for t in TABLES), default=0)
COVERED_SCRIPTS = frozenset(s for t in TABLES for s in t.scripts) | {"LATIN"}
# Longest first, so "没有" wins over "没" and "少ない" (few) over "ない".
UNSPACED_PATTERN = re.compile("|".join(re.escape(k) for k in sorted(UNSPACED_ENTRIES, key=len, reverse=True)))


@lru_cache(maxsize=65536)
def lookup(key: str) -> tuple[Meaning, ...]:
    """What a (casefolded) token means to the guard: the word itself, else without an Arabic
    clitic, else as a stem of a language that glues endings on (Turkish, Korean)."""
    return tuple(_lookup(key))


def _lookup(key: str) -> list[Meaning]:
    found = _WORDS.get(key)
    if found is not None:
        return found
    if key.isascii() and len(key) < 5:  # clitics are Arabic; ASCII stems are 4+ letters plus an ending
        return []
    for prefix in CLITIC_PREFIXES if not key.isascii() else ():
        if key.startswith(prefix) and len(key) - len(prefix) >= 2:
            found = _WORDS.get(key[len(prefix) :])
            if found is not None:
                return found
    for cut in range(1, min(_STEM_MAX, len(key) - 2) + 1):
        found = _STEMS.get(key[:-cut])
        if found is not None:
            return found
    return []


@lru_cache(maxsize=4096)
def script_of(ch: str) -> str:
    """The Unicode script of a letter, from the first word of its name (LATIN, CJK, HANGUL, ...)."""
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "UNKNOWN"
    first = name.split()[0]
    return "CJK" if first in ("CJK", "IDEOGRAPHIC") else first
