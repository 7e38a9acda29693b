"""core.calibration: thresholds learnt from review verdicts, on synthetic verdicts with known answers."""

from __future__ import annotations

import math
import random

import pytest

from semula.core.calibration import (GRID, MIN_VERDICTS, LabelledVerdict, _binomial_cdf, counts_for_calibration, learn,
                                     upper_bound)


def verdicts(tier: str, scores: list[float], approved: bool) -> list[LabelledVerdict]:
    return [LabelledVerdict(tier, s, approved) for s in scores]


def spaced(n: int, low: float, high: float) -> list[float]:
    return [low + (high - low) * i / max(n - 1, 1) for i in range(n)]


@pytest.mark.parametrize("rejected, n", [(1, 100), (3, 250), (10, 1000), (0, 50)])
def test_the_upper_bound_is_the_clopper_pearson_one(rejected: int, n: int) -> None:
    bound = upper_bound(rejected, n)
    assert bound > rejected / n
    assert _binomial_cdf(rejected, n, bound) == pytest.approx(0.05, abs=1e-6)


def test_known_bounds() -> None:
    assert upper_bound(0, 299) < 0.01 < upper_bound(0, 298)  # the rule of three, exactly: 1 - 0.05 ** (1/n)
    assert upper_bound(1, 100) == pytest.approx(0.0466, abs=1e-4)
    assert upper_bound(0, 0) == 1.0 and upper_bound(5, 5) == 1.0


@pytest.mark.parametrize("approved, bound, serves", [
    (MIN_VERDICTS - 1, 0.5, False),  # too few verdicts, however loose the bound
    (MIN_VERDICTS, 0.5, True),
    (298, 0.01, False),  # 0 rejected of 298: the 95 % bound is just above 1 %
    (299, 0.01, True),
])
def test_too_few_verdicts_never_serve(approved: int, bound: float, serves: bool) -> None:
    tier = learn(verdicts("lexical", spaced(approved, 0.6, 1.0), True), bound).of("lexical", "und")
    assert tier.serves is serves
    if serves:
        assert tier.threshold == pytest.approx(0.6) and tier.rejected_above == 0
    else:
        assert tier.threshold is None and tier.reason


def test_a_tier_without_verdicts_never_serves_and_tiers_are_apart() -> None:
    calibration = learn(verdicts("lexical", spaced(400, 0.7, 1.0), True), 0.01)
    assert calibration.thresholds() == {"lexical": {"und": pytest.approx(0.7)}}
    assert calibration.of("embedding", "und") is None  # no verdicts: no stratum, nothing served


def test_the_threshold_is_the_lowest_that_keeps_the_bound() -> None:
    points = (verdicts("embedding", spaced(900, 0.80, 1.0), True)
              + verdicts("embedding", spaced(20, 0.80, 0.86), False) + verdicts("embedding", [0.95], False))
    bound = 0.05
    tier = learn(points, bound).of("embedding", "und")
    assert tier.serves and tier.upper_bound <= bound
    above = [v for v in points if v.score >= tier.threshold]
    assert tier.approved_above + tier.rejected_above == len(above)
    assert tier.rejected_above == sum(not v.approved for v in above) >= 1  # the rejection at 0.95 is inside
    assert tier.threshold == pytest.approx(0.8)  # the lowest score judged: below it no verdict speaks
    assert learn(points, 0.02).of("embedding", "und").threshold > 0.86  # at 2 % the band of rejections stops it


def test_a_rejection_above_the_first_testable_point_stops_the_stratum() -> None:
    """The fixed sequence's price: at 1 % the first point with 299 verdicts above it holds the 0.95
    rejection, fails, and the search ends there (the uncorrected search went on down and served)."""
    points = verdicts("embedding", spaced(900, 0.80, 1.0), True) + verdicts("embedding", [0.95], False)
    tier = learn(points, 0.01).of("embedding", "und")
    assert not tier.serves and "no grid score" in tier.reason


def test_all_rejections_on_top_never_serves() -> None:
    points = verdicts("lexical", [0.99] * 5, False) + verdicts("lexical", spaced(200, 0.6, 0.98), True)
    tier = learn(points, 0.01).of("lexical", "und")
    assert not tier.serves and "5 rejected of 205" in tier.reason


def test_ties_are_admitted_together() -> None:
    points = verdicts("lexical", [0.9] * 400, True) + verdicts("lexical", [0.9] * 3, False)
    tier = learn(points, 0.02).of("lexical", "und")
    assert tier.approved_above == 400 and tier.rejected_above == 3


def test_the_bound_is_validated() -> None:
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="max_false_hit_rate"):
            learn([], bad)


@pytest.mark.parametrize("reason, guard_reason, counts", [
    ("calibrated: too few lexical verdicts to learn a threshold", None, True),
    ("score 0.83 < serve threshold 1.00", None, True),
    ("score 0.83 < serve threshold 0.91 (learnt)", None, True),
    ("embedding serving is off (no serve threshold)", None, True),
    ("edit not known harmless: cat → dog", None, True),
    ("score 0.83 < serve threshold 1.00", "number 120 ≠ 220", False),  # the guard refuses whatever the score
    ("guard: negation added: not", "negation added: not", False),
    ("small edit, words swapped: a b → b a", None, False),
    ("context differs (system prompt)", None, False),
    (None, None, False),
])
def test_which_verdicts_teach_the_model(reason: str | None, guard_reason: str | None, counts: bool) -> None:
    assert counts_for_calibration(reason, guard_reason) is counts


def _true_rate_above(threshold: float, wrong_at) -> float:
    """The generator's false-hit rate among scores >= threshold (scores uniform on [0.5, 1])."""
    steps = 2000
    xs = [threshold + (1.0 - threshold) * (i + 0.5) / steps for i in range(steps)]
    return sum(wrong_at(x) for x in xs) / steps


def test_the_bound_holds_on_synthetic_verdicts() -> None:
    """Verdicts drawn from a known score -> wrong-rate curve: the learnt threshold's true false-hit rate
    stays under the bound in at least ~90 % of draws (95 % per threshold, less the search's cost)."""
    def wrong_at(score: float) -> float:
        return 0.3 * math.exp(-40 * (score - 0.5))  # 30 % wrong at 0.5, 0.03 % at 1.0

    rng = random.Random(7)
    bound, draws, broken, served = 0.01, 60, 0, 0
    for _ in range(draws):
        points = []
        for _ in range(1500):
            score = rng.uniform(0.5, 1.0)
            points.append(LabelledVerdict("embedding", score, rng.random() >= wrong_at(score)))
        tier = learn(points, bound).of("embedding", "und")
        if tier.serves:
            served += 1
            broken += _true_rate_above(tier.threshold, wrong_at) > bound
    assert served == draws
    assert broken <= 0.1 * draws


def stratum(name: str, scores: list[float], approved: bool, tier: str = "embedding") -> list[LabelledVerdict]:
    return [LabelledVerdict(tier, s, approved, name) for s in scores]


def test_a_rejection_in_one_stratum_leaves_the_others_serving() -> None:
    english = stratum("en", spaced(420, 0.76, 1.0), True)
    foreign = stratum("pt", [0.97], False) + stratum("de", [0.93], False)
    per_stratum = learn(english + foreign, 0.01)
    assert per_stratum.thresholds() == {"embedding": {"en": pytest.approx(0.76)}}
    assert not per_stratum.of("embedding", "pt").serves and "too few" in per_stratum.of("embedding", "pt").reason
    pooled = learn([LabelledVerdict(v.tier, v.score, v.approved, "all") for v in english + foreign], 0.01)
    assert pooled.thresholds() == {}  # what issue 38 saw: two rejections switch serving off everywhere


def test_a_stratum_with_too_few_verdicts_never_serves() -> None:
    calibration = learn(stratum("en", spaced(400, 0.8, 1.0), True) + stratum("fr", spaced(200, 0.8, 1.0), True), 0.01)
    assert calibration.of("embedding", "en").serves
    fr = calibration.of("embedding", "fr")
    assert not fr.serves and "too few" in fr.reason  # 200 approvals: the 1 % bound needs 299


def test_thresholds_are_grid_points_and_strata_and_tiers_are_apart() -> None:
    calibration = learn(stratum("en", spaced(500, 0.655, 1.0), True)
                        + stratum("en", spaced(500, 0.655, 1.0), True, tier="lexical"), 0.01)
    # the lowest grid point with verdicts above it (0.65 admits the ones from 0.655), never lower
    assert calibration.thresholds() == {"embedding": {"en": 0.65}, "lexical": {"en": 0.65}}
    assert all(t in GRID for by in calibration.thresholds().values() for t in by.values())


def test_the_fixed_sequence_stops_at_its_first_failure() -> None:
    """A band of rejections at 0.80-0.82 under a clean region: the search stops above the band even
    though, lower down, enough approvals would dilute the rejections under the bound again."""
    points = (stratum("en", spaced(2000, 0.50, 1.0), True) + stratum("en", [0.81] * 8, False))
    fixed = learn(points, 0.01).of("embedding", "en")
    assert fixed.threshold is not None and fixed.threshold > 0.81
    anywhere = learn(points, 0.05).of("embedding", "en")
    assert anywhere.threshold is not None and anywhere.threshold < fixed.threshold


def test_bonferroni_needs_more_verdicts_than_the_fixed_sequence() -> None:
    points = stratum("en", spaced(400, 0.76, 1.0), True)
    assert learn(points, 0.01).of("embedding", "en").serves
    strict = learn(points, 0.01, correction="bonferroni").of("embedding", "en")
    assert not strict.serves and "690" in strict.reason
    assert learn(stratum("en", spaced(700, 0.76, 1.0), True), 0.01, correction="bonferroni").thresholds()
    with pytest.raises(ValueError, match="correction"):
        learn(points, 0.01, correction="holm")


def test_the_curve_admits_more_verdicts_as_the_threshold_falls() -> None:
    from semula.core.calibration import curve

    verdicts = ([LabelledVerdict("embedding", 0.95, True, "en")] * 3 + [LabelledVerdict("embedding", 0.9, False, "en")]
                + [LabelledVerdict("embedding", 0.85, True, "de")])
    curves = curve(verdicts)
    assert set(curves) == {("embedding", "en"), ("embedding", "de")}
    en = curves["embedding", "en"]
    assert [(p.threshold, p.approved_above, p.rejected_above) for p in en] == [(0.95, 3, 0), (0.9, 3, 1)]
    assert en[0].served_share == 1.0 and en[0].upper_bound == pytest.approx(upper_bound(0, 3))
    assert en[1].upper_bound > en[0].upper_bound
