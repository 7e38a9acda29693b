"""Which languages a near-match is written in, and whether the guard has tables for all of them.

The guard refuses changed numbers, negations, opposites, ... by word lists, one table per language
(:mod:`semula.core.guard.languages`). In a language without a table it finds nothing to refuse, so a
near-match there (Vietnamese "chia hết" / "không chia hết") looks harmless and would be served. The
gate below says which languages the two texts are in; :mod:`semula.core.nearmatch` serves a near
match only when every one of them has a table, and otherwise sends it to review with the reason
"no guard for <language>".

How the languages are found (py3langid: a naive Bayes model over byte n-grams, 140 languages, shipped
in the package, no I/O after its one lazy load; ~0.2 ms a sentence):

- Each text is cut into segments (lines and sentences) with code, URLs and numbers taken out. Only
  segments that are not found verbatim on the other side are identified: a segment both texts share
  carries no change the guard could miss, and a long RAG context costs nothing when one sentence
  changed. When nothing differs segment by segment (sentences reordered), all segments count.
- A segment counts its best language when the model gives it at least ``CONFIDENT``, and every other
  language at or above ``MIXED_FLOOR`` (a sentence half in one language, half in another).
- Segments under ``MIN_LETTERS`` letters, and those the model is unsure of, are pooled and identified
  again together. Still unsure: when the model's best guess is a language without a guard, clearly
  ahead of any guarded one, that language counts (evidence enough to refuse); otherwise the letters
  decide. ASCII letters only count as English (the guard's default lists; the model is unreliable on
  "Say hi": Quechua 0.22); letters all of the guarded languages' alphabets and scripts count as the
  best guarded language of the model's ranking; anything else is "an unidentified language", which
  has no guard.
- Nigerian Pidgin counts as English (the model takes short English questions for it), and a second
  language that is a close relative the model confuses with the first (Afrikaans in Dutch) is dropped.

Every language found on either side counts: a pair is gated when any of them lacks a table.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from semula.core.guard.languages import TABLES
from semula.core.guard.lexicons import script_of
from semula.core.text import common_prefix, common_suffix

__all__ = [
    "CONFIDENT",
    "GUARDED",
    "MIN_LETTERS",
    "MIXED_FLOOR",
    "Languages",
    "language_name",
    "languages_of_pair",
    "unguarded_reason",
]

GUARDED = frozenset(t.code for t in TABLES)
_NAMES = {t.code: t.name for t in TABLES} | {
    "vi": "Vietnamese", "id": "Indonesian", "ms": "Malay", "sw": "Swahili", "tl": "Tagalog", "hu": "Hungarian",
    "fi": "Finnish", "et": "Estonian", "cs": "Czech", "sk": "Slovak", "ro": "Romanian", "el": "Greek",
    "he": "Hebrew", "fa": "Persian", "ur": "Urdu", "bn": "Bengali", "ta": "Tamil", "te": "Telugu",
    "th": "Thai", "uk": "Ukrainian", "bg": "Bulgarian", "sr": "Serbian", "hr": "Croatian", "bs": "Bosnian",
    "sl": "Slovenian", "lt": "Lithuanian", "lv": "Latvian", "da": "Danish", "no": "Norwegian",
    "nn": "Norwegian Nynorsk", "is": "Icelandic", "ca": "Catalan", "eu": "Basque", "gl": "Galician",
    "ga": "Irish", "cy": "Welsh", "af": "Afrikaans", "zu": "Zulu", "xh": "Xhosa", "yo": "Yoruba",
    "ha": "Hausa", "ig": "Igbo", "am": "Amharic", "so": "Somali", "mr": "Marathi", "ne": "Nepali",
    "gu": "Gujarati", "pa": "Punjabi", "kn": "Kannada", "ml": "Malayalam", "si": "Sinhala", "km": "Khmer",
    "lo": "Lao", "my": "Burmese", "ka": "Georgian", "hy": "Armenian", "az": "Azerbaijani", "kk": "Kazakh",
    "uz": "Uzbek", "mn": "Mongolian", "la": "Latin", "eo": "Esperanto", "jv": "Javanese", "mt": "Maltese",
    "yue": "Cantonese", "wuu": "Wu Chinese", "arz": "Egyptian Arabic", "ary": "Moroccan Arabic",
    "pcm": "Nigerian Pidgin", "lb": "Luxembourgish", "fy": "Frisian", "oc": "Occitan", "qu": "Quechua",
}
UNIDENTIFIED = "und"
_NO_LANGUAGE = "zxx"  # the model's label for text with no linguistic content

CONFIDENT = 0.5  # a segment's best language counts from this probability
MIXED_FLOOR = 0.3  # a second language in the same segment counts from this one
# An unsure text is in a language without a guard when the model's best guess is that language at
# `UNSURE_FLOOR` or more, twice as likely as any guarded one, on at least `UNSURE_MIN_LETTERS` letters.
UNSURE_FLOOR = 0.25
UNSURE_MARGIN = 2.0
UNSURE_MIN_LETTERS = 12
MIN_LETTERS = 20  # shorter segments are pooled and identified together
# Beyond this many differing characters of prose (or twice as many raw, on both sides) the pair is
# not identified, and so not served: no near-match the guard lets through differs that widely.
MAX_DIFFERING_CHARS = 50_000

# Nigerian Pidgin is English-lexified (its negators are English's): the model takes short English
# questions for it ("How do we deal with depression?": pcm 0.57, en 0.43).
_FOLDED = {"pcm": "en"}
# A second language the model finds in a segment of its close relative is its confusion, not a
# second language (Dutch "Geef drie tips om beter te slapen.": nl 0.52, af 0.37): a mixture of the
# two shows as segments in each.
_CONFUSED: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    "nl": "af fy", "ar": "ary arz", "tr": "crh az tk", "es": "ext gl an ca", "pt": "gl", "it": "lij vec",
    "zh": "wuu yue", "hi": "ne mr gom", "fr": "oc", "de": "lb", "sv": "no nn da", "ru": "uk be bg",
    "en": "sco la",
}.items()}
# Letters of the guarded languages outside ASCII (from their tables, plus the accented vowels of
# the Western European ones) and their non-Latin scripts: the script fallback's alphabet.
_GUARDED_LETTERS = frozenset(
    ch for t in TABLES for spec in (*t.negators.values(), *t.numbers.values(), *t.months.values(), t.antonyms)
    for ch in spec.casefold() if ch.isalpha() and not ch.isascii() and script_of(ch) == "LATIN"
) | frozenset("àáâãäåçèéêëìíîïñòóôõöùúûüýÿœßąćęłńóśźżğışâîû")
_GUARDED_SCRIPTS = frozenset(s for t in TABLES for s in t.scripts if s != "LATIN")

_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
_NOISE = re.compile(r"https?://\S+|\S+@\S+\.\w+|[\w.-]*\d[\w.-]*|[_/\\]\w+")  # URLs, e-mails, numbers, ids
_SEGMENT = re.compile(r"(?<=[.!?;:])\s+|\n+|(?<=[。！？；])")
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Languages:
    """The languages found in a pair's differing segments, and those without a guard table."""

    found: tuple[str, ...]  # sorted codes ("und": unidentified)
    unguarded: tuple[str, ...]

    @property
    def stratum(self) -> str:
        """The calibration stratum: the codes joined ("en", "en+fr"), "und" when none."""
        return "+".join(self.found) or UNIDENTIFIED


def language_name(code: str) -> str:
    if code == UNIDENTIFIED:
        return "an unidentified language"
    name = _NAMES.get(code)
    return f"{name} ({code})" if name else code


def unguarded_reason(languages: Languages) -> str | None:
    """"no guard for Vietnamese (vi)" when a language found has no table, else None."""
    if not languages.unguarded:
        return None
    return "no guard for " + ", ".join(language_name(c) for c in languages.unguarded)


def segments(text: str) -> tuple[str, ...]:
    """The text's lines and sentences with code, URLs, numbers and identifiers taken out; empty
    segments (no letters) dropped."""
    prose = _NOISE.sub(" ", _CODE.sub(" ", text))
    out = []
    for piece in _SEGMENT.split(prose):
        piece = " ".join(piece.split())
        if _LETTER.search(piece):
            out.append(piece)
    return tuple(out)


def languages_of_pair(stored_text: str, incoming_text: str) -> Languages:
    """Every language of the segments the two texts do not share (all segments when they share all)."""
    stored_text, incoming_text = _middles(stored_text, incoming_text)
    if len(stored_text) + len(incoming_text) > 2 * MAX_DIFFERING_CHARS:  # before any work on them
        return Languages((UNIDENTIFIED,), (UNIDENTIFIED,))
    a, b = _segments(stored_text), _segments(incoming_text)
    differing = [s for s in a if s not in b] + [s for s in b if s not in a]
    if not differing:
        differing = list(a) + list(b)
    if sum(len(s) for s in differing) > MAX_DIFFERING_CHARS:
        return Languages((UNIDENTIFIED,), (UNIDENTIFIED,))
    found = _identify(dict.fromkeys(differing))
    codes = tuple(sorted(found))
    return Languages(codes, tuple(c for c in codes if c not in GUARDED))


_TRIM_ABOVE_CHARS = 4096
_FENCE = "```"


def _middles(a: str, b: str) -> tuple[str, str]:
    """Long texts shrink to the lines where they differ: the shared lines before and after are the
    same segments on both sides, which never count (so a 1 MB RAG context with one changed sentence
    costs what that sentence costs). A cut never falls inside a code fence."""
    if len(a) + len(b) <= _TRIM_ABOVE_CHARS or a == b:
        return a, b
    prefix = common_prefix(a, b)
    suffix = common_suffix(a, b, min(len(a), len(b)) - prefix)
    head = a.rfind("\n", 0, prefix) + 1
    if a.count(_FENCE, 0, head) % 2:
        head = 0
    newline = a.find("\n", len(a) - suffix)
    tail = len(a) - newline if newline >= 0 else 0
    if tail and a.count(_FENCE, len(a) - tail) % 2:
        tail = 0
    return a[head:len(a) - tail], b[head:len(b) - tail]


@lru_cache(maxsize=4096)
def _segments(text: str) -> frozenset[str]:
    return frozenset(segments(text))


def _identify(parts: Iterable[str]) -> set[str]:
    found: set[str] = set()
    unsure: list[str] = []
    for part in parts:
        langs = _confident(part) if _letters(part) >= MIN_LETTERS else ()
        if langs:
            found.update(langs)
        else:
            unsure.append(part)
    if unsure:
        found.update(_unsure(" ".join(unsure)))
    return found


def _letters(text: str) -> int:
    return len(_LETTER.findall(text))


@lru_cache(maxsize=16384)
def _ranked(text: str) -> list[tuple[str, float]]:
    """The model's ranking with its confusable variants folded into their language."""
    merged: dict[str, float] = {}
    for code, p in _rank(text):
        code = _FOLDED.get(code, code)
        if code != _NO_LANGUAGE:
            merged[code] = merged.get(code, 0.0) + p
    return sorted(merged.items(), key=lambda cp: -cp[1])


def _confident(text: str) -> tuple[str, ...]:
    """A segment's languages: its best at `CONFIDENT` or more, with any other at `MIXED_FLOOR` that is
    not a close relative the model confuses with the best (`_CONFUSED`)."""
    ranked = _ranked(text)
    if not ranked or ranked[0][1] < CONFIDENT:
        return ()
    best = ranked[0][0]
    return (best, *(c for c, p in ranked[1:] if p >= MIXED_FLOOR and c not in _CONFUSED.get(best, ())))


def _unsure(text: str) -> tuple[str, ...]:
    """Short or ambiguous text, pooled: the model's best when it is sure, or when its best guess is a
    language without a guard (evidence enough to refuse); else the script decides
    (`_by_script`)."""
    ranked = _ranked(text)
    if not ranked:
        return _by_script(text, ranked)
    best, p = ranked[0]
    guarded_p = next((q for c, q in ranked if c in GUARDED), 0.0)
    if p >= CONFIDENT or (best not in GUARDED and p >= UNSURE_FLOOR and p >= UNSURE_MARGIN * guarded_p
                          and _letters(text) >= UNSURE_MIN_LETTERS):
        return (best,)
    return _by_script(text, ranked)


def _by_script(text: str, ranked: Sequence[tuple[str, float]]) -> tuple[str, ...]:
    """ASCII letters only: English (the guard's default lists). Letters all of alphabets the guarded
    languages use: the best guarded language of the ranking. Anything else: unidentified."""
    letters = _LETTER.findall(text)
    if all(ch.isascii() for ch in letters):
        return ("en",)
    if all(ch.isascii() or ch.casefold() in _GUARDED_LETTERS or script_of(ch) in _GUARDED_SCRIPTS
           for ch in letters):
        return next(((c,) for c, _ in ranked if c in GUARDED), ("en",))
    return (UNIDENTIFIED,)


# ------------------------------------------------------------------ the model, loaded once

_lock = threading.Lock()
_identifier: list[Any] = []


def _model() -> Any:
    """py3langid's identifier with probabilities, loaded on first use (~2 s, numpy; never at import)."""
    if not _identifier:
        with _lock:
            if not _identifier:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                _identifier.append(LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True))
    return _identifier[0]


def _rank(text: str) -> Sequence[tuple[str, float]]:
    return [(code, float(p)) for code, p in _model().rank(text)[:8]]


def preload() -> None:
    """Load the model now (a proxy may call it off the event loop at start)."""
    _model()
