"""Which tokens changed between a stored text and an incoming one.

The guard looks only at what changed, so this is where its cost is kept down:
long texts are cut to their differing middle before tokenising, and texts that
differ too widely are given up on before any analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cached_property

from semula.core.guard.features import analyse
from semula.core.guard.tokens import Analysis, Feature, core_words, prepare
from semula.core.text import common_prefix, common_suffix

__all__ = ["MAX_CHANGED_TOKENS", "TextDiff", "text_diff"]

# Beyond this many changed words per side the diff is not analysed (the guard
# refuses): no near-match is that far apart, and the guard must stay fast.
MAX_CHANGED_TOKENS = 4000
# Longer texts are cut to their differing middle plus context before
# tokenising, so a 1 MB prompt with one changed word costs little.
# The margin must exceed the longest feature (a quote: 150 characters) so that
# every feature touching a change lies wholly inside the window.
_TRIM_MARGIN_CHARS = 160
_TRIM_ABOVE_CHARS = 4 * _TRIM_MARGIN_CHARS


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
            frozenset(w for i in self.stored_changed for w in core_words(self.stored.keys[i])),
            frozenset(w for i in self.incoming_changed for w in core_words(self.incoming.keys[i])),
        )


def _touches(f: Feature, changed: frozenset[int]) -> bool:
    return f.start in changed if f.end == f.start + 1 else not changed.isdisjoint(range(f.start, f.end))



def _windows(a: str, b: str) -> tuple[str, str]:
    """Long texts shrink to the part that differs plus context for dates, names
    and sentence starts. Both are cut at the same offsets from their ends, so
    the kept context (even a cut word) is identical on both sides."""
    if len(a) + len(b) <= _TRIM_ABOVE_CHARS:
        return a, b
    prefix = common_prefix(a, b)
    suffix = common_suffix(a, b, min(len(a), len(b)) - prefix)
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
    a, b = analyse(prepare(a_text)), analyse(prepare(b_text))
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
