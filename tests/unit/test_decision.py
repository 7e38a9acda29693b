from __future__ import annotations

import pytest

from semula.core.decision import Bypass, Match, decide
from semula.core.modes import Mode

HIT = Match("exact", 7)
NORMALISED = Match("normalised", 8)
HEADER = Bypass("no_cache_header", "header x-semula-no-cache")


@pytest.mark.parametrize(
    "mode, match, bypass, problem, expected",
    [
        # mode          match       bypass  store problem  (decision, action, tier, record)
        (Mode.AUTO, HIT, None, None, ("hit", "serve", "exact", False)),
        (Mode.AUTO, NORMALISED, None, None, ("hit", "serve", "normalised", False)),
        (Mode.AUTO, None, None, None, ("miss", "forward", "none", True)),
        (Mode.REPLAY, HIT, None, None, ("hit", "serve", "exact", False)),
        (Mode.REPLAY, None, None, None, ("miss", "refuse", "none", False)),
        (Mode.RECORD, HIT, None, None, ("miss", "forward", "none", True)),
        (Mode.RECORD, None, None, None, ("miss", "forward", "none", True)),
        (Mode.PASSTHROUGH, HIT, None, None, ("passthrough", "forward", "none", False)),
        (Mode.PASSTHROUGH, None, HEADER, "locked", ("passthrough", "forward", "none", False)),
        (Mode.AUTO, HIT, HEADER, None, ("bypass", "forward", "none", False)),
        (Mode.REPLAY, HIT, HEADER, None, ("bypass", "refuse", "none", False)),
        (Mode.RECORD, None, HEADER, None, ("bypass", "forward", "none", False)),
        (Mode.AUTO, None, None, "locked", ("error", "forward", "none", False)),
        (Mode.RECORD, None, None, "locked", ("error", "forward", "none", False)),
        (Mode.REPLAY, None, None, "locked", ("error", "refuse", "none", False)),
    ],
)
def test_decide(mode, match, bypass, problem, expected):
    d = decide(mode, match, bypass, problem)
    assert (d.decision, d.action, d.tier_label, d.record) == expected
    assert d.reason
    if bypass is not None and mode is not Mode.PASSTHROUGH:
        assert d.bypass_reason == bypass.reason


def test_mode_typo_lists_valid_values():
    with pytest.raises(ValueError, match="auto, replay, record, passthrough"):
        Mode.parse("replya")
