"""The near-match verdict: may a recording be served for a request that is
not the same, only close?

Exact, normalised and alias lookups either find the request or not. The
lexical tier (and later the embedding tier) finds recordings that are merely
*close*, and only this module decides what closeness is allowed to do:

- serve, when the score reaches the tier's serve threshold, the rest of the
  request (system prompt, earlier turns, tool results, tools, parameters,
  model) is the same, the guard finds no changed number, name, negation, ...,
  and no near-match bypass rule applies;
- queue for review, when it is not served but the score reaches the review
  threshold, the same speakers speak in the same order (ADR-0003 SEM-E6) and
  the request has the recording's shape: the same provider, endpoint, stream
  mode and model (a near-match across shapes is neither served nor queued; its
  reason names the field);
- otherwise miss.

The lexical score is Sørensen-Dice over word multisets of the last user
message (with sets, "open on weekdays, closed on weekends" and its swap would
score 1.0). Pure: plain values in, a :class:`Verdict` with its reasons out.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from semula.core.request.canonical import CanonicalRequest, ignored
from semula.core.checks import SHAPE_CHECKS, roles_differ, shape_differs
from semula.core.guard.edits import edits_change_question, edits_unlisted
from semula.core.guard.words import NUMBER_WORDS
from semula.core.request.normalise import normalise_text, scrub_volatile, words
from semula.core.settings import ProjectSettings
from semula.core.tiers import Tier, near_row, near_tier

if TYPE_CHECKING:
    from semula.core.guard.language import Languages

from semula.core.text import CJK_CHAR, CJK_RANGES, common_prefix, common_suffix, dice, dice_counts, overlap, symbol_runs

__all__ = [
    "Verdict",
    "dice",
    "lexical_score",
    "lexical_tokens",
    "lexical_words",
    "near_match",
    "unlisted_edit",
]

# Word handling, tuned on the odd-numbered dev pairs (benchmark/results/lexical.md):
# spelled-out numbers count as digits ("three ideas" = "3 ideas"); no stemming,
# because at the default serve threshold 1.0 "the same words" must stay literal
# ("file" and "files" ask for different things) and stemming bought no recall.
STEM = False
SPELL_NUMBERS = True

_WORD = re.compile(r"\w+")

_DIGIT_WORDS: dict[str, str] = {
    w: str(v) for w, (v, role) in NUMBER_WORDS.items() if role in ("unit", "tens") and isinstance(v, int)
}


def _plural_stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _words(text: str, scrub_patterns: Sequence[str]) -> list[str]:
    """:func:`semula.core.request.normalise.words`, without its per-word CJK test when the
    text holds no CJK at all (that test dominates on a 1 MB prompt)."""
    prepared = normalise_text(scrub_volatile(text, scrub_patterns)).lower()
    if CJK_CHAR.search(prepared) is None:
        return _WORD.findall(prepared)
    return words(text, scrub_patterns)


def lexical_words(
    text: str, scrub_patterns: Sequence[str] = (), *, stem: bool = STEM, spell_numbers: bool = SPELL_NUMBERS
) -> list[str]:
    """The words the lexical score compares: scrubbed, normalised, lowercased.

    CJK characters count one word each (so a Chinese prompt is never empty);
    a text of punctuation or symbols only has no words and scores 0.
    """
    out = _words(text, scrub_patterns)
    if spell_numbers:
        out = [_DIGIT_WORDS.get(w, w) for w in out]
    if stem:
        out = [_plural_stem(w) for w in out]
    return out


_CJK_SPLIT = re.compile(f"[{CJK_RANGES}]|[^{CJK_RANGES}]+")


def lexical_tokens(text: str, scrub_patterns: Sequence[str] = ()) -> list[str]:
    """The lexical words with the symbols among them, in text order: what the score counts.

    Symbols are runs of characters that are neither letters, digits nor space,
    without plain sentence punctuation (:func:`semula.core.text.symbol_runs`),
    so ``==`` against ``!=``, ``$`` against ``€`` or a moved bracket changes the
    tokens while a comma or a trailing question mark does not.
    """
    prepared = normalise_text(scrub_volatile(text, scrub_patterns)).lower()
    found: list[tuple[int, str]] = []
    has_cjk = CJK_CHAR.search(prepared) is not None
    for m in _WORD.finditer(prepared):
        word = m.group()
        if has_cjk and CJK_CHAR.search(word):
            found.extend((m.start() + p.start(), p.group()) for p in _CJK_SPLIT.finditer(word))
        else:
            found.append((m.start(), _DIGIT_WORDS.get(word, word) if SPELL_NUMBERS else word))
    found.extend(symbol_runs(prepared))
    found.sort(key=lambda t: t[0])
    return [token for _, token in found]


def _is_word(token: str) -> bool:
    return _WORD.match(token) is not None


# Above this many characters per text the score is computed on the part where
# the texts differ (see _long_score); below it, on all the words.
LONG_TEXT_CHARS = 32_768


def lexical_score(a_text: str, b_text: str, scrub_patterns: Sequence[str] = ()) -> tuple[float, bool]:
    """(Dice score of the two texts' lexical tokens, whether both have any words).

    Tokens are words and symbols (:func:`lexical_tokens`); a text of symbols
    only has no words and scores 0."""
    if max(len(a_text), len(b_text)) > LONG_TEXT_CHARS:
        return _long_score(a_text, b_text, scrub_patterns)
    a, b = _token_counts(a_text, tuple(scrub_patterns)), _token_counts(b_text, tuple(scrub_patterns))
    if not a[2] or not b[2]:
        return 0.0, False
    return dice_counts(a[0], a[1], b[0], b[1]), True


@lru_cache(maxsize=4096)
def _token_counts(text: str, scrub_patterns: tuple[str, ...]) -> tuple[Counter[str], int, int]:
    """(token multiset, token count, word count). Cached, because a request meets
    several candidates and a stored entry meets many requests (texts up to
    LONG_TEXT_CHARS only reach here)."""
    found = lexical_tokens(text, scrub_patterns)  # callers never mutate the Counter
    return Counter(found), len(found), sum(1 for t in found if _is_word(t))


def _balanced(text: str, end: int) -> bool:
    """Whether text[:end] closes every inline code span, code fence, JSON object
    and array it opens, so that normalising it alone gives the same words."""
    return (
        text.count("`", 0, end) % 2 == 0
        and text.count("{", 0, end) == text.count("}", 0, end)
        and text.count("[", 0, end) == text.count("]", 0, end)
    )


def _space_before(text: str, pos: int) -> int:
    """Start of the word after the last whitespace before ``pos`` (0 if none)."""
    return max(text.rfind(" ", 0, pos), text.rfind("\n", 0, pos)) + 1


def _space_after(text: str, pos: int) -> int:
    """Start of the word after the first whitespace at or after ``pos`` (len(text) if none)."""
    found = [i for i in (text.find(" ", pos), text.find("\n", pos)) if i >= 0]
    return min(found) + 1 if found else len(text)


# How far from the first and last difference the long-text cuts stay: further
# than any date, name, placeholder or scrub-pattern match is long.
_CUT_MARGIN = 256


def _safe_cuts(a: str, b: str) -> tuple[int, int] | None:
    """(head, tail): both texts share their first ``head`` and last ``tail``
    characters, each cut sits right after whitespace, and every code span,
    JSON object and array opened before a cut closes before it."""
    shared_head = common_prefix(a, b)
    shared_tail = common_suffix(a, b, min(len(a), len(b)) - shared_head)
    head = 0
    if shared_head > _CUT_MARGIN:
        head = _space_before(a, shared_head - _CUT_MARGIN)
        for _ in range(16):
            if head == 0 or _balanced(a, head):
                break
            head = _space_before(a, head - 1)
        else:
            head = 0
    tail = 0
    if shared_tail > _CUT_MARGIN:
        cut = _space_after(a, len(a) - shared_tail + _CUT_MARGIN)
        for _ in range(16):
            if cut >= len(a):
                break
            if _balanced(a, cut) and _balanced(b, len(b) - (len(a) - cut)):
                tail = len(a) - cut
                break
            cut = _space_after(a, cut)
    # Worth it only when most of the text is shared (the usual near-match).
    return (head, tail) if 2 * (head + tail) > max(len(a), len(b)) else None


def _long_score(a: str, b: str, scrub_patterns: Sequence[str]) -> tuple[float, bool]:
    """The score of two long texts (normalising 1 MB twice is over budget).

    When they share most of their text, only the differing middles are
    normalised and compared; the shared part counts the same on both sides,
    its size estimated from whitespace-separated tokens (this moves a score
    below 1 by a negligible amount and can never make it 1). Otherwise the
    score is estimated from lower-cased whitespace tokens (punctuation stays
    attached, which only lowers it) and kept below 1 unless the texts are equal.
    A project scrub pattern still applies inside the middles; only a match
    longer than the cut margin could straddle a cut.
    """
    cuts = _safe_cuts(a, b)
    if cuts is None:
        words_a, words_b = a.lower().split(), b.lower().split()
        score = dice(words_a, words_b)
        return (score if a == b else min(score, 0.999)), bool(words_a) and bool(words_b)
    head, tail = cuts
    middle_a = lexical_tokens(a[head : len(a) - tail], scrub_patterns)
    middle_b = lexical_tokens(b[head : len(b) - tail], scrub_patterns)
    shared = len(a[:head].split()) + len(a[len(a) - tail :].split())
    common = overlap(Counter(middle_a), Counter(middle_b))
    total = 2 * shared + len(middle_a) + len(middle_b)
    score = 2.0 * (shared + common) / total if total else 0.0
    return score, shared > 0 or (bool(middle_a) and bool(middle_b))


def unlisted_edit(
    stored_text: str, incoming_text: str, scrub_patterns: Sequence[str] = (), harmless_only: bool = True
) -> str | None:
    """None when the two last user texts differ only in known harmless edits
    (:mod:`semula.core.guard.edits`: fillers, politeness, request frames, articles,
    contractions, spellings, true synonyms), else the first edit that is not. With
    ``harmless_only`` off, only an edit that changes the question counts (a tier's
    `NearRow.harmless_edits_only`).
    Long texts are compared on their differing middles (see :func:`_long_score`)."""
    if stored_text == incoming_text:
        return None
    if max(len(stored_text), len(incoming_text)) > LONG_TEXT_CHARS:
        cuts = _safe_cuts(stored_text, incoming_text)
        if cuts is None:
            return "edit not known harmless: the texts differ too widely"
        head, tail = cuts
        stored_text = stored_text[head : len(stored_text) - tail]
        incoming_text = incoming_text[head : len(incoming_text) - tail]
    check = edits_unlisted if harmless_only else edits_change_question
    return check(lexical_tokens(stored_text, scrub_patterns), lexical_tokens(incoming_text, scrub_patterns))


@dataclass(frozen=True)
class Verdict:
    """What a near-match may do, and why not more.

    ``reason`` says why it is not served (None when served); ``guard_reason``
    is the guard's verdict whenever the guard ran, so the review queue and the
    call log can show it even when the score alone already ruled out serving.
    """

    tier: Tier
    score: float
    serve: bool
    review: bool
    reason: str | None
    guard_reason: str | None = None
    calibrated: bool = False  # served by a threshold learnt from review verdicts (calibrated mode)



# ------------------------------------------------------------------ the verdict


def _thresholds(tier: Tier, settings: ProjectSettings) -> tuple[float | None, float | None]:
    """The tier's (serve, review) thresholds as given: a per-model tier's are resolved by its caller."""
    row = near_row(tier)
    return getattr(settings, row.serve), getattr(settings, row.review)


def _below(score: float, threshold: float) -> str:
    """'0.83 < 1.00', with enough digits that the two never print equal."""
    for digits in (2, 3, 4, 6):
        if round(score, digits) < round(threshold, digits):
            return f"{score:.{digits}f} < serve threshold {threshold:.{digits}f}"
    return f"{score!r} < serve threshold {threshold!r}"


def kept_layout_differs(stored_text: str, incoming_text: str, scrub_patterns: Sequence[str] = ()) -> str | None:
    """The same words and symbols in the same order, yet texts the normaliser keeps apart.

    The score compares lower-cased tokens; normalisation keeps the case, spacing and indentation
    that carry meaning (code, quotes, acronyms). When that is the only difference, the near-match
    tiers must not serve what the normalised tier deliberately refused.
    """
    a, b = scrub_volatile(stored_text, scrub_patterns), scrub_volatile(incoming_text, scrub_patterns)
    if normalise_text(a) == normalise_text(b) or lexical_tokens(a) != lexical_tokens(b):
        return None
    return "case, spacing or indentation differs where it carries meaning (code, quotes, acronyms)"


def reviewable(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> bool:
    """Whether `stored` could ever be queued for `incoming`: both understood, the same speakers in
    the same order, the same shape (review never crosses one)."""
    return (incoming.parsed and stored.parsed and roles_differ(incoming, stored, settings) is None
            and shape_differs(incoming, stored, settings) is None)


def review_score(incoming: CanonicalRequest, stored: CanonicalRequest, settings: ProjectSettings) -> float | None:
    """The lexical tier's score of `stored` for `incoming`, when it could be queued for it (else None).

    The one score the review queue, the review page and the replay-miss message show for a
    recording of the same shape: a miss that names one at or above the review threshold queues it."""
    incoming, stored = ignored(incoming, settings.ignore), ignored(stored, settings.ignore)
    if not reviewable(incoming, stored, settings):
        return None
    score, has_words = lexical_score(incoming.last_user_text(), stored.last_user_text(), settings.scrub_patterns)
    return score if has_words else None


def near_reach(
    incoming: CanonicalRequest,
    stored: CanonicalRequest,
    settings: ProjectSettings,
    tier: Tier = Tier.LEXICAL,
    score: float | None = None,
    learnt_thresholds: Mapping[str, float] | None = None,
) -> tuple[float, bool]:
    """The pair's score as :func:`near_match` takes it, and whether it reaches the lowest of the tier's
    thresholds (serve, review, a learnt one). A pair that does not can be neither served nor queued,
    whatever else its verdict says: the cheap first step of `near_match`, without the shape, context
    and guard checks that follow."""
    tier = near_tier(tier)
    incoming, stored = ignored(incoming, settings.ignore), ignored(stored, settings.ignore)
    score, floor, _ = _scored(tier, incoming.last_user_text(), stored.last_user_text(), settings, score,
                              learnt_thresholds)
    return score, floor is not None and score >= floor


def _scored(tier: Tier, incoming_text: str, stored_text: str, settings: ProjectSettings, score: float | None,
            learnt_thresholds: Mapping[str, float] | None) -> tuple[float, float | None, bool]:
    """(the score in [0, 1], the lowest threshold that can serve or queue (None: nothing can), whether
    both texts have words). ``score`` None: the lexical score of the two texts."""
    serve_threshold, review_threshold = _thresholds(tier, settings)
    lexical, has_words = lexical_score(incoming_text, stored_text, settings.scrub_patterns)
    score = lexical if score is None else score
    score = min(max(float(score), 0.0), 1.0) if math.isfinite(score) else 0.0
    calibrating = settings.near_serve == "calibrated"
    learnt = min(learnt_thresholds.values(), default=None) if calibrating and learnt_thresholds else None
    floors = [t for t in (serve_threshold, review_threshold, learnt) if t is not None]
    return score, (min(floors) if has_words and floors else None), has_words


def near_match(
    incoming: CanonicalRequest,
    stored: CanonicalRequest,
    settings: ProjectSettings,
    tier: Tier = Tier.LEXICAL,
    score: float | None = None,
    near_bypass_reason: str | None = None,
    learnt_thresholds: Mapping[str, float] | None = None,
) -> Verdict:
    """Whether ``stored``'s recorded answer may be served (or queued) for ``incoming``.

    ``score`` defaults to the lexical Dice score of the last user texts; the
    embedding tier passes its cosine. The first failing rule is the reason:
    bypass, unparsed body, no words, shape (roles, tools, parameters, model),
    context, score, guard. The guard runs whenever the score reaches the lower
    threshold, and its verdict is kept in ``guard_reason`` for the review queue.

    With ``near_serve = "calibrated"``, ``learnt_thresholds`` are this tier's thresholds learnt from
    the project's verdicts per stratum (the pair's languages, :mod:`semula.core.calibration`; a
    stratum without one never serves by calibration): what the static rules refuse is served when the
    score reaches its stratum's threshold and nothing but the score held it back
    (:func:`_calibrated_reason`).

    Whatever would serve is served only when every language of the two texts has a guard table
    (:mod:`semula.core.guard.language`); otherwise the reason is "no guard for <language>".
    """
    tier = near_tier(tier)
    # What the project declared volatile (semula_ignore) is no difference here either; all else counts.
    incoming, stored = ignored(incoming, settings.ignore), ignored(stored, settings.ignore)
    serve_threshold, review_threshold = _thresholds(tier, settings)
    incoming_text, stored_text = incoming.last_user_text(), stored.last_user_text()
    score, floor, has_words = _scored(tier, incoming_text, stored_text, settings, score, learnt_thresholds)
    calibrating = settings.near_serve == "calibrated"
    guard_reason = None
    # Imported on the first near-match: the guard's lexicons cost a start-up ~60 ms that exact hits never need.
    from semula.core.guard.check import guard
    from semula.core.guard.language import languages_of_pair, unguarded_reason

    if floor is not None and score >= floor:
        # Values the normalised fingerprint scrubs (ids, timestamps, project patterns) are not differences.
        patterns = settings.scrub_patterns
        guard_reason = guard(scrub_volatile(stored_text, patterns), scrub_volatile(incoming_text, patterns))

    reason: str | None = None
    if near_bypass_reason:
        reason = f"bypass: {near_bypass_reason}"
    elif not (incoming.parsed and stored.parsed):
        reason = "request not understood: exact tier only"
    elif not has_words:
        reason = "no words to compare in the last user message"
    if reason is None:
        reason = next((r for check in SHAPE_CHECKS if (r := check(incoming, stored, settings)) is not None), None)
    calibrated = False
    if reason is None:
        reason = _static_reason(tier, score, serve_threshold, guard_reason, stored_text, incoming_text, settings)
        languages: Languages | None = None
        if reason is not None and calibrating:
            reason = _calibrated_reason(tier, score, guard_reason, stored_text, incoming_text, settings)
            if reason is None:  # only the score is left: the pair's stratum's learnt threshold decides
                languages = languages_of_pair(stored_text, incoming_text)
                reason = unguarded_reason(languages) or _learnt_reason(
                    tier, score, languages.stratum, learnt_thresholds or {})
                calibrated = reason is None
        if reason is None and languages is None:
            reason = unguarded_reason(languages_of_pair(stored_text, incoming_text))

    serve = reason is None
    review = (
        not serve
        and has_words
        and review_threshold is not None
        and score >= review_threshold
        and reviewable(incoming, stored, settings)  # never queued across shapes either
    )
    return Verdict(tier=tier, score=score, serve=serve, review=review, reason=reason, guard_reason=guard_reason,
                   calibrated=calibrated)


def _static_reason(tier: Tier, score: float, serve_threshold: float | None, guard_reason: str | None,
                   stored_text: str, incoming_text: str, settings: ProjectSettings) -> str | None:
    """Why the tier's own threshold and rules do not serve a pair of the same shape (None: they do)."""
    if serve_threshold is None:
        return f"{tier} serving is off (no serve threshold)"
    if score < serve_threshold:
        return f"score {_below(score, serve_threshold)}"
    if guard_reason is not None:
        return f"guard: {guard_reason}"
    if edit := unlisted_edit(stored_text, incoming_text, settings.scrub_patterns, near_row(tier).harmless_edits_only):
        return edit
    return kept_layout_differs(stored_text, incoming_text, settings.scrub_patterns)


def _calibrated_reason(tier: Tier, score: float, guard_reason: str | None,
                       stored_text: str, incoming_text: str, settings: ProjectSettings) -> str | None:
    """Why calibrated mode does not serve either, before its learnt threshold (None: only that is left).

    Calibration lifts the score bar and, for the lexical tier, the harmless-word list (which stands in
    for a score bar); the guard's named reasons, the meaning-change edit checks of the embedding tier
    (word swapped, moved, a relation word) and the kept layout still refuse. Reasons that start
    "score " or "calibrated:" are the ones calibration can lift (:mod:`semula.core.calibration`)."""
    if guard_reason is not None:
        return f"guard: {guard_reason}"
    if edit := unlisted_edit(stored_text, incoming_text, settings.scrub_patterns, harmless_only=False):
        return edit
    return kept_layout_differs(stored_text, incoming_text, settings.scrub_patterns)


def _learnt_reason(tier: Tier, score: float, stratum: str, learnt: Mapping[str, float]) -> str | None:
    """Whether the pair's stratum has a learnt threshold its score reaches (None: it serves)."""
    threshold = learnt.get(stratum)
    if threshold is None:
        return f"calibrated: too few {tier} verdicts in stratum {stratum} to learn a threshold"
    if score < threshold:
        return f"score {_below(score, threshold)} (learnt for {stratum})"
    return None
