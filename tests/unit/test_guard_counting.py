"""core.guard.counting: what a number counts, and how many items a list holds (no word list needed)."""

from __future__ import annotations

import pytest

from semula.core.guard import guard
from semula.core.guard.counting import list_items


@pytest.mark.parametrize("stored, incoming, reason", [
    ("Quantas horas leva percorrer 300 milhas a 20 nós?", "Quantas horas leva percorrer 300 milhas náuticas a 20 nós?",
     "counted: '300 milhas náuticas' changed in incoming"),
    ("Convert 12 fluid ounces to millilitres.", "Convert 12 imperial fluid ounces to millilitres.",
     "counted: '12 imperial fluid' changed in incoming"),
    ("Wie viel kosten 3 Liter Milch im Laden?", "Wie viel kosten 3 Liter frische Milch im Laden?", "counted:"),
    ("Sort alphabetically: pear, quince, apricot, fig", "Sort alphabetically: pear, quince, apricot, fig, kiwi",
     "list: 4≠5 items"),
    ("Urutkan: gajah, kucing, semut", "Urutkan: gajah, kucing, semut, tikus", "list: 3≠4 items"),
    ("Compare:\n- tea\n- coffee", "Compare:\n- tea\n- coffee\n- cocoa", ""),  # the symbol check's first

])
def test_refused(stored: str, incoming: str, reason: str) -> None:
    refused = guard(stored, incoming)
    assert refused is not None and refused.startswith(reason)


@pytest.mark.parametrize("stored, incoming", [
    ("List three fruits, please.", "Please list three fruits."),  # not across punctuation
    ("How do I get fit at 40?", "How can I get fit at 40?"),
    ("Is 5% enough", "Is 5 percent enough"),  # the unit check's own: equal
    ("Compare:\n- Postgres\n- SQLite", "Compare:\n\n  - Postgres\n  - SQLite"),  # re-indented, same items
])
def test_passed(stored: str, incoming: str) -> None:
    assert guard(stored, incoming) is None


def test_list_items() -> None:
    assert list_items("Sort: a, b, c. Then: x, y") == (0, (3,))
    assert list_items("- a\n* b\n3) c\nnot a bullet") == (3, ())
    assert list_items("Well, this is a long clause with many words, and another one") == (0, ())
