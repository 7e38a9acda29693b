"""How the guard reads a text: tokens, their letter case, and where sentences start.

Split from the guard's checks so that each stays small: this module knows
nothing of dates, numbers or names, only how a text becomes the tokens that
:mod:`semula.core.guard.features` finds values in and
:mod:`semula.core.guard.diff` compares.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from semula.core.guard.words import SYMBOL_TOKENS, UNITS_EXACT
from semula.core.text import UNSPACED_CHAR, UNSPACED_RANGES

__all__ = ["Analysis", "Feature", "core_words", "covered", "prepare", "token_span", "tokenised"]

_PRE = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′‵´ʼ", "'"),
        **dict.fromkeys("“”„‟″‶«»", '"'),
        **dict.fromkeys("‐‑‒–—―−", "-"),
        **dict.fromkeys("\u200b\u2060\ufeff\u00ad", None),
    }
)
# Scripts written without spaces (and Thai): one token per character.
_RAW_TOKEN = re.compile(rf"[{UNSPACED_RANGES}]|[^\s{UNSPACED_RANGES}]+")
_LEAD_STRIP = "\"'([{<`*~>¿¡"
_TRAIL_STRIP = ".,;:!?()]}>\"'`*~…؟،。、"
# Tokens whose letter case can carry meaning: identifiers, paths, flags, file
# names, camelCase, letter+digit mixes, printf codes and the bit/byte units.
_CODE_LIKE = re.compile(
    r"[_/\\=<>{}\[\]@#|^&()`]|\$[A-Za-z_{]|^-{1,2}[^\W\d]|^\.[^\W\d]|[^\W\d_][.:]+\w|\w[.:]+[^\W\d_]"
    r"|[a-z][A-Z]|[A-Z]{2,}[a-z]|[^\W\d_]\d|%[A-Za-z]|^[kKMGTP]i?[bB](?:ps|/s)?$"
)
_BYTE_UNITS = frozenset(u for u in UNITS_EXACT if re.fullmatch(r"[kKMGTP]i?[bB]", u))
_SENTENCE_END_CHARS = frozenset(".!?:;")
_CLOSERS = "'\")]"
_ALNUM = re.compile(r"[^\W_]")
_OPENERS = "\"'(`[*-•#>"
_LETTERS = re.compile(r"[^\W\d_]+")
_DIGIT_CHAR = re.compile(r"\d")


class Feature(NamedTuple):
    """A value found in a text: where (token indexes), what, and as written.

    A named tuple rather than a frozen dataclass: texts hold dozens, made on
    every call, and the guard has a budget of a fraction of a millisecond."""

    start: int
    end: int
    value: Hashable
    text: str


@dataclass(frozen=True)
class Analysis:
    """One text split into tokens, with every feature the checks compare."""

    text: str
    cores: tuple[str, ...]  # tokens without surrounding punctuation, case kept
    keys: tuple[str, ...]  # what the diff compares: casefolded unless code-like
    code: tuple[bool, ...]
    initial: tuple[bool, ...]  # starts a sentence, a line, a quote or a bullet
    starts: tuple[int, ...]  # character offsets, to map dates and quotes to tokens
    digit_tokens: frozenset[int] = frozenset()
    features: dict[str, tuple[Feature, ...]] = field(default_factory=dict)


def prepare(text: str) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text).translate(_PRE)
    return text


def _code_like(core: str) -> bool:
    if core.isalpha():  # the common case, without a regex: only mixed case can be code
        if core.islower() or (core.istitle() and core not in _BYTE_UNITS):
            return False
        if core.isupper():
            return core in _BYTE_UNITS
    return bool(_CODE_LIKE.search(core))


def _raw_tokens(text: str) -> Iterable[tuple[int, str]]:
    """(offset, token) for whitespace-separated tokens; CJK and Thai characters one each."""
    if not text.isascii() and UNSPACED_CHAR.search(text):
        for m in _RAW_TOKEN.finditer(text):
            yield m.start(), m.group()
        return
    pos = 0
    for raw in text.split():
        pos = text.find(raw, pos)
        yield pos, raw
        pos += len(raw)


def _tokenise(text: str) -> tuple[list[str], list[int], list[bool]]:
    cores: list[str] = []
    starts: list[int] = []
    initial: list[bool] = []
    prev_end, sentence_ended = 0, True
    for start, raw in _raw_tokens(text):
        led = raw.lstrip(_LEAD_STRIP)
        core = led.rstrip(_TRAIL_STRIP)
        if core[:1] == "-" and not (len(core) > 1 and (core[1].isalnum() or core[1] == "-")):
            core = core.lstrip("-")
        if not core or not (core.isalnum() or _ALNUM.search(core) or core in SYMBOL_TOKENS):
            continue
        initial.append(sentence_ended or raw[0] in _OPENERS or text.find("\n", prev_end, start) >= 0)
        cores.append(core)
        starts.append(start + len(raw) - len(led))
        prev_end = start + len(raw)
        sentence_ended = raw.rstrip(_CLOSERS)[-1:] in _SENTENCE_END_CHARS
    return cores, starts, initial


def tokenised(text: str) -> Analysis:
    """The tokens of an already prepared text, with no features found yet."""
    cores, starts, initial = _tokenise(text)
    code = [_code_like(c) for c in cores]
    keys = [c if is_code else c.casefold() for c, is_code in zip(cores, code)]
    digit_tokens = frozenset(token_span(starts, m.start(), m.start() + 1)[0] for m in _DIGIT_CHAR.finditer(text))
    return Analysis(text, tuple(cores), tuple(keys), tuple(code), tuple(initial), tuple(starts), digit_tokens)


def token_span(starts: Sequence[int], start_char: int, end_char: int) -> tuple[int, int]:
    """Token indexes covering the characters [start_char, end_char)."""
    first = max(bisect.bisect_right(starts, start_char) - 1, 0)
    last = bisect.bisect_left(starts, end_char)
    return first, max(last, first + 1)


def core_words(core: str) -> list[str]:
    """The casefolded letter runs of a token ("snake_case" -> snake, case)."""
    if core.isalpha():
        return [core.casefold()]
    return [w.casefold() for w in _LETTERS.findall(core)]


def covered(a: Analysis, kinds: Iterable[str]) -> set[int]:
    """Token indexes inside a feature of one of ``kinds`` (so a later extractor skips them)."""
    return {i for kind in kinds for f in a.features.get(kind, ()) for i in range(f.start, f.end)}
