"""The tiers table (core/tiers.py) and the near search's one placement answer (NearSearcher.plan)."""

from __future__ import annotations

import dataclasses

import pytest

from semula.core.calibration import _LIFTABLE_REASONS
from semula.core.cascade import Candidate, NearQuery
from semula.core.decision import Match
from semula.core.nearmatch import Verdict
from semula.core.settings import PARSERS, ProjectSettings
from semula.core.tiers import CERTAIN, NEAR, NEAR_TIERS, Tier, near_tier, tier_label
from semula.engine.near import NearSearcher, Where

SETTING_NAMES = {f.name for f in dataclasses.fields(ProjectSettings)}


def test_the_tier_strings_are_the_ones_the_logs_and_files_hold() -> None:
    assert [str(t) for t in Tier] == ["exact", "normalised", "alias", "lexical", "embedding"]
    assert set(CERTAIN) | set(NEAR) == set(Tier) and not set(CERTAIN) & set(NEAR)
    assert Tier.LEXICAL == "lexical" and {"embedding": 1}[Tier.EMBEDDING] == 1  # equal and hashed as the string


@pytest.mark.parametrize("tier", NEAR)
def test_each_near_tier_names_settings_that_exist_and_parse(tier: Tier) -> None:
    row = NEAR_TIERS[tier]
    assert {row.serve, row.review} <= SETTING_NAMES and {row.serve, row.review} <= set(PARSERS)
    assert f"{tier} serving is off" in _LIFTABLE_REASONS  # calibration may lift every tier's "off"


@pytest.mark.parametrize(("tier", "calibrated", "label"), [
    (None, False, "none"),
    (Tier.EXACT, False, "exact"),
    (Tier.LEXICAL, True, "lexical-calibrated"),
    (Tier.EMBEDDING, False, "embedding"),
])
def test_the_call_logs_label(tier: Tier | None, calibrated: bool, label: str) -> None:
    assert tier_label(tier, calibrated) == label
    if tier is not None:
        assert Match(tier, 1, calibrated=calibrated).label == label


def test_an_unknown_near_tier_names_the_valid_ones() -> None:
    assert near_tier("embedding") is Tier.EMBEDDING
    with pytest.raises(ValueError, match="unknown near-match tier 'exact'; valid tiers: lexical, embedding"):
        near_tier("exact")


class FakeTier:
    """A near tier for placement only: nothing here searches."""

    def __init__(self, tier: Tier, needs_store: bool, serves: bool):
        self.tier, self.needs_store, self._serves = tier, needs_store, serves

    def serves(self, settings: ProjectSettings) -> bool:
        return self._serves


def candidate(serve: bool = False, review: bool = False) -> Candidate:
    return Candidate(1, Verdict(Tier.LEXICAL, 0.9, serve=serve, review=review, reason=None if serve else "score"))


# `plan` reads only the settings: no request is needed to place the search
QUERY = NearQuery("p", None, "fp", "nfp", ProjectSettings())  # type: ignore[arg-type]
LEXICAL = FakeTier(Tier.LEXICAL, needs_store=False, serves=True)
SERVING_STORE_TIER = FakeTier(Tier.EMBEDDING, needs_store=True, serves=True)
QUEUEING_STORE_TIER = FakeTier(Tier.EMBEDDING, needs_store=True, serves=False)


@pytest.mark.parametrize(("tiers", "found", "after_forward", "where", "searched", "deferred"), [
    # the reading tiers only: a served or unreviewable result settles where it is
    ((LEXICAL,), [candidate(serve=True)], False, Where.HERE, (), ()),
    ((LEXICAL,), [], False, Where.HERE, (), ()),
    # something to queue: the store thread, awaited; in auto mode the write waits until after the call
    ((LEXICAL,), [candidate(review=True)], False, Where.STORE, (), ()),
    ((LEXICAL,), [candidate(review=True)], True, Where.QUEUE_LATER, (), ()),
    # a store-thread tier that may serve is searched before deciding, in every mode
    ((LEXICAL, SERVING_STORE_TIER), [], True, Where.STORE, (SERVING_STORE_TIER,), ()),
    # one that can only queue: searched before deciding in replay, after the call in auto mode
    ((LEXICAL, QUEUEING_STORE_TIER), [], False, Where.STORE, (QUEUEING_STORE_TIER,), ()),
    ((LEXICAL, QUEUEING_STORE_TIER), [], True, Where.HERE, (), (QUEUEING_STORE_TIER,)),
    ((LEXICAL, QUEUEING_STORE_TIER), [candidate(review=True)], True, Where.QUEUE_LATER, (), (QUEUEING_STORE_TIER,)),
])
def test_the_plan_places_the_search_once(tiers, found, after_forward, where, searched, deferred) -> None:
    searcher = NearSearcher(store=None, tiers=tiers, review=None)  # type: ignore[arg-type]
    plan = searcher.plan(QUERY, found, after_forward=after_forward)
    assert (plan.where, plan.tiers, plan.deferred) == (where, searched, deferred)
