"""Normalise prompt text so that requests differing only in form match.

The normalised-fingerprint tier auto-serves, so this module decides which
differences are "the same request": whitespace, letter case of prose, trailing
``.?!``, Unicode variants (NFC/NFD, full-width forms, curly quotes, NBSP) and
the layout or key order of JSON pasted into a prompt. It must never erase a
difference that changes the answer, so case is kept wherever text looks like
code (``-s`` is not ``-S``, ``getUser`` is not ``getuser``), and plain dates
stay (they change answers) while UUIDs, timestamps and request ids are
scrubbed to placeholders.

Every rule errs towards keeping a difference: a miss costs one live call, a
wrong hit costs a confusing test failure.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from semula.core.request.normalise_layout import (
    MARK_END,
    MARK_START,
    code_lines,
    drop_quoted,
    json_spans,
    mark_indentation,
    quoted_spans,
    render_marks,
    try_json,
)
from semula.core.text import CJK_CHAR, CJK_RANGES

__all__ = [
    "VOLATILE_PATTERNS",
    "compile_scrub_patterns",
    "normalise_text",
    "scrub_volatile",
    "words",
]

# ---------------------------------------------------------------- characters

# Applied before NFKC, because NFKC would turn these into something misleading:
# "″" becomes two primes, "´" a space plus a combining accent.
_PRE_NFKC = str.maketrans({"″": '"', "‶": '"', "‴": '"', "´": "'", "ʼ": "'"})

# NFKC flattens "3²" to "32" and "x₁" to "x1", which reads as another number.
# Spell the exponent/index out instead: "3^2", "x_1".
_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ"
_SUBSCRIPTS = "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎"
_SUPER_RUN = re.compile(f"[{_SUPERSCRIPTS}]+")
_SUB_RUN = re.compile(f"[{_SUBSCRIPTS}]+")
# NFKC turns "1½" into "11⁄2"; keep the whole number apart from the fraction.
_DIGIT_FRACTION = re.compile("(?<=[0-9])(?=[¼½¾⅐-⅞↉])")

_POST_NFKC = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′‵", "'"),
        **dict.fromkeys("“”„‟″‶«»", '"'),
        **dict.fromkeys("‐‑‒–—―−", "-"),
        "⁄": "/",
        # Invisible characters that editors and web pages insert.
        **dict.fromkeys("\u200b\u2060\ufeff\u00ad", None),
    }
)

# The indentation markers of normalise_layout must not come from the input.
_PRIVATE_MARKS = str.maketrans(dict.fromkeys("\ue000\ue001\ue002", "\ufffd"))
# A trailing run of these is dropped, unless it follows a space ("cd ..").
_SENTENCE_PUNCT = ".?!。"

# ------------------------------------------------------------ code detection

_FENCE = re.compile(r"```(.*?)(?:```|\Z)", re.S)
_LANGUAGE_TAG = re.compile(r"[\w+#.\-]*")
# Inline code does not run over a paragraph break.
_INLINE_CODE = re.compile(r"(`+)((?:[^\n]|\n(?![ \t]*\n))+?)\1")

_LOWER = "a-zß-öø-ÿ"
_UPPER = "A-ZÀ-ÖØ-Þ"
_LETTER = r"[^\W\d_]"
# Features of a whitespace-delimited token whose letter case can carry
# meaning. Tokens without any are prose and are case-folded.
_CODE_FEATURE = re.compile(
    "|".join(
        [
            r"[_/\\=<>{}\[\]$@#|~^*&`]",  # identifiers, paths, markup, operators
            r"^-{1,2}" + _LETTER,  # command-line flags: -s, --Foo
            r"^\.[^\W\d]",  # dot files: .env, .gitignore
            r"\w[.:]+\w",  # file names, modules, std::vector, e.g.
            r"\w\(",  # calls: len(x)
            f"[{_LOWER}][{_UPPER}]",  # camelCase, iPhone, NaCl
            # Only from the first capital of a run, and without giving capitals back (a lower-case
            # letter can only follow the run's last): a long run is scanned once, not from each capital.
            f"(?<![{_UPPER}])[{_UPPER}]{{2,}}+(?!s(?:\\W|$))[{_LOWER}]",  # HTTPServer (not "APIs")
            r"\d(?!(?:st|nd|rd|th|ST|ND|RD|TH)\b)" + _LETTER,  # 10MB, x86, H2O (not 5th)
            _LETTER + r"\d",
            r"%[A-Za-z]",  # printf / strftime: %m is not %M
        ]
    )
)


# A short word right after a number is a unit, and units are case-sensitive
# (MB/Mb, MW/mW, ms/Ms), so it keeps its case.
_UNIT = re.compile(r"[A-Za-z]{1,3}[.,;:!?)]*")
_ORDINAL = re.compile(r"[(\[]*\d+(?i:st|nd|rd|th)[.,;:!?)\]]*")


def _keep_case(token: str, after_number: bool, shouting: bool) -> bool:
    """Whether a prose token's letter case can carry meaning.

    Code-like tokens (flags, identifiers, paths, letter+digit mixes) and units
    after a number always keep it. Otherwise a token keeps its case if it has
    two or more capitals (acronyms and symbols: WHO, CO, APIs), so "Co" (a
    sentence capital or cobalt) folds but "CO" does not. In a shouting prompt
    capitals carry no information, so there only tokens that mix in lower
    case on purpose (Co in "WHAT IS THE MASS OF Co") keep it.
    """
    if _CODE_FEATURE.search(token):
        return True
    if shouting:
        return any(map(str.islower, token))
    if after_number and _UNIT.fullmatch(token):
        return True
    return not _ORDINAL.fullmatch(token) and sum(map(str.isupper, token)) >= 2


def _fold_prose(text: str, shouting: bool = False) -> str:
    """Collapse whitespace and case-fold every token except case-carrying ones."""
    tokens = text.split()
    out = []
    after_number = False
    for token in tokens:
        if token.islower() or not any(map(str.isupper, token)):
            out.append(token.casefold())
        else:
            out.append(token if _keep_case(token, after_number, shouting) else token.casefold())
        after_number = token[-1].isdigit()
    joined = " ".join(out)
    # Keep one space where this prose meets inline code, a quote or JSON.
    lead = " " if text[:1].isspace() else ""
    trail = " " if text[-1:].isspace() and joined else ""
    return lead + joined + trail


def _is_shouting(text: str) -> bool:
    """Most of the prose's letters (outside code, indented lines and quotes) are capitals."""
    prose = drop_quoted(_INLINE_CODE.sub(" ", _FENCE.sub(" ", text)), " ")
    if "\n " in prose or "\n\t" in prose:  # an indented block is code: its lower case is not the prose's
        prose = "\n".join(line for line in prose.split("\n") if not line.startswith((" ", "\t")))
    upper = sum(map(str.isupper, prose))  # map: a C call a character, ~3x a generator's speed on a long prompt
    return upper >= 6 and upper >= 4 * sum(map(str.islower, prose))


def _quotes_and_prose(text: str, shouting: bool) -> str:
    """Prose with quoted strings kept verbatim (case and spaces)."""
    if '"' not in text and "'" not in text:
        return _fold_prose(text, shouting)
    out: list[str] = []
    pos = 0
    for start, end in quoted_spans(text):
        out.append(_fold_prose(text[pos:start], shouting))
        out.append(text[start:end])
        pos = end
    out.append(_fold_prose(text[pos:], shouting))
    return "".join(out)


def _prose_and_json(text: str, shouting: bool) -> str:
    """Normalise prose, re-serialising any JSON object/array found inside it."""
    if "{" not in text and "[" not in text:
        return _quotes_and_prose(text, shouting)
    out: list[str] = []
    pos = 0
    for start, end, canonical in json_spans(text):
        out.append(_quotes_and_prose(text[pos:start], shouting))
        out.append(canonical)
        pos = end
    out.append(_quotes_and_prose(text[pos:], shouting))
    return "".join(out)


def _inline_code(code: str) -> str:
    """Inline code keeps its case and its runs of spaces; a line break inside
    it (the text was re-wrapped) is one space; JSON is re-serialised."""
    canonical = try_json(code)
    if canonical is not None:
        return canonical
    if "\n" not in code:
        return code
    # re.sub(r"[ \t]*\n[ \t]*", " ", code), without the regex: from each space of a long run not followed
    # by a line break, [ \t]*\n rescans the run to its end.
    lines = code.split("\n")
    inner = (line.strip(" \t") for line in lines[1:-1])
    return " ".join([lines[0].rstrip(" \t"), *inner, lines[-1].lstrip(" \t")])


def _inline_and_prose(text: str, shouting: bool) -> str:
    text = mark_indentation(text, _protected_spans(text))
    if "`" not in text:
        return _prose_and_json(text, shouting)
    out: list[str] = []
    pos = 0
    for m in _INLINE_CODE.finditer(text):
        out.append(_prose_and_json(text[pos : m.start()], shouting))
        out.append(m.group(1) + _inline_code(m.group(2)) + m.group(1))
        pos = m.end()
    out.append(_prose_and_json(text[pos:], shouting))
    return "".join(out)


def _protected_spans(text: str) -> list[tuple[int, int]]:
    """Inline code and JSON spans: their inner lines are not indentation."""
    if "\n" not in text:
        return []
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _INLINE_CODE.finditer(text) if "`" in text else ():
        spans.extend((a, b) for a, b, _ in json_spans(text, pos, m.start()))
        spans.append(m.span())
        pos = m.end()
    spans.extend((a, b) for a, b, _ in json_spans(text, pos))
    return spans


def _fenced_block(body: str) -> str:
    """A fenced block keeps case and whitespace inside lines; indentation is
    compared as relative nesting; line endings, trailing spaces and blank
    lines go. JSON inside is re-serialised."""
    info, newline, code = body.partition("\n")
    if not newline or not _LANGUAGE_TAG.fullmatch(info.strip()):
        info, code = "", body  # ```SELECT 1``` on one line: all of it is code
    language = info.strip().casefold()
    canonical = try_json(code)
    if canonical is None:
        canonical = code_lines(code, language)
    return f" ```{language}\n{canonical}\n``` "


def _prepare(text: str) -> str:
    """Character-level normalisation: quotes, dashes, NFKC, line endings."""
    text = text.translate(_PRE_NFKC)
    if MARK_START in text or MARK_END in text or "\ue002" in text:
        text = text.translate(_PRIVATE_MARKS)
    if not text.isascii():
        text = _SUPER_RUN.sub(lambda m: "^" + m.group(), text)
        text = _SUB_RUN.sub(lambda m: "_" + m.group(), text)
        text = _DIGIT_FRACTION.sub(" ", text)
        text = unicodedata.normalize("NFKC", text).translate(_POST_NFKC)
    return text.replace("\r\n", "\n").replace("\r", "\n")


# System prompts and earlier turns repeat on every call of a conversation, so
# results are cached; very long texts are not, to bound the cache's memory.
_CACHE_MAX_CHARS = 32_768


def normalise_text(text: str) -> str:
    """The form of ``text`` that the normalised fingerprint hashes.

    Rules, in order: curly quotes, primes and dashes become ASCII; NFKC (so
    NFC/NFD and full-width forms agree) with superscripts kept as ``^2``;
    fenced code blocks keep case and indentation (JSON inside is
    re-serialised); inline code keeps case; JSON objects/arrays in prose are
    re-serialised with sorted keys; prose is case-folded except code-like
    tokens (flags, identifiers, paths, file names, letter+digit mixes);
    whitespace runs collapse to one space; a trailing run of ``.?!`` goes.
    """
    if len(text) <= _CACHE_MAX_CHARS:
        return _normalise_cached(text)
    return _normalise(text)


@lru_cache(maxsize=2048)
def _normalise_cached(text: str) -> str:
    return _normalise(text)


def _normalise(text: str) -> str:
    text = _prepare(text)
    shouting = _is_shouting(text)
    if "```" in text:
        out: list[str] = []
        pos = 0
        for m in _FENCE.finditer(text):
            out.append(render_marks(_inline_and_prose(text[pos : m.start()], shouting)))
            out.append(_fenced_block(m.group(1)))
            pos = m.end()
        out.append(render_marks(_inline_and_prose(text[pos:], shouting)))
        pieces = [p.strip(" ") for p in out]
        result = " ".join(p for p in pieces if p)
    else:
        result = render_marks(_inline_and_prose(text, shouting)).strip(" ")
    return _drop_trailing_punctuation(result)


def _drop_trailing_punctuation(text: str) -> str:
    """Drop a final run of ``.?!`` unless it stands alone ("cd ..", "???")."""
    stripped = text.rstrip(_SENTENCE_PUNCT)
    if stripped and stripped != text and not stripped[-1].isspace():
        return stripped
    return text


# ------------------------------------------------------------ volatile values

_HEX = "[0-9a-fA-F]"
VOLATILE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # (placeholder, pattern). Order matters: a UUID inside an id is a UUID.
    (
        "<uuid>",
        re.compile(rf"(?<![0-9A-Za-z]){_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}(?![0-9A-Za-z])"),
    ),
    # ISO-8601 with a time of day. A plain date is not volatile: it changes answers.
    (
        "<datetime>",
        re.compile(
            r"\d{4}(?<!\d{5})(?:"  # four digits not preceded by a digit
            # "T" marks a machine timestamp. With a space, seconds are required:
            # "2024-03-01 19:00" is more likely a booking than a log stamp.
            r"-\d{2}-\d{2}(?:[Tt]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?|[ ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)"
            r"(?!\d)(?:[Zz]|[+-]\d{2}(?::?\d{2})?(?!\d))?"
            r"|\d{4}T\d{6}(?:[.,]\d+)?(?:Z|[+-]\d{4})?(?!\d))"
        ),
    ),
    # Request, trace and message ids: a known prefix, "_" or "-", then six or
    # more id characters with a digit (req_8f3a9c21, msg_01XF..., call_...), all
    # digits included (req_52358902): the prefix is what makes it an id. A number
    # without one (order 52358902, order-123456) is kept: numbers change answers.
    (
        "<id>",
        re.compile(
            r"(?<![0-9A-Za-z])(?i:req|request|requestid|trace|traceid|span|spanid|msg|run|call|chatcmpl|"
            r"cmpl|resp|rs|fc|evt|sess|session|corr|correlation|idem|idempotency|toolu|srvtoolu|batch|"
            r"thread|asst|txn)[_-](?=[0-9A-Za-z]*[0-9])[0-9A-Za-z]{6,}(?![0-9A-Za-z])"
        ),
    ),
    # Bare trace ids and hashes: 16+ hex characters holding both a digit and a
    # letter (an all-digit run is a number and numbers change answers).
    (
        "<id>",
        re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{16,}(?![0-9A-Za-z])"),
    ),
)


# Cheap literal-led searches that must succeed before the matching full
# pattern is worth running (most prompts hold no volatile value at all).
_PROBES: tuple[re.Pattern[str], ...] = (
    re.compile(rf"-{_HEX}{{4}}-{_HEX}{{4}}-"),
    re.compile(r"-\d\d[Tt ]\d\d:|T\d{6}"),
    re.compile(r"[_-](?=[0-9A-Za-z]*[0-9])[0-9A-Za-z]{6}"),
    re.compile(r"[0-9a-fA-F]{16}"),
)


@lru_cache(maxsize=256)
def _compile_cached(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"invalid scrub pattern {pattern!r}: {e}") from None
        if rx.fullmatch(""):
            raise ValueError(f"invalid scrub pattern {pattern!r}: it matches the empty string")
        compiled.append(rx)
    return tuple(compiled)


def compile_scrub_patterns(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    """Compile per-project scrub regexes; ValueError names the bad pattern."""
    return _compile_cached(tuple(patterns))


# The value of a key that names a request or trace id, whatever the value looks like
# ("request_id: 12345678", '"traceId": "0193a7"', "x-request-id=98765432"): the key says it
# is an id. Other keys ("order_id: 52358902") are left alone.
_KEYED_ID = re.compile(
    r"(?i)(?<![0-9A-Za-z])((?:x-)?(?:amzn-)?(?:parent[_-]?)?(?:request|req|trace|span|run|correlation|corr|"
    r"idempotency)[_-]?(?:id|key))([\"']?\s*[:=]\s*[\"']?)(?=[0-9A-Za-z_-]*[0-9])[0-9A-Za-z_-]{6,}(?![0-9A-Za-z])"
)
_KEYED_ID_PROBE = re.compile(r"(?i)(?:id|key)[\"']?\s*[:=]")


def scrub_volatile(text: str, extra_patterns: Sequence[str] = ()) -> str:
    """Replace values that differ on every run with placeholders.

    Per-project patterns run first (they are written against the raw prompt)
    and become ``<scrubbed>``; then the values of request/trace id keys, UUIDs,
    timestamps with a time of day and request/trace ids become ``<id>``,
    ``<uuid>``, ``<datetime>`` and ``<id>``.
    """
    for rx in compile_scrub_patterns(extra_patterns):
        text = rx.sub("<scrubbed>", text)
    if _KEYED_ID_PROBE.search(text):
        text = _KEYED_ID.sub(r"\1\2<id>", text)
    for (placeholder, rx), probe in zip(VOLATILE_PATTERNS, _PROBES):
        if probe.search(text):
            text = rx.sub(placeholder, text)
    return text


# ------------------------------------------------------------ words

_WORD = re.compile(r"\w+")
# Scripts written without spaces: one token per character, so word overlap
# still works (Hangul is spaced, so it stays as words). Kana and Han only, not
# Thai: see semula.core.text for why the lexical words keep that subset.
_CJK_SPLIT = re.compile(f"[{CJK_RANGES}]|[^{CJK_RANGES}]+")


def words(text: str, scrub_patterns: Sequence[str] = ()) -> list[str]:
    """Lowercased ``\\w+`` words of the normalised, scrubbed text (for the lexical tier)."""
    prepared = normalise_text(scrub_volatile(text, scrub_patterns)).lower()
    out: list[str] = []
    for word in _WORD.findall(prepared):
        if CJK_CHAR.search(word):
            out.extend(_CJK_SPLIT.findall(word))
        else:
            out.append(word)
    return out
