"""Two guard checks that need no word list: what a number counts, and how many items a list holds.

Each language table knows its units, but not every qualifier that changes one ("milhas" / "milhas
náuticas", "fluid ounces" / "imperial fluid ounces"), and no table can know that one more item in
"sort: pear, quince, fig" asks a different question. Both show in the text's layout instead: a word
added, removed or changed right after a number changes what is counted; a list with one item more
or fewer is another list. Issue 38 found both served by the embedding tier at 0.9.
"""

from __future__ import annotations

import re

from semula.core.guard.diff import TextDiff
from semula.core.guard.tokens import Analysis, covered

__all__ = ["counted_differs", "list_items_differ"]

# The words after a number that say what it counts ("300 nautical miles", "12 imperial fluid ounces").
COUNTED_WORDS = 2


_BREAK = re.compile(r"[,.;:!?()\[\]{}\n，。；：！？、]")


def _after(a: Analysis, end: int) -> list[int]:
    """The tokens after a number up to `COUNTED_WORDS`, not across punctuation ("three fruits, please")."""
    out: list[int] = []
    for i in range(end, min(end + COUNTED_WORDS, len(a.keys))):
        if i > 0:
            core = a.cores[i - 1]
            at = a.text.find(core, a.starts[i - 1])
            gap_from = at + len(core) if at >= 0 else a.starts[i - 1]
            if _BREAK.search(a.text, gap_from, a.starts[i]):
                break
        out.append(i)
    return out


def _counted_changes(a: Analysis, changed: frozenset[int]) -> str | None:
    judged = covered(a, ("number", "weak_number", "unit", "date"))  # the number, unit and date checks' own
    for f in a.features["number"]:
        after = _after(a, f.end)
        if any(i in changed and i not in judged for i in after):
            return " ".join([f.text, *(a.cores[i] for i in after)])
    return None


def counted_differs(d: TextDiff) -> str | None:
    """A word changed within two words after a number that is the same on both sides (a changed
    number is `numbers_differ`'s): the unit or what is counted changed."""
    stored = _counted_changes(d.stored, d.stored_changed)
    incoming = _counted_changes(d.incoming, d.incoming_changed)
    if stored is None and incoming is None:
        return None
    if stored is not None and incoming is not None:
        return f"counted: '{stored}'→'{incoming}'"
    return f"counted: '{stored if stored is not None else incoming}' changed in {'stored' if stored else 'incoming'}"


_BULLET = re.compile(r"^[ \t]*(?:[-*+•◦▪]|\d{1,3}[.)])[ \t]+\S", re.M)
_CLAUSE = re.compile(r"[.!?;:。！？；\n]")
_ITEM_WORDS = 4  # an inline list's items are short: "pear", "New York", "the red one"


def list_items(text: str) -> tuple[int, tuple[int, ...]]:
    """(bullet lines, items of each inline comma list of three or more short items)."""
    inline = []
    for clause in _CLAUSE.split(text):
        pieces = [p.split() for p in re.split(r"[,，、]", clause)]
        if len(pieces) >= 3 and all(0 < len(p) <= _ITEM_WORDS for p in pieces[1:-1]):
            inline.append(len(pieces))
    return len(_BULLET.findall(text)), tuple(inline)


def list_items_differ(d: TextDiff) -> str | None:
    """A list with items added or removed: bullet lines, or an inline comma list."""
    (stored_bullets, stored_inline), (incoming_bullets, incoming_inline) = (
        list_items(d.stored.text), list_items(d.incoming.text))
    if stored_bullets != incoming_bullets:
        return f"list: {stored_bullets}≠{incoming_bullets} bullet items"
    if stored_inline != incoming_inline and sum(stored_inline) != sum(incoming_inline):
        return f"list: {sum(stored_inline)}≠{sum(incoming_inline)} items"
    return None
