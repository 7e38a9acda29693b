"""Which edits between two texts are known to be harmless: an allow-list, not a deny-list.

The guard (:mod:`semula.core.guard`) refuses changes it recognises: numbers, names,
negations, opposites, symbols. Below a perfect lexical score that is not enough: the
vocabulary of changes that matter is open (cat/dog, pandas/polars, all/some, should/must,
to/from, avant/après), and no list of opposites covers it. So lexical serving below 1.0
turns the question around: every changed word must be a *known harmless* edit, and
anything else goes to review.

Harmless here means, in a few languages (English, French, Spanish, German, Italian,
Portuguese):

- politeness and fillers ("please", "kindly", "just", "thanks", "hi", "por favor", "bitte");
- request frames that do not change the question ("could you", "can you tell me",
  "I'd like to know", "how can I" = "how do I" = "how to");
- articles ("the", "a");
- contractions ("what's" = "what is", "don't" = "do not");
- British/American spellings and a small table of true synonyms (buy/purchase, film/movie).

Both texts are reduced to that canonical form (lexical tokens: words and symbols, in
order); the edit is harmless when the two reduced sequences are equal. A word moved to
another place is not harmless ("dog bites man"). Pure: strings in, a reason or None out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher

__all__ = [
    "HARMLESS_WORDS",
    "RELATION_WORDS",
    "SMALL_EDIT_TOKENS",
    "canonical_tokens",
    "changed_words",
    "edits_change_question",
    "edits_unlisted",
]

# Words that may be added or dropped anywhere. Kept to words that never carry the
# question: no pronouns, prepositions, quantifiers, modals or adverbs of manner
# ("explain simply" asks for something else than "explain").
HARMLESS_WORDS = frozenset(
    """
    a an the please pls plz kindly just basically actually really hi hello hey thanks thank thx
    ok okay um uh oh
    svp merci le les une
    favor gracias los las una
    bitte danke der das ein eine einen
    favore piacere grazie gli uno
    obrigado obrigada
    """.split()
)

# Phrases that may be added or dropped (after contractions are expanded). Longest first.
_HARMLESS_PHRASES = tuple(
    sorted(
        (
            tuple(p.split())
            for p in """
    could you please; can you please; would you please; will you please
    could you; can you; would you; will you; can u; would you mind
    can you tell me; could you tell me; would you tell me; tell me; let me know
    i would like to know; i want to know; i need to know; i wonder; do you know
    for me; thank you; thanks in advance; thank you in advance
    s il vous plaît; s il te plaît; s il vous plait; s il te plait
    por favor; per favore; per piacere; se faz favor; por gentileza
    """.replace("\n", ";").split(";")
            if p.strip()
        ),
        key=len,
        reverse=True,
    )
)

# Same meaning, other words: each maps to the first of its group.
_EQUIVALENTS = """
how do i | how can i | how to | how would i | how could i
what | which
what is | what s
it is | it s
that is | that s
there is | there s
let us | let s
i am | i m
cannot | can not
colour | color ; colours | colors ; favourite | favorite ; behaviour | behavior ; centre | center
grey | gray ; licence | license ; catalogue | catalog ; dialogue | dialog ; programme | program
summarise | summarize ; summarised | summarized ; summarising | summarizing
optimise | optimize ; optimised | optimized ; optimising | optimizing ; optimisation | optimization
organise | organize ; organised | organized ; organisation | organization
analyse | analyze ; analysed | analyzed ; analysing | analyzing
recognise | recognize ; prioritise | prioritize ; customise | customize ; initialise | initialize
visualise | visualize ; normalise | normalize ; serialise | serialize ; apologise | apologize
buy | purchase ; film | movie ; films | movies ; automobile | car
"""


def _equivalents() -> dict[tuple[str, ...], tuple[str, ...]]:
    out: dict[tuple[str, ...], tuple[str, ...]] = {}
    for group in _EQUIVALENTS.replace("\n", ";").split(";"):
        forms = [tuple(f.split()) for f in group.split("|") if f.strip()]
        for form in forms[1:]:
            out[form] = forms[0]
    return out


_EQUIVALENT = _equivalents()
_EQUIVALENT_MAX = max(len(k) for k in _EQUIVALENT)

# "n't" contractions: the tokens "don", "t" -> "do", "not" (irregular stems listed).
_NOT_STEMS = {"can": "can", "won": "will", "shan": "shall", "ain": "is"}
# "'re", "'ve", "'ll", "'d" after a pronoun.
_CLITICS = {"re": "are", "ve": "have", "ll": "will", "d": "would"}
_PRONOUNS = frozenset("i you we they he she it that there who what".split())


def _expand(tokens: Sequence[str]) -> list[str]:
    """Contractions spelt out: ["don", "t"] -> ["do", "not"], ["you", "re"] -> ["you", "are"]."""
    out: list[str] = []
    for token in tokens:
        prev = out[-1] if out else ""
        if token == "t" and prev.endswith("n") and len(prev) > 2:
            out[-1] = _NOT_STEMS.get(prev, prev[:-1])
            out.append("not")
        elif token in _CLITICS and prev in _PRONOUNS:
            out.append(_CLITICS[token])
        else:
            out.append(token)
    return out


def canonical_tokens(tokens: Sequence[str]) -> list[str]:
    """The tokens with contractions spelt out, equivalents mapped to one spelling, and
    harmless phrases and words dropped."""
    tokens = _expand(tokens)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        for n in range(min(_EQUIVALENT_MAX, len(tokens) - i), 0, -1):
            if (key := tuple(tokens[i : i + n])) in _EQUIVALENT:
                out.extend(_EQUIVALENT[key])
                i += n
                break
        else:
            out.append(tokens[i])
            i += 1
    kept: list[str] = []
    i = 0
    while i < len(out):
        phrase = next((p for p in _HARMLESS_PHRASES if tuple(out[i : i + len(p)]) == p), None)
        if phrase is not None:
            i += len(phrase)
            continue
        if out[i] not in HARMLESS_WORDS:
            kept.append(out[i])
        i += 1
    return kept


def changed_words(stored: Sequence[str], incoming: Sequence[str]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The (stored, incoming) token runs that differ, in order, after both are made canonical."""
    a, b = canonical_tokens(stored), canonical_tokens(incoming)
    if a == b:
        return []
    ops = SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [(tuple(a[i1:i2]), tuple(b[j1:j2])) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def edits_unlisted(stored: Sequence[str], incoming: Sequence[str]) -> str | None:
    """None when every edit between the two token sequences is a known harmless one,
    else the first edit that is not, e.g. "edit not known harmless: cat → dog"."""
    changes = changed_words(stored, incoming)
    if not changes:
        return None
    a, b = changes[0]
    if a and b:
        return f"edit not known harmless: {' '.join(a)[:60]} → {' '.join(b)[:60]}"
    return f"edit not known harmless: '{' '.join(a or b)[:60]}' only in {'stored' if a else 'incoming'}"


# ------------------------------------------------------------------ for the embedding tier
# A cosine of 0.9 says two texts are about the same thing, not that they ask the same:
# "feed my cat" and "feed my dog" score 0.92, "scale up" and "scale down" 0.99. Within a
# small edit the cosine cannot tell a synonym from a swap, and a word allow-list would
# serve almost no paraphrase. So the embedding tier looks at the size of the edit:
#
# - a small edit (at most SMALL_EDIT_TOKENS changed tokens on both sides together, e.g.
#   three words swapped for three) is refused when it swaps words in place (cat/dog,
#   pandas/polars, should/must, did/will, avant/après), moves a word (half an hour / an
#   hour and a half) or adds or drops a relation word (to/from, all/some, was ... by);
# - a larger rewording is left to the cosine and the guard (numbers, names, negation,
#   opposites, symbols), as before.

# Closed-class words that carry relations: direction, quantity, modality, comparison and
# the passive's "by". A finite class, so a list can be complete here.
RELATION_WORDS = frozenset(
    """
    to from into onto out off up down over under above below before after against for with without via
    between among within inside outside toward towards across through behind beyond by
    all some any each every most many much few several none both either neither only more less fewer least
    can could may might must shall should will would ought
    better worse best worst higher lower greater smaller larger
    à avant après pour contre avec sans dans sous plus moins tous toutes chaque quelques doit
    antes después para contra con sin desde hasta más menos todos todas algunos algunas cada debe
    vor nach für gegen mit ohne aus bis mehr weniger alle einige jede jeder muss soll kann
    prima dopo per contro senza più meno tutti alcuni ogni deve
    depois sem até mais alguns
    """.split()
)
# Agreement and person, which a rewording changes freely ("what is" / "what are", "how do
# I" / "how do you"): not counted as changes by the embedding tier.
_AGREEMENT_WORDS = frozenset("is are am do does i you we me us".split())
# Three words swapped for three: the corpus's targeted edits change one to three words.
SMALL_EDIT_TOKENS = 6


def edits_change_question(stored: Sequence[str], incoming: Sequence[str]) -> str | None:
    """None when the edit is a rewording or a small edit that swaps, moves and adds no
    relation word; else why not (for the embedding tier)."""
    a = [w for w in canonical_tokens(stored) if w not in _AGREEMENT_WORDS]
    b = [w for w in canonical_tokens(incoming) if w not in _AGREEMENT_WORDS]
    if a == b:
        return None
    ops = SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    changes = [(a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"]
    if sum(len(x) + len(y) for x, y in changes) > SMALL_EDIT_TOKENS:
        return None
    for x, y in changes:
        if x and y:
            return f"small edit, words swapped: {' '.join(x)} → {' '.join(y)}"
    removed = Counter(w for x, _ in changes for w in x)
    added = Counter(w for _, y in changes for w in y)
    if moved := sorted(removed & added):
        return f"small edit, word moved: '{moved[0]}'"
    for words, side in ((removed, "stored"), (added, "incoming")):
        if relation := sorted(w for w in words if w in RELATION_WORDS):
            return f"small edit, relation word: '{relation[0]}' only in {side}"
    return None
