"""The hard guard: refuse a near-match whose changed words carry the answer.

A word-overlap or embedding score cannot tell "120 rooms" from "220 rooms",
"open on weekdays" from "open on weekends", or ``-s`` from ``-S``: the
sentence is the same, the answer is not. So every near-match (lexical now,
embedding later) must also pass this guard, whatever its score.

The guard diffs the two texts word by word (prose compared case-insensitively;
code, flags and identifiers case-sensitively) and looks only at what changed.
Each check is a small named function over that diff returning ``None`` or a
reason such as ``"number 120≠220"``; :func:`guard` returns the first reason.
Spelled-out and digit numbers compare by value ("five ideas" = "5 ideas").

It errs towards refusing: a refusal sends the candidate to review, where a
person decides; a wrong serve breaks a test in a confusing way. Words in
scripts without letter case (CJK, Arabic, ...) cannot be told apart from
names, so any change in them refuses; a script no language table covers says so.
The word lists: English in :mod:`~semula.core.guard.words`, sixteen languages in
:mod:`~semula.core.guard.languages`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from difflib import SequenceMatcher

from semula.core.guard.counting import counted_differs, list_items_differ
from semula.core.guard.diff import MAX_CHANGED_TOKENS, TextDiff, text_diff
from semula.core.guard.lexicons import COVERED_SCRIPTS, NEGATING_PREFIXES as TABLE_NEGATING_PREFIXES
from semula.core.guard.lexicons import NEGATING_SUFFIXES, script_of
from semula.core.guard.tokens import Feature
from semula.core.guard.words import NEGATING_PREFIXES, PREFIX_SWAPS, SYMBOL_TOKENS
from semula.core.text import symbol_tokens

__all__ = [
    "GUARD_CHECKS",
    "MAX_CHANGED_TOKENS",
    "Feature",
    "TextDiff",
    "alternatives_differ",
    "antonyms_differ",
    "counted_differs",
    "dates_differ",
    "entities_differ",
    "guard",
    "identifiers_differ",
    "list_items_differ",
    "negation_differs",
    "numbers_differ",
    "quantifiers_differ",
    "quoted_differ",
    "uncovered_script_differs",
    "symbols_differ",
    "text_diff",
    "units_differ",
    "word_order_differs",
]

# =================================================================== checks


def _compare(label: str, stored: Sequence[Feature], incoming: Sequence[Feature], sep: str = "≠") -> str | None:
    """None when both sides hold the same values in the same order, else why not."""
    if [f.value for f in stored] == [f.value for f in incoming]:
        return None
    only_stored = Counter(f.value for f in stored) - Counter(f.value for f in incoming)
    only_incoming = Counter(f.value for f in incoming) - Counter(f.value for f in stored)
    a = next((f.text for f in stored if f.value in only_stored), None)
    b = next((f.text for f in incoming if f.value in only_incoming), None)
    if a is not None and b is not None:
        return f"{label} {a}≠{b}" if sep == "≠" else f"{label}: {a}{sep}{b}"
    if a is not None or b is not None:
        return f"{label}: '{a if a is not None else b}' only in {'stored' if a is not None else 'incoming'}"
    return f"{label} order: {', '.join(f.text for f in stored)}{sep}{', '.join(f.text for f in incoming)}"


def dates_differ(d: TextDiff) -> str | None:
    """Calendar dates, years, weekdays and times of day (ISO, slash, named month)."""
    return _compare("date", *d.changed("date"))


def numbers_differ(d: TextDiff) -> str | None:
    """Digits, decimals, percentages, ordinals and spelled-out numbers, by value, in every
    language of the tables. A word that is a number only sometimes ("un", "ein", "bir", "on")
    counts only against another number: "un chat" / "deux chats" differ by the number two
    alone, "un" / "une" / "le" never, and "on" in "3 titles on travel" is not ten."""
    reason = _compare("number", *d.changed("number"))
    if reason is not None:
        return reason
    weak_stored, weak_incoming = d.changed("weak_number")
    return _compare("number", weak_stored, weak_incoming) if weak_stored and weak_incoming else None


def units_differ(d: TextDiff) -> str | None:
    """Units of measure, time spans and currencies (km/miles, °C/°F, USD/€, MB/GB).

    A common word that is a unit only sometimes ("some day", "a degree") counts
    when the other side changed a unit too ("per month" -> "per week")."""
    stored, incoming = d.changed("unit")
    if not stored or not incoming:
        stored = [f for f in stored if not f.value[1]]  # type: ignore[index]
        incoming = [f for f in incoming if not f.value[1]]  # type: ignore[index]
    unit = lambda fs: [Feature(f.start, f.end, f.value[0], f.text) for f in fs]  # noqa: E731
    return _compare("unit", unit(stored), unit(incoming), sep="→")


def negation_differs(d: TextDiff) -> str | None:
    """A negator gained, lost or changed in kind, in any language of the tables (not, nicht,
    ne … pas, не, 不, ない, 않다, لا, नहीं, ...: "not" → "never" counts, "not" → "nicht" does
    not), or a word set against its negated form by an affix (happy/unhappy, möglich/
    unmöglich, platny/bezpłatny, geliyor/gelmiyor, şekerli/şekersiz)."""
    stored, incoming = d.changed("negation")
    # Counted over the whole texts: "je sais pas" and "je ne sais pas" hold one negation each,
    # though only the "ne" changed.
    all_stored, all_incoming = d.stored.features["negation"], d.incoming.features["negation"]
    only_stored = Counter(f.value for f in all_stored) - Counter(f.value for f in all_incoming)
    only_incoming = Counter(f.value for f in all_incoming) - Counter(f.value for f in all_stored)
    stored = [f for f in stored if f.value in only_stored] or [f for f in all_stored if f.value in only_stored]
    incoming = [f for f in incoming if f.value in only_incoming] or [
        f for f in all_incoming if f.value in only_incoming
    ]
    if only_stored and only_incoming:
        a = next(f.text for f in stored if f.value in only_stored)
        b = next(f.text for f in incoming if f.value in only_incoming)
        return f"negation: {a}→{b}"
    if only_stored or only_incoming:
        more, side = (stored, "stored") if only_stored else (incoming, "incoming")
        word = next(f.text for f in more if f.value in (only_stored or only_incoming))
        return f"negation: '{word}' only in {side}"
    for x, y in _prefixed_pairs(*d.changed_words, _NEGATION_PARTNERS):
        return f"negation: {x}→{y}"
    for x, y in _suffixed_pairs(*d.changed_words):
        return f"negation: {x}→{y}"
    return None


_VOWELS = frozenset("aeıioöuüyâîû")


def _suffixed_pairs(a_words: frozenset[str], b_words: frozenset[str]) -> Iterable[tuple[str, str]]:
    """(x, y) where both share a stem of 3+ letters and one continues with a negating suffix
    the other lacks: Turkish "yaptı"/"yapmadı", "bekliyor"/"beklemiyor", "care"/"careless"."""
    if not NEGATING_SUFFIXES:
        return
    by_stem: dict[str, list[str]] = {}  # indexed by the first three letters: no quadratic scan
    for y in b_words:
        by_stem.setdefault(y[:3], []).append(y)
    for x in a_words:
        for y in by_stem.get(x[:3], ()):
            n = len(_common_prefix(x, y))
            if n < 3 or x == y:
                continue
            rx, ry = x[n:], y[n:]
            if max(len(rx), len(ry)) > 12:
                continue
            if _negated_rest(ry) and not _negated_rest(rx):
                yield x, y
            elif _negated_rest(rx) and not _negated_rest(ry):
                yield x, y


def _negated_rest(rest: str) -> bool:
    if rest.startswith(NEGATING_SUFFIXES):
        return True
    return rest[:1] in _VOWELS and rest[1:].startswith(NEGATING_SUFFIXES) and rest[1:2] == "m"


def _common_prefix(x: str, y: str) -> str:
    n = 0
    while n < len(x) and n < len(y) and x[n] == y[n]:
        n += 1
    return x[:n]


# Quantifiers whose mere presence changes a short question ("delete only the logs").
_STRONG_QUANTIFIERS = frozenset({"all", "each", "none", "neither", "both", "only"})
# A rewording drops "some" or "any" freely; only a small edit is judged by what it adds.
_SMALL_EDIT_TOKENS = 6


def quantifiers_differ(d: TextDiff) -> str | None:
    """A quantifier swapped (all/some/none/each/both/few/many/most/only, alle, tous, todos, все,
    所有, すべて, 모든, كل, सभी, ...: "all users" is not "some users"), or a strong one (all, each,
    none, both, only) gained or lost in a small edit."""
    stored, incoming = d.changed("quantifier")
    if stored and incoming:
        return _compare("quantifier", stored, incoming, sep="→")
    if len(d.stored_changed) + len(d.incoming_changed) > _SMALL_EDIT_TOKENS:
        return None
    strong = [f for f in stored + incoming if f.value in _STRONG_QUANTIFIERS]
    if strong:
        return f"quantifier: '{strong[0].text}' only in {'stored' if stored else 'incoming'}"
    return None


def uncovered_script_differs(d: TextDiff) -> str | None:
    """A changed word in a script no language table covers (Thai, Greek, Hebrew, ...): the
    guard cannot tell a negation or a number there from a synonym, so it never serves it."""
    for side in (d.stored, d.incoming):
        changed = d.stored_changed if side is d.stored else d.incoming_changed
        for i in sorted(changed):
            if side.cores[i].isascii():
                continue
            for ch in side.cores[i]:
                if ch.isalpha() and (script := script_of(ch)) not in COVERED_SCRIPTS:
                    return f"script not covered ({script.title()}): '{side.cores[i]}' changed, cannot judge the edit"
    return None


def _partners(swaps: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """prefix -> the prefixes that oppose it; the empty prefix is never looked up."""
    out: dict[str, list[str]] = {}
    for p, q in swaps:
        out.setdefault(p, []).append(q)
        out.setdefault(q, []).append(p)
    out.pop("", None)
    return {k: tuple(v) for k, v in out.items()}


_NEGATION_PARTNERS = _partners(("", p) for p in NEGATING_PREFIXES | TABLE_NEGATING_PREFIXES)
_SWAP_PARTNERS = _partners(PREFIX_SWAPS)


def _prefixed_pairs(
    a_words: frozenset[str], b_words: frozenset[str], partners: dict[str, tuple[str, ...]]
) -> Iterable[tuple[str, str]]:
    """(x, y) with x = p + stem on one side and y = q + stem on the other, p and q partners.
    Each pair is found from whichever side carries a (non-empty) prefix."""
    lengths = sorted({len(p) for p in partners})
    for first, second, flip in ((a_words, b_words, False), (b_words, a_words, True)):
        for word in first:
            for n in lengths:
                if len(word) - n < (3 if word.isascii() else 2) or word[:n] not in partners:
                    continue
                for q in partners[word[:n]]:
                    other = q + word[n:]
                    if other in second:
                        yield (other, word) if flip else (word, other)


def antonyms_differ(d: TextDiff) -> str | None:
    """Opposing words (weekday/weekend, before/after, ascending/descending, ...)
    and opposing prefixes (encrypt/decrypt, inbound/outbound, hypo/hyper)."""
    reason = _by_group("antonym", *d.changed("antonym"))
    if reason is not None:
        return reason
    for x, y in _prefixed_pairs(*d.changed_words, _SWAP_PARTNERS):
        return f"antonym: {x}→{y}"
    return None


def alternatives_differ(d: TextDiff) -> str | None:
    """Mutually exclusive choices in one domain (mean/median/mode, fetch/pull, margin/padding)."""
    return _by_group("alternative", *d.changed("alternative"))


def _by_group(label: str, stored: list[Feature], incoming: list[Feature]) -> str | None:
    """Refuse a swap within a group. A word dropped or added without its
    counterpart is left to the score: paraphrases do that all the time."""
    groups = sorted({f.value[0] for f in stored} & {f.value[0] for f in incoming})  # type: ignore[index]
    for group in groups:
        reason = _compare(
            label,
            [f for f in stored if f.value[0] == group],  # type: ignore[index]
            [f for f in incoming if f.value[0] == group],  # type: ignore[index]
            sep="→",
        )
        if reason is not None:
            return reason
    return None


def entities_differ(d: TextDiff) -> str | None:
    """Names: capitalised runs (France, Marie Curie) and words of uncased scripts."""
    return _compare("entity", *d.changed("entity"), sep="→")


def identifiers_differ(d: TextDiff) -> str | None:
    """Code identifiers, file names, paths and flags, compared case-sensitively."""
    return _compare("identifier", *d.changed("identifier"), sep="→")


def quoted_differ(d: TextDiff) -> str | None:
    """Quoted strings and inline code: any change inside them counts."""
    return _compare("quoted", *d.changed("quote"), sep="→")


def _signs(text: str) -> list[str]:
    """Symbol runs without the currency, percent and degree signs, which the unit and
    number checks compare by meaning ("$5" = "5 dollars", "$5" ≠ "€5")."""
    runs = ("".join(c for c in run if c not in SYMBOL_TOKENS) for run in symbol_tokens(text))
    return [run for run in runs if run]


def symbols_differ(d: TextDiff) -> str | None:
    """Operators, comparisons, brackets, arrows, set and math signs, currencies and emoji, in
    order ("==" vs "!=", "(a + b) * c" vs "a + (b * c)", "→" vs "←", "$" vs "€", "👍" vs "👎").
    Plain sentence punctuation (commas, a trailing ".?!", quotes) is not compared."""
    stored, incoming = _signs(d.stored.text), _signs(d.incoming.text)
    if "".join(stored) == "".join(incoming):  # the same signs, only spaced differently
        return None
    matcher = SequenceMatcher(None, stored, incoming, autojunk=False)
    tag, i1, i2, j1, j2 = next(op for op in matcher.get_opcodes() if op[0] != "equal")
    a, b = " ".join(stored[i1:i2]), " ".join(incoming[j1:j2])
    if a and b:
        return f"symbols differ: {a} → {b}" if " " not in a + b else f"symbols differ: '{a}' → '{b}'"
    return f"symbols differ: '{a or b}' only in {'stored' if a else 'incoming'}"


# Words too common to carry who-did-what-to-whom when they move. Prepositions,
# conjunctions and modals are not among them: "from A to B" is not "to A from B".
FUNCTION_WORDS = frozenset(
    "a an the is are was were be been it this that these those "
    "i you we they he she me my your our their its do does did please".split()
)


def word_order_differs(d: TextDiff) -> str | None:
    """The changed words are the same words, moved: "dog bites man" vs "man bites dog" (or
    "USD to EUR" vs "EUR to USD") score 1.0 as multisets, yet ask different things."""
    stored, incoming = d.changed_words
    moved = sorted(stored - FUNCTION_WORDS)
    if not moved or stored != incoming:
        return None
    negators = {f.text.casefold() for f in d.changed("negation")[0]}
    if negator := next((w for w in moved if w in negators), None):
        return f"negation moved: '{negator}'"
    return f"word order: '{moved[0]}' moved"


GUARD_CHECKS: tuple[Callable[[TextDiff], str | None], ...] = (
    dates_differ,
    numbers_differ,
    units_differ,
    negation_differs,
    antonyms_differ,
    quantifiers_differ,
    alternatives_differ,
    uncovered_script_differs,
    entities_differ,
    identifiers_differ,
    quoted_differ,
    symbols_differ,
    word_order_differs,
    counted_differs,
    list_items_differ,
)


def guard(stored_text: str, incoming_text: str) -> str | None:
    """None if the two texts may share an answer as far as the guard can tell, else the first reason."""
    if stored_text == incoming_text:
        return None
    diff = text_diff(stored_text, incoming_text)
    if diff is None:
        return f"texts differ too widely to check (more than {MAX_CHANGED_TOKENS} changed words)"
    if not diff.stored_changed and not diff.incoming_changed:
        return symbols_differ(diff)  # the words are the same; signs between them may not be
    for check in GUARD_CHECKS:
        reason = check(diff)
        if reason is not None:
            return reason
    return None
