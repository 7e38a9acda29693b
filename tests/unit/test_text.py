"""The shared text helpers: shortening, Dice, common prefix/suffix, unspaced scripts."""

from __future__ import annotations

from collections import Counter

import pytest

from semula.core.text import (
    CJK_CHAR,
    UNSPACED_CHAR,
    common_prefix,
    common_suffix,
    dice,
    dice_counts,
    overlap,
    shorten,
)


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("", 10, ""),
        ("short", 10, "short"),
        ("exactly10!", 10, "exactly10!"),
        ("eleven char", 10, "eleven ch…"),
        ("  many \n\t spaces  ", 20, "many spaces"),
        ("a\nb\nc", 3, "a …"),  # "a b c" is 5 long: 2 characters and the ellipsis
        ("abcdef", 1, "…"),
        ("日本語のテキスト", 4, "日本語…"),
    ],
)
def test_shorten(text: str, width: int, expected: str) -> None:
    assert shorten(text, width) == expected
    assert len(shorten(text, width)) <= width


def test_shorten_default_width_is_the_review_queue_s() -> None:
    assert shorten("x" * 60) == "x" * 60
    assert shorten("x" * 61) == "x" * 59 + "…"


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([], [], 0.0),
        (["a"], [], 0.0),
        ([], ["a"], 0.0),
        (["a", "b"], ["a", "b"], 1.0),
        (["a", "b"], ["b", "a"], 1.0),
        (["a", "b"], ["c", "d"], 0.0),
        (["a", "b"], ["a", "c"], 0.5),
        (["a", "a", "b"], ["a", "b"], 0.8),  # multisets: the second "a" is unmatched
        (["a", "a"], ["a"], 2 / 3),
        ("open on weekdays closed on weekends".split(), "open on weekends closed on weekdays".split(), 1.0),
    ],
)
def test_dice(a: list[str], b: list[str], expected: float) -> None:
    assert dice(a, b) == pytest.approx(expected)
    assert dice(b, a) == dice(a, b)
    assert dice_counts(Counter(a), len(a), Counter(b), len(b)) == dice(a, b)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("", "", 0),
        ("a", "", 0),
        ("a b", "a b", 2),
        ("a a b", "a b b", 2),
        ("x y", "z", 0),
    ],
)
def test_overlap(a: str, b: str, expected: int) -> None:
    assert overlap(Counter(a.split()), Counter(b.split())) == expected


@pytest.mark.parametrize(
    ("a", "b", "prefix", "suffix"),
    [
        ("", "", 0, 0),
        ("abc", "", 0, 0),
        ("abc", "abc", 3, 3),
        ("abcX", "abcY", 3, 0),
        ("Xabc", "Yabc", 0, 3),
        ("abXcd", "abYYcd", 2, 2),
        ("abc", "abcd", 3, 0),
        ("aaa", "aaaa", 3, 3),  # alone each may cover the shorter text: pass a limit to keep them apart
        ("x" * 10_000 + "1" + "y" * 500, "x" * 10_000 + "2" + "y" * 500, 10_000, 500),
    ],
)
def test_common_prefix_and_suffix(a: str, b: str, prefix: int, suffix: int) -> None:
    assert common_prefix(a, b) == prefix == common_prefix(b, a)
    assert common_suffix(a, b) == suffix == common_suffix(b, a)


@pytest.mark.parametrize(
    ("a", "b", "limit", "expected"),
    [
        ("aaa", "aaaa", 0, 0),
        ("aaa", "aaaa", 1, 1),
        ("abcd", "abcd", 2, 2),
        ("abXcd", "abYcd", 5, 2),  # the limit caps, it never extends
    ],
)
def test_common_suffix_limit(a: str, b: str, limit: int, expected: int) -> None:
    assert common_suffix(a, b, limit) == expected


@pytest.mark.parametrize(
    ("char", "cjk", "unspaced"),
    [
        ("ひ", True, True),  # hiragana
        ("カ", True, True),  # katakana
        ("日", True, True),  # Han
        ("㐀", True, True),  # Han extension A
        ("豈", True, True),  # compatibility ideograph
        ("\U00020000", True, True),  # Han extension B
        ("ก", False, True),  # Thai: unspaced, but not in the lexical words' subset
        ("한", False, False),  # Hangul is written with spaces
        ("a", False, False),
        ("é", False, False),
        ("ع", False, False),  # Arabic is spaced
    ],
)
def test_character_classes(char: str, cjk: bool, unspaced: bool) -> None:
    assert bool(CJK_CHAR.fullmatch(char)) is cjk
    assert bool(UNSPACED_CHAR.fullmatch(char)) is unspaced
