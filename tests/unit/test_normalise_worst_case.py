"""Hostile prompt texts normalise in time linear in their size (issue 34: a hostile request never stalls the proxy).

Each shape below made one scan restart from nearly every character: before, normalising it took
minutes at these sizes (a text of "{" took 145 s at 512 KB; " 'a" repeated, a run of capitals or
a long run of spaces in inline code, hours). Each now takes about a second. The bound is a
generous timeout, not a measured time: it fails before by orders of magnitude and passes after.
The thread method ends a case stuck inside a regex, which a signal cannot interrupt.

The outputs are pinned elsewhere (the fingerprint and corpus tests); here, equality with the
regexes the linear code stands in for, on texts small enough for the regexes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest

from semula.core.request import normalise_layout
from semula.core.request.normalise import normalise_text, scrub_volatile
from semula.core.request.normalise_layout import QUOTED, drop_quoted, json_spans, quoted_spans

KB = 1024


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


SHAPES: dict[str, Callable[[int], str]] = {
    "braces": lambda n: "{" * n,
    "brackets": lambda n: "[" * n,
    "nested objects": lambda n: _repeat('{"a":', n),
    "nested arrays": lambda n: _repeat("[1,", n),
    "arrays failing after a value": lambda n: _repeat("[1 x", n),
    "string of brackets": lambda n: '["' + "[" * n,
    "double quotes": lambda n: '"' * n,
    "single quotes": lambda n: "'" * n,
    "unclosed double quotes": lambda n: _repeat('" a', n),
    "unclosed single quotes": lambda n: _repeat(" 'a", n),
    "single quotes over lines": lambda n: _repeat("'a\n", n),
    "unbalanced quotes": lambda n: _repeat('say "hello there\n', n),
    "newlines": lambda n: "\n" * n,
    "deep indentation": lambda n: "".join(" " * (i % 40) + "x = 1\n" for i in range(n // 20 + 1))[:n],
    "digits": lambda n: "7" * n,
    "unicode escapes": lambda n: _repeat('"\\u00e9', n),
    "key: value lines": lambda n: _repeat("request_id: abc\nkey: value\n", n),
    "one huge line": lambda n: _repeat("word ", n),
    "capitals": lambda n: "A" * n,
    "inline code over spaces": lambda n: "`a" + " " * n + "b`",
    "inline code lines": lambda n: _repeat("` a\n", n),
    "quoted spaces beside indentation": lambda n: 'x\n  y\n"a' + " " * n + 'b"',
    "mixed": lambda n: _repeat('{"a": [1, "b\n  c", \'d\'], `x` req_12345678 2024-01-01T00:00:00Z ', n),
}
# The JSON shapes were slow per attempt rather than quadratic alone: a bigger text shows it.
SIZE = {"nested objects": 1024 * KB, "nested arrays": 1024 * KB, "brackets": 1024 * KB}


@pytest.mark.slow
@pytest.mark.timeout(90, method="thread")
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_hostile_text_normalises_in_linear_time(shape: str) -> None:
    text = SHAPES[shape](SIZE.get(shape, 512 * KB))
    assert isinstance(normalise_text(scrub_volatile(text)), str)


def test_json_search_spends_a_bounded_budget_then_treats_the_rest_as_prose() -> None:
    """Past the budget no further span is sought: deterministic, and only for built text."""
    hostile = "[" * (256 * KB) + " [1, 2]"
    assert json_spans(hostile) == []
    assert json_spans("[" * 200 + " [1, 2]") == [(201, 207, "[1,2]")]


def test_real_json_in_prose_is_found_whatever_its_size() -> None:
    value = '{"items": [' + ", ".join(f'{{"id": {i}, "name": "n{i}"}}' for i in range(20_000)) + "]}"
    text = f"Here it is: {value} and [1, 2] after."
    spans = json_spans(text)
    assert [(a, b) for a, b, _ in spans] == [(12, 12 + len(value)), (len(text) - 13, len(text) - 7)]


def _random_text(rng: random.Random) -> str:
    pieces = ["a", "A", " ", "'", '"', "`", "{", "}", "[", "]", ":", ",", "\n", "\t", "1", "-", "x", "É",
              '"a"', "'b'", '{"k": [1, 2]}', "\n\n", "    ", "HTTPServer", " it's ", "true", "[1,", '{"a":']
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 50)))


def test_quoted_spans_are_the_regex_matches() -> None:
    rng = random.Random(34)
    for _ in range(20_000):
        text = _random_text(rng)
        assert quoted_spans(text) == [m.span() for m in QUOTED.finditer(text)], text
        assert drop_quoted(text, " ") == QUOTED.sub(" ", text), text


def _json_spans_unbounded(text: str) -> list[tuple[int, int, str]]:
    """The search as it was: raw_decode on the whole text at every "{" or "["."""
    spans, pos = [], 0
    while (m := re.compile(r"[\[{]").search(text, pos)) is not None:
        try:
            value, stop = normalise_layout._DECODER.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            pos = m.start() + 1
            continue
        spans.append((m.start(), stop, normalise_layout.canonical_json_text(value)))
        pos = stop
    return spans


@pytest.mark.slow
@pytest.mark.parametrize("window", [1, 7, 256])
def test_json_spans_through_windows_are_the_whole_text_decodes(window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(normalise_layout, "_FIRST_WINDOW", window)  # tiny windows: every boundary is crossed
    rng = random.Random(window)
    for _ in range(3000):
        text = _random_text(rng) * rng.randint(1, 4)
        assert json_spans(text) == _json_spans_unbounded(text), text
