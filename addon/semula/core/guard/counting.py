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


def _counted_changes(a: Analysis, changed: frozenset[int]) -> list[tuple[int, str]]:
    """(position after the number, the number with its counted words) for each changed counted word."""
    judged = covered(a, ("number", "weak_number", "unit", "date"))  # the number, unit and date checks' own
    out = []
    for f in a.features["number"]:
        after = _after(a, f.end)
        for position, i in enumerate(after):
            if i in changed and i not in judged:
                out.append((position, " ".join([f.text, *(a.cores[j] for j in after)])))
    return out


def counted_differs(d: TextDiff) -> str | None:
    """The word right after a number (that is the same on both sides: a changed number is
    `numbers_differ`'s) changed, or a word was added or dropped right after that one: the unit or
    what is counted changed ("12 imperial fluid ounces", "300 milhas náuticas"). A word further on
    replaced on both sides ("13 considered as / unlucky") is the sentence, not the count."""
    stored = _counted_changes(d.stored, d.stored_changed)
    incoming = _counted_changes(d.incoming, d.incoming_changed)
    first = [t for p, t in stored if p == 0], [t for p, t in incoming if p == 0]
    second = [t for p, t in stored if p > 0], [t for p, t in incoming if p > 0]
    if first[0] or first[1]:
        found = first
    elif bool(second[0]) != bool(second[1]):
        found = second
    else:
        return None
    a, b = (found[0][0] if found[0] else None), (found[1][0] if found[1] else None)
    if a is not None and b is not None:
        return f"counted: '{a}'→'{b}'"
    return f"counted: '{a if a is not None else b}' changed in {'stored' if a is not None else 'incoming'}"


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
    """A list with items added or removed: bullet lines, or an inline comma list. Only a list on both
    sides counts: a list on one side only is the same items said in prose (other checks see them)."""
    (stored_bullets, stored_inline), (incoming_bullets, incoming_inline) = (
        list_items(d.stored.text), list_items(d.incoming.text))
    if stored_bullets and incoming_bullets and stored_bullets != incoming_bullets:
        return f"list: {stored_bullets}≠{incoming_bullets} bullet items"
    if stored_inline and incoming_inline and sum(stored_inline) != sum(incoming_inline):
        return f"list: {sum(stored_inline)}≠{sum(incoming_inline)} items"
    return None
