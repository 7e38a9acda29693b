"""The hard guard: refuse a near-match whose changed words carry the answer.

A word-overlap or embedding score cannot tell "120 rooms" from "220 rooms",
"open on weekdays" from "open on weekends", or ``-s`` from ``-S``: the
sentence is the same, the answer is not. So every near-match (lexical now,
embedding later) must also pass this guard, whatever its score.

The guard diffs the two texts word by word (prose compared case-insensitively;
code, flags and identifiers case-sensitively) and looks only at what changed.
Each check is a small named function over that diff returning ``None`` or a
reason such as ``"number 120≠220"``; :func:`guard` returns the first reason.
Spelled-out and digit numbers compare by value ("five ideas" = "5 ideas").

It errs towards refusing: a refusal sends the candidate to review, where a
person decides; a wrong serve breaks a test in a confusing way. Words in
scripts without letter case (CJK, Arabic, ...) cannot be told apart from
names, so any change in them refuses. The word lists are English only.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from difflib import SequenceMatcher
from functools import cached_property, lru_cache
from typing import NamedTuple

from semula.core.guard_words import (
    ALTERNATIVE_LEXICON,
    AMBIGUOUS_MONTHS,
    ANTONYM_LEXICON,
    MONTHS,
    NEGATING_PREFIXES,
    NEGATORS,
    NEVER_NAMES,
    NUMBER_SCALES,
    NUMBER_WORDS,
    ONE_AS_PRONOUN_AFTER,
    PREFIX_SWAPS,
    SENTENCE_STARTERS,
    SYMBOL_TOKENS,
    UNITS,
    UNITS_AFTER_NUMBER,
    UNITS_EXACT,
    WEAK_UNIT_WORDS,
    WEEKDAYS,
    YEAR_WORDS,
    _NUMBERISH,
    _UNIT_SPELLINGS,
)

__all__ = [
    "GUARD_CHECKS",
    "MAX_CHANGED_TOKENS",
    "Feature",
    "TextDiff",
    "alternatives_differ",
    "antonyms_differ",
    "dates_differ",
    "entities_differ",
    "guard",
    "identifiers_differ",
    "negation_differs",
    "numbers_differ",
    "quoted_differ",
    "text_diff",
    "units_differ",
]

# Beyond this many changed words per side the diff is not analysed (the guard
# refuses): no near-match is that far apart, and the guard must stay fast.
MAX_CHANGED_TOKENS = 4000
# Longer texts are cut to their differing middle plus context before
# tokenising, so a 1 MB prompt with one changed word costs little.
# The margin must exceed the longest feature (a quote: 150 characters) so that
# every feature touching a change lies wholly inside the window.
_TRIM_MARGIN_CHARS = 160
_TRIM_ABOVE_CHARS = 4 * _TRIM_MARGIN_CHARS

_PRE = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′‵´ʼ", "'"),
        **dict.fromkeys("“”„‟″‶«»", '"'),
        **dict.fromkeys("‐‑‒–—―−", "-"),
        **dict.fromkeys("\u200b\u2060\ufeff\u00ad", None),
    }
)
# Scripts written without spaces (and Thai): one token per character.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f\U00020000-\U0002fa1f"
_RAW_TOKEN = re.compile(rf"[{_UNSPACED}]|[^\s{_UNSPACED}]+")
_UNSPACED_CHAR = re.compile(rf"[{_UNSPACED}]")
_LEAD_STRIP = "\"'([{<`*~>"
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


def _prepare(text: str) -> str:
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
    if not text.isascii() and _UNSPACED_CHAR.search(text):
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


@lru_cache(maxsize=1024)
def analyse(text: str) -> Analysis:
    """Tokens and features of an already prepared text (cached: stored texts repeat)."""
    cores, starts, initial = _tokenise(text)
    code = [_code_like(c) for c in cores]
    keys = [c if is_code else c.casefold() for c, is_code in zip(cores, code)]
    digit_tokens = frozenset(_token_span(starts, m.start(), m.start() + 1)[0] for m in _DIGIT_CHAR.finditer(text))
    a = Analysis(text, tuple(cores), tuple(keys), tuple(code), tuple(initial), tuple(starts), digit_tokens)
    for kind, extract in _EXTRACTORS:  # later extractors read earlier features
        a.features[kind] = tuple(extract(a))
    return a


def _token_span(starts: Sequence[int], start_char: int, end_char: int) -> tuple[int, int]:
    """Token indexes covering the characters [start_char, end_char)."""
    first = max(bisect.bisect_right(starts, start_char) - 1, 0)
    last = bisect.bisect_left(starts, end_char)
    return first, max(last, first + 1)


def _words(core: str) -> list[str]:
    if core.isalpha():
        return [core.casefold()]
    return [w.casefold() for w in _LETTERS.findall(core)]


def _covered(a: Analysis, kinds: Iterable[str]) -> set[int]:
    return {i for kind in kinds for f in a.features.get(kind, ()) for i in range(f.start, f.end)}


# =================================================================== dates


def _month_alternation() -> str:
    names = set()
    for name in MONTHS:
        names.add(name.capitalize())
        if len(name) > 3 and name not in AMBIGUOUS_MONTHS:
            names.add(name)  # "january" in lower case is still a month
    return "|".join(sorted(names, key=len, reverse=True))


_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_DATE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso", re.compile(r"(?<![\d-])(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")),
    ("slash", re.compile(r"(?<![\d/.])(\d{1,2})[/.](\d{1,2})[/.](\d{2}|\d{4})(?![\d/])")),
    (
        "named",
        re.compile(
            rf"(?:(?<!\w)({_DAY})\s+(?:of\s+)?)?(?<!\w)(?=[JFMASONDjfmasond])({_month_alternation()})\.?(?!\w)"
            rf"(?:\s+({_DAY})(?![\w:]))?(?:,?\s+(\d{{4}})(?!\d))?"
        ),
    ),
    ("time", re.compile(r"(?<![\w:.])(\d{1,2})(?::(\d{2}))?(?::\d{2})?\s*([ap])\.?m\b\.?", re.I)),
    ("time24", re.compile(r"(?<![\w:.])([01]?\d|2[0-3]):([0-5]\d)(?::[0-5]\d)?(?![\d:])")),
    ("year", re.compile(r"(?<![\w.,])(1\d{3}|2[01]\d\d)(?![\w]|[,.]\d)")),
    ("weekday", re.compile(rf"(?<!\w)(?=[MTWFSmtwfs])({'|'.join(WEEKDAYS)})s?(?!\w)", re.I)),
    ("named_time", re.compile(r"(?<!\w)(?=[nmNM])(noon|midday|midnight)(?!\w)", re.I)),
)


# Cheap tests that must pass before a date pattern is worth running.
_DATE_PROBES: dict[str, Callable[[Analysis, str], bool]] = {
    "iso": lambda a, low: bool(a.digit_tokens) and "-" in low,
    "slash": lambda a, low: bool(a.digit_tokens) and ("/" in low or "." in low),
    "named": lambda a, low: any(m[:3] in low for m in MONTHS),
    "time": lambda a, low: bool(a.digit_tokens) and ("m" in low),
    "time24": lambda a, low: bool(a.digit_tokens) and ":" in low,
    "year": lambda a, low: bool(a.digit_tokens),
    "weekday": lambda a, low: "day" in low,
    "named_time": lambda a, low: "noon" in low or "midday" in low or "midnight" in low,
}


_WORD_BEFORE = re.compile(r"([A-Za-z]+)\s+$")


def _after_year_word(text: str, start: int) -> bool:
    m = _WORD_BEFORE.search(text, max(start - 12, 0), start)
    return m is not None and m.group(1).lower() in YEAR_WORDS


def _int(s: str | None) -> int | None:
    return int(re.sub(r"\D", "", s)) if s else None


def _date_value(kind: str, m: re.Match[str]) -> Hashable | None:
    g = m.groups()
    if kind == "iso":
        return ("date", int(g[0]), int(g[1]), int(g[2]))
    if kind == "slash":
        return ("date", int(g[0]), int(g[1]), int(g[2]) % 100)
    if kind == "named":
        month = g[1].lower().rstrip(".")
        if month in AMBIGUOUS_MONTHS and not (g[0] or g[2] or g[3]):
            return None  # "May I ...", "in March" (the entity check still sees "March")
        return ("date", _int(g[3]), MONTHS[month], _int(g[0] or g[2]))
    if kind == "time":
        return ("time", int(g[0]) % 12 + (12 if g[2].lower() == "p" else 0), int(g[1] or 0))
    if kind == "time24":
        return ("time", int(g[0]), int(g[1]))
    if kind == "year":
        return ("year", int(g[0]))
    if kind == "weekday":
        return ("weekday", g[0].lower())
    return ("time", g[0].lower())


def _dates(a: Analysis) -> list[Feature]:
    found: list[tuple[int, Feature]] = []
    taken: list[tuple[int, int]] = []
    lower = a.text.lower()
    for kind, rx in _DATE_PATTERNS:
        if not _DATE_PROBES[kind](a, lower):
            continue
        for m in rx.finditer(a.text):
            if kind == "year" and not _after_year_word(a.text, m.start()):
                continue
            start, end = m.start(), m.end()
            if any(s < end and start < e for s, e in taken):
                continue
            value = _date_value(kind, m)
            if value is None:
                continue
            taken.append((start, end))
            first, last = _token_span(a.starts, start, end)
            found.append((start, Feature(first, last, value, a.text[start:end].strip())))
    return [f for _, f in sorted(found, key=lambda t: t[0])]


# =================================================================== numbers

_DIGITS = re.compile(
    r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?!\d)|\d+)(\.\d+(?:\.\d+)*)?((?:st|nd|rd|th)(?![^\W\d_]))?"
    r"|(?<!\w)\.(\d+)"
    r"|(?<=[^\W\d_])(\d+(?:\.\d+)*)"
)


_NUMBER_SUFFIXES = {"k": 10**3, "K": 10**3, "M": 10**6, "bn": 10**9}


def _scaled(value: str, scale: int) -> str:
    try:
        d = Decimal(value) * scale
    except InvalidOperation:
        return f"{value}×{scale}"
    return str(int(d)) if d == d.to_integral_value() else str(d.normalize())


def _digit_value(core: str, m: re.Match[str]) -> str:
    if m.group(5) is not None:  # glued after letters: S23, x86, Q1
        return m.group(5)
    if m.group(4) is not None:
        return "0." + m.group(4)
    whole = m.group(1).replace(",", "").lstrip("0") or "0"
    sign = "-" if m.start() == 1 and core[0] == "-" else ""
    value = f"{sign}{whole}{m.group(2) or ''}"
    if m.group(3):
        value += "th"
    else:
        suffix = core[m.end() :]
        if suffix in _NUMBER_SUFFIXES:  # 10k, 5M, 2bn
            value = _scaled(value, _NUMBER_SUFFIXES[suffix])
    return value


def _may_follow(prev: str, role: str, current: int) -> bool:
    """Whether a number word can continue the run ("twenty" + "five", not "two" + "five")."""
    if prev == "":
        return True
    if prev == "tens":
        return role in ("ordinal", "hundred", "scale") or (role == "unit" and current % 10 == 0)
    if prev == "unit":
        return role in ("hundred", "scale")
    if prev in ("hundred", "scale"):
        return role in ("unit", "tens", "ordinal", "scale", "hundred")
    return False


def _spelled(a: Analysis, skip: set[int]) -> list[Feature]:
    """Runs of number words: "twenty-five", "a dozen", "two thousand and one", "fifth"."""
    words = [
        (i, w)
        for i, key in enumerate(a.keys)
        if i not in skip and not a.code[i] and (key in _NUMBERISH or "-" in key)
        for w in key.split("-")
    ]
    out: list[Feature] = []
    n = 0
    while n < len(words):
        word = words[n][1]
        i = words[n][0]
        if word == "one" and (i and a.keys[i - 1] in ONE_AS_PRONOUN_AFTER or a.keys[i + 1 : i + 2] == ("another",)):
            n += 1
            continue
        article = word in ("a", "an") and n + 1 < len(words) and words[n + 1][1] in NUMBER_SCALES
        if word not in NUMBER_WORDS and not article:
            n += 1
            continue
        total, current, ordinal, prev = 0, (1 if article else 0), False, ("scale" if article else "")
        vague: str | None = None
        m = n + 1 if article else n
        while m < len(words):
            if m > n and words[m][0] > words[m - 1][0] + 1:
                break  # not adjacent: the run ended at a skipped token
            word = words[m][1]
            following = words[m + 1][1] if m + 1 < len(words) else ""
            if word == "and" and prev in ("hundred", "scale") and following in NUMBER_WORDS:
                m += 1
                continue
            entry = NUMBER_WORDS.get(word)
            if entry is None or entry[1] == "vague" and prev:
                break
            value, role = entry
            if role == "vague":
                vague, m = str(value), m + 1
                break
            if not _may_follow(prev, role, current):
                break
            assert isinstance(value, int)
            if role in ("unit", "tens"):
                current += value
            elif role == "hundred":
                current = max(current, 1) * value
            elif role == "scale":
                total, current = total + max(current, 1) * value, 0
            else:
                current = current + value if value < 100 else max(current, 1) * value
                ordinal = True
            prev, m = role, m + 1
            if ordinal:
                break
        if m == n or (article and m == n + 1):
            n += 1
            continue
        value_text = vague or f"{total + current}{'th' if ordinal else ''}"
        text = " ".join(w for _, w in words[n:m])
        out.append(Feature(words[n][0], words[m - 1][0] + 1, value_text, text))
        n = m
    return out


def _numbers(a: Analysis) -> list[Feature]:
    skip = _covered(a, ("date",))
    out: list[Feature] = []
    for i in sorted(a.digit_tokens - skip):
        core = a.cores[i]
        for m in _DIGITS.finditer(core):
            value, end = _digit_value(core, m), i + 1
            text = "-" + m.group() if value.startswith("-") else m.group()
            if m.end() == len(core) and i + 1 < len(a.cores) and m.group(5) is None:
                scale = NUMBER_SCALES.get(a.keys[i + 1], 0)
                if scale > 12:  # "2 million" = "two million"
                    value, end, text = _scaled(value, scale), i + 2, f"{text} {a.cores[i + 1]}"
                    skip.add(i + 1)
            out.append(Feature(i, end, value, text))
    out.extend(_spelled(a, skip))
    out.sort(key=lambda f: f.start)
    return out


# =================================================================== units

_UNIT_PART = re.compile(r"°\s?[CFK](?![a-z])|US\$|[$€£¥₹%°]|\d+(?:[.,]\d+)*|[^\W\d_]+(?:/[^\W\d_]+)?")


def _after_number(a: Analysis, i: int, parts: list[str], n: int) -> bool:
    if n:
        return parts[n - 1][:1].isdigit()
    if i == 0:
        return False
    prev = a.cores[i - 1]
    return prev[-1:].isdigit() or prev.casefold() in NUMBER_WORDS


def _units(a: Analysis) -> list[Feature]:
    """Units; a common word ("day", "degree") not after a number is marked weak."""
    out: list[Feature] = []
    for i, core in enumerate(a.cores):
        if core.isalpha() and i not in a.digit_tokens and a.keys[i] not in UNITS and core not in _UNIT_SPELLINGS:
            continue
        parts = _UNIT_PART.findall(core.removesuffix("'s"))
        for n, part in enumerate(parts):
            unit = UNITS_EXACT.get(part) or UNITS.get(part.casefold())
            after_number = _after_number(a, i, parts, n)
            if unit is None and part in UNITS_AFTER_NUMBER and after_number:
                unit = UNITS_AFTER_NUMBER[part]
            if unit is not None:
                weak = not after_number and part.casefold() in WEAK_UNIT_WORDS
                out.append(Feature(i, i + 1, (unit, weak), part))
    return out


# =================================================================== polarity


def _negations(a: Analysis) -> list[Feature]:
    out = []
    for i, low in enumerate(a.keys):
        if low in NEGATORS or low.endswith("n't") or low.startswith("non-"):
            out.append(Feature(i, i + 1, "negation", a.cores[i]))
    return out


def _lexicon_extractor(lexicon: dict[str, tuple[tuple[int, int], ...]]) -> Callable[[Analysis], list[Feature]]:
    def extract(a: Analysis) -> list[Feature]:
        out = []
        for i, key in enumerate(a.keys):
            if a.code[i]:
                continue
            for word in (key,) if key.isalpha() else _words(key):
                for group_pole in lexicon.get(word, ()):
                    out.append(Feature(i, i + 1, group_pole, word))
        return out

    return extract


# =================================================================== names


def _uncased(word: str) -> bool:
    """Holds a letter of a script without capitals (CJK, Arabic, Hebrew, Thai, ...)."""
    return any(ch.isalpha() and ch.lower() == ch.upper() for ch in word)


def _entities(a: Analysis) -> list[Feature]:
    """Capitalised runs ("Marie Curie") minus common sentence starters, and every
    word of a script without capitals."""
    skip = _covered(a, ("date", "unit"))
    out: list[Feature] = []
    run: list[int] = []

    def flush() -> None:
        if run:
            text = " ".join(a.cores[j].removesuffix("'s") for j in run)
            out.append(Feature(run[0], run[-1] + 1, text, text))
            run.clear()

    for i, core in enumerate(a.cores):
        if core.islower() and core.isascii():
            flush()
            continue
        name = core[:-2] if core.endswith("'s") else core
        if i in skip or a.code[i] or not name:
            flush()
            continue
        if _uncased(name):
            flush()
            out.append(Feature(i, i + 1, name, name))
            continue
        capital = name[0].isupper() and name.casefold() not in NEVER_NAMES
        if capital and a.initial[i] and name.casefold() in SENTENCE_STARTERS:
            capital = False
        if capital and a.initial[i]:
            flush()
        if capital:
            run.append(i)
        else:
            flush()
    flush()
    return out


_PLAIN_NUMBER = re.compile(r"^[-+]?[\d.,/:]*\d(?:st|nd|rd|th)?%?$")
_ABBREVIATION = re.compile(r"^(?:[a-z]\.){1,3}[a-z]?\.?$")


def _identifiers(a: Analysis) -> list[Feature]:
    """Code-like tokens: snake_case, camelCase, file names, paths, flags, calls."""
    skip = _covered(a, ("date", "unit"))
    return [
        Feature(i, i + 1, core, core)
        for i, core in enumerate(a.cores)
        if a.code[i] and i not in skip and not _PLAIN_NUMBER.match(core) and not _ABBREVIATION.match(core)
    ]


_QUOTED = re.compile(r"\"([^\"\n]{1,150})\"|(?<!\w)'([^'\n]{1,150})'(?!\w)|`([^`\n]{1,150})`")


def _quotes(a: Analysis) -> list[Feature]:
    out = []
    for m in _QUOTED.finditer(a.text):
        group = next(g for g in (1, 2, 3) if m.group(g) is not None)
        first, last = _token_span(a.starts, m.start(group), m.end(group))
        value = tuple(a.keys[first:last])
        if value:
            out.append(Feature(first, last, value, m.group(group)))
    return out


_EXTRACTORS: tuple[tuple[str, Callable[[Analysis], list[Feature]]], ...] = (
    ("date", _dates),
    ("number", _numbers),
    ("unit", _units),
    ("negation", _negations),
    ("antonym", _lexicon_extractor(ANTONYM_LEXICON)),
    ("alternative", _lexicon_extractor(ALTERNATIVE_LEXICON)),
    ("entity", _entities),
    ("identifier", _identifiers),
    ("quote", _quotes),
)

# =================================================================== the diff


@dataclass(frozen=True)
class TextDiff:
    """Two analysed texts and the token indexes that changed on each side."""

    stored: Analysis
    incoming: Analysis
    stored_changed: frozenset[int]
    incoming_changed: frozenset[int]

    def changed(self, kind: str) -> tuple[list[Feature], list[Feature]]:
        """Features of ``kind`` that touch a changed token, on each side."""
        return (
            [f for f in self.stored.features[kind] if _touches(f, self.stored_changed)],
            [f for f in self.incoming.features[kind] if _touches(f, self.incoming_changed)],
        )

    @cached_property
    def changed_words(self) -> tuple[frozenset[str], frozenset[str]]:
        """Lower-cased words of the changed tokens, on each side."""
        return (
            frozenset(w for i in self.stored_changed for w in _words(self.stored.keys[i])),
            frozenset(w for i in self.incoming_changed for w in _words(self.incoming.keys[i])),
        )


def _touches(f: Feature, changed: frozenset[int]) -> bool:
    return f.start in changed if f.end == f.start + 1 else not changed.isdisjoint(range(f.start, f.end))


def _common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # slice comparison runs at memcmp speed on long texts
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _windows(a: str, b: str) -> tuple[str, str]:
    """Long texts shrink to the part that differs plus context for dates, names
    and sentence starts. Both are cut at the same offsets from their ends, so
    the kept context (even a cut word) is identical on both sides."""
    if len(a) + len(b) <= _TRIM_ABOVE_CHARS:
        return a, b
    prefix = _common_prefix(a, b)
    suffix = _common_suffix(a, b, min(len(a), len(b)) - prefix)
    head = max(prefix - _TRIM_MARGIN_CHARS, 0)
    tail = max(suffix - _TRIM_MARGIN_CHARS, 0)
    return a[head : len(a) - tail], b[head : len(b) - tail]


def text_diff(stored_text: str, incoming_text: str) -> TextDiff | None:
    """Analyse both texts and find the changed tokens (difflib over the diff keys).

    None when the texts differ over more than MAX_CHANGED_TOKENS words: that
    is counted before any analysis, so two unrelated 1 MB prompts cost little."""
    a_text, b_text = _windows(stored_text, incoming_text)
    limit = MAX_CHANGED_TOKENS + 2 * _TRIM_MARGIN_CHARS
    for text in (a_text, b_text):
        if len(text) > 2 * limit and len(text.split()) > limit:
            return None
    a, b = analyse(_prepare(a_text)), analyse(_prepare(b_text))
    ak, bk = a.keys, b.keys
    lo, a_hi, b_hi = 0, len(ak), len(bk)
    while lo < a_hi and lo < b_hi and ak[lo] == bk[lo]:
        lo += 1
    while a_hi > lo and b_hi > lo and ak[a_hi - 1] == bk[b_hi - 1]:
        a_hi, b_hi = a_hi - 1, b_hi - 1
    if a_hi - lo > MAX_CHANGED_TOKENS or b_hi - lo > MAX_CHANGED_TOKENS:
        return None
    a_changed: set[int] = set()
    b_changed: set[int] = set()
    if lo < a_hi or lo < b_hi:
        matcher = SequenceMatcher(None, ak[lo:a_hi], bk[lo:b_hi], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                a_changed.update(range(lo + i1, lo + i2))
                b_changed.update(range(lo + j1, lo + j2))
    return TextDiff(a, b, frozenset(a_changed), frozenset(b_changed))


# =================================================================== checks


def _compare(label: str, stored: Sequence[Feature], incoming: Sequence[Feature], sep: str = "≠") -> str | None:
    """None when both sides hold the same values in the same order, else why not."""
    if [f.value for f in stored] == [f.value for f in incoming]:
        return None
    only_stored = Counter(f.value for f in stored) - Counter(f.value for f in incoming)
    only_incoming = Counter(f.value for f in incoming) - Counter(f.value for f in stored)
    a = next((f.text for f in stored if f.value in only_stored), None)
    b = next((f.text for f in incoming if f.value in only_incoming), None)
    if a is not None and b is not None:
        return f"{label} {a}≠{b}" if sep == "≠" else f"{label}: {a}{sep}{b}"
    if a is not None or b is not None:
        return f"{label}: '{a if a is not None else b}' only in {'stored' if a is not None else 'incoming'}"
    return f"{label} order: {', '.join(f.text for f in stored)}{sep}{', '.join(f.text for f in incoming)}"


def dates_differ(d: TextDiff) -> str | None:
    """Calendar dates, years, weekdays and times of day (ISO, slash, named month)."""
    return _compare("date", *d.changed("date"))


def numbers_differ(d: TextDiff) -> str | None:
    """Digits, decimals, percentages, ordinals and spelled-out numbers, by value."""
    return _compare("number", *d.changed("number"))


def units_differ(d: TextDiff) -> str | None:
    """Units of measure, time spans and currencies (km/miles, °C/°F, USD/€, MB/GB).

    A common word that is a unit only sometimes ("some day", "a degree") counts
    when the other side changed a unit too ("per month" -> "per week")."""
    stored, incoming = d.changed("unit")
    if not stored or not incoming:
        stored = [f for f in stored if not f.value[1]]  # type: ignore[index]
        incoming = [f for f in incoming if not f.value[1]]  # type: ignore[index]
    unit = lambda fs: [Feature(f.start, f.end, f.value[0], f.text) for f in fs]  # type: ignore[index]  # noqa: E731
    return _compare("unit", unit(stored), unit(incoming), sep="→")


def negation_differs(d: TextDiff) -> str | None:
    """A negator (not, no, never, without, n't, except, ...) gained or lost, or a
    word set against its negated form (happy/unhappy, lock/unlock, breaking/non-breaking)."""
    stored, incoming = d.changed("negation")
    if len(stored) != len(incoming):
        more, side = (stored, "stored") if len(stored) > len(incoming) else (incoming, "incoming")
        return f"negation: '{more[0].text}' only in {side}"
    for x, y in _prefixed_pairs(*d.changed_words, _NEGATION_PARTNERS):
        return f"negation: {x}→{y}"
    return None


def _partners(swaps: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """prefix -> the prefixes that oppose it; the empty prefix is never looked up."""
    out: dict[str, list[str]] = {}
    for p, q in swaps:
        out.setdefault(p, []).append(q)
        out.setdefault(q, []).append(p)
    out.pop("", None)
    return {k: tuple(v) for k, v in out.items()}


_NEGATION_PARTNERS = _partners(("", p) for p in NEGATING_PREFIXES)
_SWAP_PARTNERS = _partners(PREFIX_SWAPS)


def _prefixed_pairs(
    a_words: frozenset[str], b_words: frozenset[str], partners: dict[str, tuple[str, ...]]
) -> Iterable[tuple[str, str]]:
    """(x, y) with x = p + stem on one side and y = q + stem on the other, p and q partners.
    Each pair is found from whichever side carries a (non-empty) prefix."""
    lengths = sorted({len(p) for p in partners})
    for first, second, flip in ((a_words, b_words, False), (b_words, a_words, True)):
        for word in first:
            for n in lengths:
                if len(word) - n < 3 or word[:n] not in partners:
                    continue
                for q in partners[word[:n]]:
                    other = q + word[n:]
                    if other in second:
                        yield (other, word) if flip else (word, other)


def antonyms_differ(d: TextDiff) -> str | None:
    """Opposing words (weekday/weekend, before/after, ascending/descending, ...)
    and opposing prefixes (encrypt/decrypt, inbound/outbound, hypo/hyper)."""
    reason = _by_group("antonym", *d.changed("antonym"))
    if reason is not None:
        return reason
    for x, y in _prefixed_pairs(*d.changed_words, _SWAP_PARTNERS):
        return f"antonym: {x}→{y}"
    return None


def alternatives_differ(d: TextDiff) -> str | None:
    """Mutually exclusive choices in one domain (mean/median/mode, fetch/pull, margin/padding)."""
    return _by_group("alternative", *d.changed("alternative"))


def _by_group(label: str, stored: list[Feature], incoming: list[Feature]) -> str | None:
    """Refuse a swap within a group. A word dropped or added without its
    counterpart is left to the score: paraphrases do that all the time."""
    groups = sorted({f.value[0] for f in stored} & {f.value[0] for f in incoming})  # type: ignore[index]
    for group in groups:
        reason = _compare(
            label,
            [f for f in stored if f.value[0] == group],  # type: ignore[index]
            [f for f in incoming if f.value[0] == group],  # type: ignore[index]
            sep="→",
        )
        if reason is not None:
            return reason
    return None


def entities_differ(d: TextDiff) -> str | None:
    """Names: capitalised runs (France, Marie Curie) and words of uncased scripts."""
    return _compare("entity", *d.changed("entity"), sep="→")


def identifiers_differ(d: TextDiff) -> str | None:
    """Code identifiers, file names, paths and flags, compared case-sensitively."""
    return _compare("identifier", *d.changed("identifier"), sep="→")


def quoted_differ(d: TextDiff) -> str | None:
    """Quoted strings and inline code: any change inside them counts."""
    return _compare("quoted", *d.changed("quote"), sep="→")


# Words too common to carry who-did-what-to-whom when they move.
FUNCTION_WORDS = frozenset(
    "a an the of to in on at for by with from and or but is are was were be been it this that these those "
    "i you we they he she me my your our their its do does did can could would should will please".split()
)


def word_order_differs(d: TextDiff) -> str | None:
    """The changed words are the same words, moved: "dog bites man" vs "man bites dog" (or
    "USD to EUR" vs "EUR to USD") score 1.0 as multisets, yet ask different things."""
    stored, incoming = d.changed_words
    moved = sorted(stored - FUNCTION_WORDS)
    return f"word order: '{moved[0]}' moved" if moved and stored == incoming else None


GUARD_CHECKS: tuple[Callable[[TextDiff], str | None], ...] = (
    dates_differ,
    numbers_differ,
    units_differ,
    negation_differs,
    antonyms_differ,
    alternatives_differ,
    entities_differ,
    identifiers_differ,
    quoted_differ,
    word_order_differs,
)


def guard(stored_text: str, incoming_text: str) -> str | None:
    """None if the two texts may share an answer as far as the guard can tell, else the first reason."""
    if stored_text == incoming_text:
        return None
    diff = text_diff(stored_text, incoming_text)
    if diff is None:
        return f"texts differ too widely to check (more than {MAX_CHANGED_TOKENS} changed words)"
    if not diff.stored_changed and not diff.incoming_changed:
        return None
    for check in GUARD_CHECKS:
        reason = check(diff)
        if reason is not None:
            return reason
    return None
