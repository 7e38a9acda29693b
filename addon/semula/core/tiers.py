"""The matching tiers, named once: which are certain, which are near, and where each near tier's
thresholds live in the project settings.

A tier's value is the string the call log, the review queue, the recordings folder's shared
rejections, the response headers and the review page have always shown, so a `Tier` compares
(and serialises) equal to it. A new near tier is one member here, one `NEAR_TIERS` row and one
module under `engine/tiers/` (vcrpy's habit: a matcher is a name plus one table entry).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Tier(StrEnum):
    """A matching tier: the call log's `tier` column and the review queue's."""

    EXACT = "exact"  # the redacted body and request line
    NORMALISED = "normalised"  # texts normalised, volatile values scrubbed
    ALIAS = "alias"  # a request a reviewer approved for a recording
    LEXICAL = "lexical"  # word overlap (Dice) of the last user texts
    EMBEDDING = "embedding"  # cosine of the last user texts' vectors (opt-in)


# The fingerprint tiers, in the order the cascade asks them: a hit here is served without a score.
CERTAIN: tuple[Tier, ...] = (Tier.EXACT, Tier.NORMALISED, Tier.ALIAS)

# What the call log says when no tier matched, and after a served near tier when a learnt
# threshold (calibrated mode) served it: `lexical-calibrated`.
NO_TIER = "none"
CALIBRATED_SUFFIX = "-calibrated"


@dataclass(frozen=True)
class NearRow:
    """One near tier's settings: the `ProjectSettings` fields holding its thresholds, and its rules."""

    serve: str  # its serve threshold's setting (None in the settings: it never serves)
    review: str  # its review threshold's setting
    per_model: bool = False  # a setting may be {model: threshold} (cosines differ between models)
    # Only the harmless-word list may differ (the lexical tier: a high word overlap proves nothing
    # about the words that differ); else only edits that change the question refuse.
    harmless_edits_only: bool = False


NEAR_TIERS: Mapping[Tier, NearRow] = {
    Tier.LEXICAL: NearRow("lexical_serve_threshold", "lexical_review_threshold", harmless_edits_only=True),
    Tier.EMBEDDING: NearRow("embedding_serve_threshold", "embedding_review_threshold", per_model=True),
}

# The near tiers, in the order the search runs them (the cheap index first).
NEAR: tuple[Tier, ...] = tuple(NEAR_TIERS)


def near_tier(value: Tier | str) -> Tier:
    """`value` as a near tier; a clear error naming the valid ones for anything else."""
    if value in NEAR_TIERS:
        return Tier(value)
    raise ValueError(f"unknown near-match tier {str(value)!r}; valid tiers: {', '.join(NEAR)}")


def near_row(tier: Tier | str) -> NearRow:
    """The near tier's row (its threshold settings and rules)."""
    return NEAR_TIERS[near_tier(tier)]


def tier_label(tier: Tier | None, calibrated: bool = False) -> str:
    """The call log's tier: `none`, the tier, or `<tier>-calibrated` when a learnt threshold served it."""
    if tier is None:
        return NO_TIER
    return f"{tier}{CALIBRATED_SUFFIX}" if calibrated else str(tier)
