"""Serve thresholds learnt from the team's own verdicts (the opt-in calibrated serve mode).

Reviewers approve and reject near-matches; each verdict is a labelled point (tier, stratum, score,
right or wrong). From them this module picks, per near-match tier and per stratum, the lowest score
at which serving keeps the false-hit rate under a bound the user sets: among the verdicts at or above
a threshold, the share that was rejected estimates the rate at which a served near-match there would
be wrong, and a one-sided 95 % Clopper-Pearson upper bound on that share must stay under the bound.

Strata. A stratum is the pair's languages (:func:`semula.core.guard.language.languages_of_pair`:
"en", "de", "en+fr"). The guard's tables, the embedding model and the reviewers' habits all differ by
language, so one rejected Portuguese pair says little about English ones, and pooling them let a
single bad verdict in one language switch serving off in every other (issue 38). Not per template or
endpoint: a bound of 1 % at 95 % needs at least 299 verdicts with no rejection among them
(1 - 0.05 ** (1/n) <= 0.01), and a project's review queue gives a few per template at best; a stratum
with fewer verdicts never serves. Per tier, because a Dice score and a cosine are different scales.
vCache (arXiv 2502.03771) learns each entry's threshold online from the answers it sees; semula has
only the reviewers' verdicts, so it pools them where there are enough to bound anything.

The search over thresholds. Trying many thresholds on one data set and keeping the lowest that
passes would make the bound hold per threshold, not for the search. The thresholds tried are a fixed
grid (`GRID`, 1.00 down to 0.50 by 0.01, chosen before any verdict is seen), tested in that order
from the top, and the search stops at the first grid point whose bound fails: fixed-sequence testing
("Learn then Test", Angelopoulos et al. 2021), which keeps the chance that any threshold it accepts
is worse than the bound under 5 % for the whole search, with no share of the 5 % spent per point.
Grid points with fewer than `MIN_VERDICTS` verdicts at or above them, so few that even no rejection
could meet the bound, or no verdict between them and the point above are skipped without a test:
which points those are depends on the scores alone, never on the verdicts, so the order stays fixed
given the scores (and no threshold falls further below the lowest judged score than one grid step). `correction=
"bonferroni"` instead tests every grid point at 5 % / len(GRID) and keeps the lowest that passes
(valid too, and much stricter: 0 rejections in 690 verdicts for 1 % with 51 points, against 299).
Clopper-Pearson rather than Wilson because it is exact (never below the nominal level) at the small
rejected counts that decide here.

What it never does: serve where it knows too little, or lift a refusal that is not about the score.
The guard's named reasons, the language gate, shape and context checks, bypass rules and the
meaning-change edit checks stay; only verdicts that those let through teach the model
(`counts_for_calibration`).

Caveat: once calibrated mode serves above a threshold, those pairs no longer reach a reviewer, so
later verdicts come from below it and the region it serves is known only from the verdicts given
before (vCache explores at random for this; semula does not). The held-out measurement
(scripts/bench/calibration.py, benchmark/results/calibration.md) checks what the bound promises.

Pure: plain values in, frozen values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from semula.core.tiers import NEAR

__all__ = [
    "CONFIDENCE",
    "CORRECTIONS",
    "GRID",
    "MIN_VERDICTS",
    "Calibration",
    "LabelledVerdict",
    "TierThreshold",
    "counts_for_calibration",
    "learn",
    "upper_bound",
]

CONFIDENCE = 0.95
# Never serve on fewer verdicts than this at or above the threshold, whatever the bound: below ~30
# a bound as loose as 10 % is met by a single unlucky run of approvals, and the verdicts may come
# from one reviewer's afternoon. At 1 % the bound itself asks for at least 299.
MIN_VERDICTS = 30
# The thresholds tried, highest first, fixed before any verdict is seen.
GRID = tuple(round(1.0 - i / 100, 2) for i in range(51))
CORRECTIONS = ("fixed-sequence", "bonferroni")

# A queued verdict teaches the model only when calibration could have served it: nothing but the
# score (or the lexical tier's harmless-word list, which calibration replaces) held it back.
_LIFTABLE_REASONS = ("score ", "edit not known harmless", "calibrated:", *(f"{t} serving is off" for t in NEAR))


@dataclass(frozen=True)
class LabelledVerdict:
    tier: str
    score: float
    approved: bool
    stratum: str = "und"  # the pair's languages (`Languages.stratum`)


@dataclass(frozen=True)
class TierThreshold:
    """One tier's learnt threshold in one stratum and the evidence behind it."""

    tier: str
    stratum: str
    threshold: float | None  # None: too few verdicts, or no score meets the bound: never serves
    approved: int  # verdicts of this tier and stratum in total
    rejected: int
    approved_above: int  # at or above the threshold (or, with none, at or above the best score tried)
    rejected_above: int
    estimate: float | None  # rejected share at or above the threshold
    upper_bound: float | None  # its one-sided Clopper-Pearson bound at `CONFIDENCE`
    reason: str  # why it serves from there, or why it never serves

    @property
    def serves(self) -> bool:
        return self.threshold is not None


@dataclass(frozen=True)
class Calibration:
    max_false_hit_rate: float
    strata: tuple[TierThreshold, ...]  # tier by tier, strata by verdicts (most first)
    correction: str = "fixed-sequence"

    def thresholds(self) -> dict[str, dict[str, float]]:
        """{tier: {stratum: threshold}} for the strata that serve."""
        out: dict[str, dict[str, float]] = {}
        for s in self.strata:
            if s.threshold is not None:
                out.setdefault(s.tier, {})[s.stratum] = s.threshold
        return out

    def of(self, tier: str, stratum: str) -> TierThreshold | None:
        return next((s for s in self.strata if s.tier == tier and s.stratum == stratum), None)


def counts_for_calibration(reason: str | None, guard_reason: str | None) -> bool:
    """Whether a resolved review candidate is a verdict the model learns from (see `_LIFTABLE_REASONS`)."""
    return guard_reason is None and reason is not None and reason.startswith(_LIFTABLE_REASONS)


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (n up to many thousands)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        log_term = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        total += math.exp(log_term)
    return min(total, 1.0)


def upper_bound(rejected: int, n: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper bound on a rate seen as `rejected` in `n`: the p at which
    seeing `rejected` or fewer has probability 1 - confidence."""
    if n <= 0:
        return 1.0
    if rejected >= n:
        return 1.0
    alpha = 1.0 - confidence
    if rejected == 0:
        return 1.0 - alpha ** (1.0 / n)  # the closed form
    low, high = rejected / n, 1.0
    for _ in range(60):  # bisection: the CDF falls as p rises
        mid = (low + high) / 2
        if _binomial_cdf(rejected, n, mid) > alpha:
            low = mid
        else:
            high = mid
    return high


def _within(rejected: int, n: int, bound: float, confidence: float) -> bool:
    """upper_bound(rejected, n) <= bound, without the bisection: the Clopper-Pearson bound is at or
    under p exactly when seeing `rejected` or fewer at rate p is at most 1 - confidence likely."""
    return _binomial_cdf(rejected, n, bound) <= 1.0 - confidence


def _needed(bound: float, confidence: float) -> int:
    """The fewest verdicts with no rejection whose bound meets `bound`: 1 - alpha ** (1/n) <= bound."""
    return math.ceil(math.log(1.0 - confidence) / math.log1p(-bound) - 1e-9)


def _learn_stratum(tier: str, stratum: str, points: Sequence[LabelledVerdict], bound: float,
                   min_verdicts: int, confidence: float, correction: str) -> TierThreshold:
    approved = sum(1 for v in points if v.approved)
    rejected = len(points) - approved
    if len(points) < min_verdicts:
        return TierThreshold(tier, stratum, None, approved, rejected, approved, rejected, None, None,
                             f"too few verdicts: {len(points)} < {min_verdicts}")
    level = confidence if correction == "fixed-sequence" else 1.0 - (1.0 - confidence) / len(GRID)
    fewest = max(min_verdicts, _needed(bound, level))
    best: tuple[float, int, int] | None = None
    tested = admitted = 0
    for threshold in GRID:  # from the top: each admits every verdict at or above it
        ok = sum(1 for v in points if v.approved and v.score >= threshold)
        bad = sum(1 for v in points if not v.approved and v.score >= threshold)
        if ok + bad < fewest or ok + bad == admitted:
            continue  # too few to pass whatever they say, or no verdict between it and the point above:
            # skipped, untested (decided by the scores alone), so it never serves scores nobody judged
        admitted = ok + bad
        tested += 1
        if _within(bad, ok + bad, bound, level):
            best = (threshold, ok, bad)
        elif correction == "fixed-sequence":
            break  # the sequence stops at its first failure
    if best is None:
        why = (f"too few verdicts: {len(points)} < {fewest} (0 rejected would be needed in {fewest})"
               if tested == 0 else f"no grid score keeps the {confidence:.0%} bound under {bound:.2%}")
        return TierThreshold(tier, stratum, None, approved, rejected, approved, rejected, rejected / len(points),
                             upper_bound(rejected, len(points), confidence), f"{why}: {rejected} rejected of {len(points)}")
    threshold, ok, bad = best
    n = ok + bad
    return TierThreshold(tier, stratum, threshold, approved, rejected, ok, bad, bad / n, upper_bound(bad, n, level),
                         f"serves at or above {threshold:.2f}: {bad} rejected of {n}")


@dataclass(frozen=True)
class CurvePoint:
    """At one grid threshold, in one tier and stratum: what calibrated serving would admit there."""

    threshold: float
    approved_above: int  # verdicts at or above it: served, had they been asked again
    rejected_above: int
    served_share: float  # of the stratum's approved verdicts, the share at or above it
    upper_bound: float  # the rejected share's one-sided Clopper-Pearson bound (per threshold, uncorrected)


def curve(verdicts: Iterable[LabelledVerdict]) -> dict[tuple[str, str], list[CurvePoint]]:
    """Per tier and stratum, the grid from the top: served share and estimated error by threshold (the
    report's calibration curve, `semula calibrate --curve`). Only thresholds that admit new verdicts."""
    groups: dict[tuple[str, str], list[LabelledVerdict]] = {}
    for verdict in verdicts:
        groups.setdefault((verdict.tier, verdict.stratum), []).append(verdict)
    out: dict[tuple[str, str], list[CurvePoint]] = {}
    for key, points in groups.items():
        approved = sum(1 for v in points if v.approved) or 1
        rows, admitted = [], 0
        for threshold in GRID:
            ok = sum(1 for v in points if v.approved and v.score >= threshold)
            bad = sum(1 for v in points if not v.approved and v.score >= threshold)
            if ok + bad == admitted:
                continue
            admitted = ok + bad
            rows.append(CurvePoint(threshold, ok, bad, ok / approved, upper_bound(bad, ok + bad)))
        out[key] = rows
    return out


def learn(verdicts: Iterable[LabelledVerdict], max_false_hit_rate: float = 0.01, *,
          min_verdicts: int = MIN_VERDICTS, confidence: float = CONFIDENCE,
          correction: str = "fixed-sequence") -> Calibration:
    """Each tier's and stratum's lowest grid threshold whose rejected share has its upper bound at or
    under the rate (see the module's docstring for the search and its correction)."""
    if not 0.0 < max_false_hit_rate < 1.0:
        raise ValueError(f"max_false_hit_rate must be between 0 and 1, got {max_false_hit_rate!r}")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
    groups: dict[tuple[str, str], list[LabelledVerdict]] = {}
    for verdict in verdicts:
        groups.setdefault((verdict.tier, verdict.stratum), []).append(verdict)
    tiers = [str(t) for t in NEAR]
    order = sorted(groups, key=lambda k: (tiers.index(k[0]) if k[0] in tiers else len(tiers), -len(groups[k]), k))
    return Calibration(max_false_hit_rate, tuple(
        _learn_stratum(tier, stratum, groups[(tier, stratum)], max_false_hit_rate, min_verdicts, confidence,
                       correction) for tier, stratum in order), correction)
