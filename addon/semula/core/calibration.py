"""Serve thresholds learnt from the team's own verdicts (the opt-in calibrated serve mode).

Reviewers approve and reject near-matches; each verdict is a labelled point (tier, score, right or
wrong). From them this module picks, per near-match tier, the lowest score at which serving keeps
the false-hit rate under a bound the user sets: among the verdicts at or above a threshold, the
share that was rejected estimates the rate at which a served near-match there would be wrong, and
a one-sided 95 % Clopper-Pearson upper bound on that share must stay under the bound.

Why per tier, not per recording or per prompt template as vCache (arXiv 2502.03771) does: a bound
of 1 % at 95 % needs at least 299 verdicts with no rejection among them (1 - 0.05 ** (1/n) <= 0.01),
and a project's review queue gives a few per template at best. vCache learns each entry's threshold
online from the answers it sees; semula has only the reviewers' verdicts, so it pools them where
there are enough to bound anything: per tier, because a Dice score and a cosine are different
scales. Clopper-Pearson rather than Wilson because it is exact (never below the nominal level) at
the small rejected counts that decide here.

What it never does: serve where it knows too little (fewer than `MIN_VERDICTS` verdicts at or above
the threshold, or a bound it cannot meet), or lift a refusal that is not about the score. The guard's
named reasons, shape and context checks, bypass rules and the meaning-change edit checks stay; only
verdicts that those let through teach the model (`counts_for_calibration`).

Caveats. Once calibrated mode serves above a threshold, those pairs no longer reach a reviewer, so
later verdicts come from below it and the region it serves is known only from the verdicts given
before (vCache explores at random for this; semula does not). And picking the lowest threshold that
passes looks at many thresholds with one data set, so the bound holds per threshold, not for the
search as a whole; the held-out measurement (scripts/bench/calibration.py,
benchmark/results/calibration.md) checks how much that costs.

Pure: plain values in, frozen values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from semula.core.tiers import NEAR

__all__ = [
    "CONFIDENCE",
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

# A queued verdict teaches the model only when calibration could have served it: nothing but the
# score (or the lexical tier's harmless-word list, which calibration replaces) held it back.
_LIFTABLE_REASONS = ("score ", "edit not known harmless", "calibrated:", *(f"{t} serving is off" for t in NEAR))


@dataclass(frozen=True)
class LabelledVerdict:
    tier: str
    score: float
    approved: bool


@dataclass(frozen=True)
class TierThreshold:
    """One tier's learnt threshold and the evidence behind it."""

    tier: str
    threshold: float | None  # None: too few verdicts, or no score meets the bound: never serves
    approved: int  # verdicts of this tier in total
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
    tiers: Mapping[str, TierThreshold]

    def thresholds(self) -> dict[str, float]:
        """{tier: threshold} for the tiers that serve."""
        return {t: v.threshold for t, v in self.tiers.items() if v.threshold is not None}


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


def _learn_tier(tier: str, points: Sequence[LabelledVerdict], bound: float, min_verdicts: int,
                confidence: float) -> TierThreshold:
    approved = sum(1 for v in points if v.approved)
    rejected = len(points) - approved
    if len(points) < min_verdicts:
        return TierThreshold(tier, None, approved, rejected, approved, rejected, None, None,
                             f"too few verdicts: {len(points)} < {min_verdicts}")
    ordered = sorted(points, key=lambda v: -v.score)
    best: tuple[float, int, int] | None = None
    seen_ok = seen_bad = 0
    # Thresholds are the distinct scores, highest first; a threshold admits every verdict at or above it.
    for i, verdict in enumerate(ordered):
        seen_ok += verdict.approved
        seen_bad += not verdict.approved
        if i + 1 < len(ordered) and ordered[i + 1].score == verdict.score:
            continue  # a tie: the threshold admits all of them together
        n = seen_ok + seen_bad
        if n >= min_verdicts and seen_bad <= bound * n and _within(seen_bad, n, bound, confidence):
            best = (verdict.score, seen_ok, seen_bad)
    if best is None:
        return TierThreshold(tier, None, approved, rejected, approved, rejected, rejected / len(points),
                             upper_bound(rejected, len(points), confidence),
                             f"no score keeps the {confidence:.0%} bound under {bound:.2%}: "
                             f"{rejected} rejected of {len(points)}")
    threshold, ok, bad = best
    n = ok + bad
    return TierThreshold(tier, threshold, approved, rejected, ok, bad, bad / n, upper_bound(bad, n, confidence),
                         f"serves at or above {threshold:.4f}: {bad} rejected of {n}")


def learn(verdicts: Iterable[LabelledVerdict], max_false_hit_rate: float = 0.01, *,
          min_verdicts: int = MIN_VERDICTS, confidence: float = CONFIDENCE) -> Calibration:
    """Each tier's lowest threshold whose rejected share has its upper bound at or under the rate."""
    if not 0.0 < max_false_hit_rate < 1.0:
        raise ValueError(f"max_false_hit_rate must be between 0 and 1, got {max_false_hit_rate!r}")
    by_tier: dict[str, list[LabelledVerdict]] = {t: [] for t in NEAR}
    for verdict in verdicts:
        by_tier.setdefault(verdict.tier, []).append(verdict)
    return Calibration(max_false_hit_rate, {
        tier: _learn_tier(tier, points, max_false_hit_rate, min_verdicts, confidence)
        for tier, points in by_tier.items()
    })
