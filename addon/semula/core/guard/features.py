"""The values the guard compares, found in a tokenised text.

Dates, numbers, units, negations, antonyms, alternatives, names, identifiers
and quotes: each extractor turns an :class:`~semula.core.guard.tokens.Analysis`
into :class:`~semula.core.guard.tokens.Feature` values that the checks in
:mod:`semula.core.guard` compare side by side. Kept apart from the checks
because extraction is most of the guard's code and all of its regexes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from semula.core.guard.multilingual import meanings, negations, table_features
from semula.core.guard.tokens import Analysis, Feature, core_words, covered, token_span, tokenised
from semula.core.guard.words import (
    ALTERNATIVE_LEXICON,
    AMBIGUOUS_MONTHS,
    ANTONYM_LEXICON,
    MONTHS,
    NEVER_NAMES,
    NUMBER_SCALES,
    NUMBER_WORDS,
    ONE_AS_PRONOUN_AFTER,
    SENTENCE_STARTERS,
    UNITS,
    UNITS_AFTER_NUMBER,
    UNITS_EXACT,
    WEAK_UNIT_WORDS,
    WEEKDAYS,
    YEAR_WORDS,
    _NUMBERISH,
    _UNIT_SPELLINGS,
)

__all__ = ["analyse"]


@lru_cache(maxsize=1024)
def analyse(text: str) -> Analysis:
    """Tokens and features of an already prepared text (cached: stored texts repeat)."""
    a = tokenised(text)
    for kind, extract in _EXTRACTORS:  # later extractors read earlier features
        a.features[kind] = tuple(extract(a))
    return a


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
            first, last = token_span(a.starts, start, end)
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
    skip = covered(a, ("date",))
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



def _lexicon_extractor(lexicon: dict[str, tuple[tuple[int, int], ...]]) -> Callable[[Analysis], list[Feature]]:
    def extract(a: Analysis) -> list[Feature]:
        out = []
        for i, key in enumerate(a.keys):
            if a.code[i]:
                continue
            for word in (key,) if key.isalpha() else core_words(key):
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
    skip = covered(a, ("date", "unit"))
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
    skip = covered(a, ("date", "unit"))
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
        first, last = token_span(a.starts, m.start(group), m.end(group))
        value = tuple(a.keys[first:last])
        if value:
            out.append(Feature(first, last, value, m.group(group)))
    return out


_english_antonyms = _lexicon_extractor(ANTONYM_LEXICON)


def _all_dates(a: Analysis) -> list[Feature]:
    """English dates, then month and weekday names from the language tables."""
    found = _dates(a)
    a.features["date"] = tuple(found)
    found += table_features(a, "month", ("date",)) + table_features(a, "weekday", ("date",))
    return sorted(found, key=lambda f: f.start)


def _all_numbers(a: Analysis) -> list[Feature]:
    """English digits and number words, then the tables' number words and ordinals."""
    found = _numbers(a)
    a.features["number"] = tuple(found)
    found += table_features(a, "number", ("date", "number"))
    return sorted(found, key=lambda f: f.start)


_EXTRACTORS: tuple[tuple[str, Callable[[Analysis], list[Feature]]], ...] = (
    ("meaning", meanings),
    ("date", _all_dates),
    ("number", _all_numbers),
    ("weak_number", lambda a: table_features(a, "weak_number", ("date", "number"))),
    ("unit", _units),
    ("negation", negations),
    ("antonym", lambda a: _english_antonyms(a) + table_features(a, "antonym")),
    ("quantifier", lambda a: table_features(a, "quantifier")),
    ("alternative", _lexicon_extractor(ALTERNATIVE_LEXICON)),
    ("entity", _entities),
    ("identifier", _identifiers),
    ("quote", _quotes),
)
