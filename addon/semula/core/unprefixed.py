"""Find secrets that carry no prefix: AWS secret access keys and STS session tokens.

A prefixed key (``sk-…``, ``AKIA…``) announces itself; an AWS secret access key is 40 characters of
the base64 alphabet and nothing else, so it is found by its context instead:

- **a label** before it (``aws_secret_access_key=``, ``"SecretAccessKey": "``, ``AWS_SESSION_TOKEN:``,
  ``X-Amz-Security-Token:``; any case, ``_ - .`` or nothing between the words, ``=``/``:``/``=>``
  and quotes around): the value is a secret whatever its shape, from 16 characters;
- **an access key id** (``AKIA…``/``ASIA…``) within ``NEAR_ID_CHARS`` of an isolated 40-character run
  (a credentials CSV, a log line): the run is the secret;
- **its shape** alone: an isolated run of exactly 40 characters of ``[A-Za-z0-9/+]`` holding upper
  and lower case letters and a digit, not hexadecimal, with a Shannon entropy of at least
  ``ENTROPY_BITS`` bits per character.

An STS session token is found by its own start (``IQoJb3JpZ2lu``, ``FwoGZXIvYXdz``, ``AQoDYXdz``: the
base64 of its binary header) followed by 60+ base64 characters, or by a label.

Why the shape rule leaves the rest alone: a run must be bounded by characters outside the base64
alphabet (and not by ``_``, ``-`` or ``=``), so the inside of an image or audio data URL, a PEM line or
a longer token never matches (changing those would change the bytes a request replays); the last
line of line-wrapped base64 is skipped too. Git SHAs are hex. Words, paths and camel-case names
(``BetaAsyncAbstractComputerToolset20260801``, ``com/HypothesisWorks/hypothesis/pull/4266``) reach
4.3-4.7 bits, as random keys do, so entropy alone can't tell them apart; their many neighbouring
lowercase letters do (17+ pairs; a random key has 6 on average). Measured: no string of the prompt
corpora (tests/data, /work/shared/corpus: 122k strings) changes; over every Python file of a
virtualenv (157 MB) the only match is one opaque random continuation token; ~0.5 % of random keys
are missed (no digit, or many lowercase pairs). tests/unit/test_unprefixed.py checks both sides.

Pure and linear: each pattern is a fixed-width or single-class run, so no input backtracks; the
caller (core.redact) supplies the placeholder, so fingerprints get keyed tags and logs ``[REDACTED]``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from typing import AnyStr

__all__ = ["ENTROPY_BITS", "MAX_LOWER_PAIRS", "NEAR_ID_CHARS", "has_access_key_id", "is_key_shaped",
           "is_secret_label", "looks_random", "redact_unprefixed", "runs_near_ids", "secret_label_value"]

# Random 40-character keys: entropy median 4.78 bits per character, 99.99 % above 4.2; 15 or fewer
# lowercase pairs 99.6 % (mean 6.4). Words, paths and camel-case names have 17+ such pairs.
ENTROPY_BITS = 4.2
MAX_LOWER_PAIRS = 15
NEAR_ID_CHARS = 256  # how far from an access key id a 40-character run counts as its secret

def _anycase(word: str) -> str:
    # [Ss][Ee]… rather than (?i:…): a pattern that starts with a plain class is searched ~10x faster.
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


_SEP = r"[_\-. ]?"
_LABEL = (rf"{_anycase('se')}(?:{_anycase('cret')}{_SEP}(?:{_anycase('access')}{_SEP})?{_anycase('key')}"
          rf"|{_anycase('ssion')}{_SEP}{_anycase('token')}|{_anycase('curity')}{_SEP}{_anycase('token')})"
          rf"|(?<={_anycase('aws')}){_anycase('secret')}|(?<={_anycase('aws')}[_\-. ]){_anycase('secret')}")
_LABEL_WORDS = ("secret", "session", "security")
# Quotes (escaped too, in a JSON string inside JSON), spaces, then = : => := and quotes again.
_ASSIGN = r"""[\\"'`]{0,3}[ \t]{0,8}(?:=>|:=|[:=])[ \t\r\n]{0,8}[\\"'`]{0,3}"""
_VALUE_CHAR = r"(?:[A-Za-z0-9/+]|%2[BbFf])"  # %2B %2F: a token quoted in a URL
_VALUE = rf"{_VALUE_CHAR}{{16,}}(?:={{1,2}}|%3[Dd]){{0,2}}"
_STS_STARTS = ("IQoJb3JpZ2lu", "FwoGZXIvYXdz", "AQoDYXdz")  # base64 of the token's binary header
_STS = rf"(?<![A-Za-z0-9/+])(?:{'|'.join(_STS_STARTS)}){_VALUE_CHAR}{{60,}}(?:={{1,2}}|%3[Dd]){{0,2}}"
_RUN = r"(?<![A-Za-z0-9/+_\-])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_\-])"
_ACCESS_KEY_ID = r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"  # as core.redact finds them


def _both(pattern: str) -> tuple[re.Pattern[str], re.Pattern[bytes]]:
    return re.compile(pattern), re.compile(pattern.encode())


def _for(patterns: tuple[re.Pattern[str], re.Pattern[bytes]], s: AnyStr) -> re.Pattern[AnyStr]:
    """The pattern of `s`'s type."""
    return patterns[1] if isinstance(s, bytes) else patterns[0]


_STSS = _both(_STS)
_LABELLED = _both(rf"(?P<label>(?:{_LABEL}){_ASSIGN})(?P<value>{_VALUE})")
_ISOLATED = _both(_RUN)
_IDS = re.compile(_ACCESS_KEY_ID)
_RUNS = _ISOLATED[0]
_LABEL_ONLY = re.compile(rf"(?:{_LABEL})\Z")
_VALUE_ONLY = re.compile(_VALUE)
_HEX = re.compile(r"[0-9A-Fa-f]+")
_KEY_SHAPE = re.compile(r"[A-Za-z0-9/+]{40}")
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_SHORTEST = 16  # a labelled value's least length; a run is 40
_WRAP_WIDTH = 60  # MIME wraps base64 at 76, PEM at 64: a full line before means a wrapped block
_LINE_BREAKS = ("\n", "\r", "\\n", "\\r")


def looks_random(run: str) -> bool:
    """An isolated 40-character run shaped like a generated key: mixed case, a digit, not hex, high entropy."""
    if _HEX.fullmatch(run) or run.isdigit():
        return False
    if not (any(c.islower() for c in run) and any(c.isupper() for c in run) and any(c.isdigit() for c in run)):
        return False
    return _entropy(run) >= ENTROPY_BITS and _lower_pairs(run) <= MAX_LOWER_PAIRS


def _lower_pairs(run: str) -> int:
    """Neighbouring lowercase letters: words (``Toolset``, ``/hypothesis/``) have many, random keys few."""
    return sum(1 for a, b in zip(run, run[1:]) if a.islower() and b.islower())


def _entropy(run: str) -> float:
    n = len(run)
    return -sum(k / n * math.log2(k / n) for k in Counter(run).values())


def has_access_key_id(text: str) -> bool:
    """`text` holds an AWS access key id (``AKIA…`` long-term, ``ASIA…`` temporary)."""
    return ("AKIA" in text or "ASIA" in text) and _IDS.search(text) is not None


def is_key_shaped(value: str) -> bool:
    """`value` is exactly 40 characters of a secret access key's alphabet, and not hex (a git SHA)."""
    return _KEY_SHAPE.fullmatch(value) is not None and _HEX.fullmatch(value) is None


def is_secret_label(name: str) -> bool:
    """A JSON key or header name that says its value is an AWS secret (``SecretAccessKey``, ``aws_session_token``)."""
    return _LABEL_ONLY.search(name) is not None


def secret_label_value(value: str) -> bool:
    """A value under such a label that is redacted: 16+ characters of a key's alphabet, nothing else."""
    return _VALUE_ONLY.fullmatch(value) is not None


def _wrapped(text: str, start: int) -> bool:
    """The run is the last line of line-wrapped base64 (an attachment, a PEM block): not a key."""
    end = start
    for _ in range(2):
        for brk in _LINE_BREAKS:
            if text.endswith(brk, 0, end):
                end -= len(brk)
                break
    if end == start or end < _WRAP_WIDTH:
        return False
    return all(c in _B64_CHARS for c in text[end - _WRAP_WIDTH:end])


def runs_near_ids(s: AnyStr) -> frozenset[str]:
    """The isolated 40-character runs within `NEAR_ID_CHARS` of an access key id in `s` (ASCII text).

    Taken from the text before any other redaction replaces the ids, then handed to `redact_unprefixed`."""
    text = s.decode("latin-1") if isinstance(s, bytes) else s
    if "AKIA" not in text and "ASIA" not in text:
        return frozenset()
    ids = [m.start() for m in _IDS.finditer(text)]
    if not ids:
        return frozenset()
    near = set()
    for m in _RUNS.finditer(text):
        i = bisect_left(ids, m.start() - NEAR_ID_CHARS)
        if i < len(ids) and ids[i] <= m.end() + NEAR_ID_CHARS and not _HEX.fullmatch(m.group()):
            near.add(m.group())
    return frozenset(near)


def redact_unprefixed(s: AnyStr, placeholder: Callable[[AnyStr], AnyStr],
                      near_ids: frozenset[AnyStr] = frozenset()) -> AnyStr:
    """`s` with each unprefixed secret replaced by ``placeholder(secret)`` (a label is kept).

    `near_ids` are the runs `runs_near_ids` found beside an access key id: secrets whatever their
    entropy. Three passes, the first two only when a cheap substring test says they can match."""
    if len(s) < _SHORTEST:  # most strings of a JSON body (roles, model names) cannot hold one
        return s
    # The latin-1 view is for the substring and shape checks (the patterns are ASCII); substitution is on `s`.
    text = _latin1(s)
    if any(start in text for start in _STS_STARTS):
        s = _for(_STSS, s).sub(lambda m: placeholder(m.group()), s)
    lowered = text.lower()
    if any(word in lowered for word in _LABEL_WORDS):
        s = _for(_LABELLED, s).sub(lambda m: m.group("label") + placeholder(m.group("value")), s)
    view = _latin1(s)

    def run(m: re.Match[AnyStr]) -> AnyStr:
        candidate = view[m.start():m.end()]
        if m.group() in near_ids or (looks_random(candidate) and not _wrapped(view, m.start())):
            return placeholder(m.group())
        return m.group()

    return _for(_ISOLATED, s).sub(run, s)


def _latin1(s: str | bytes) -> str:
    return s.decode("latin-1") if isinstance(s, bytes) else s
