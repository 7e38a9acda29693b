"""The near-match tiers: each proposes recordings for a request and keeps its index in step.

A tier is one module here implementing `base.NearTier` and one line in `open_tiers`, plus its
`core.tiers.Tier` member and `NEAR_TIERS` row; `engine.near.NearSearcher` runs them in order and
places them on threads.
"""

from __future__ import annotations

from typing import Any

from semula.engine.tiers.base import NearTier
from semula.engine.tiers.lexical import LexicalTier
from semula.store.base import LexicalProposer, RecordingStore


def open_tiers(store: RecordingStore, lexical: LexicalProposer, embedder: Any = None) -> list[NearTier]:
    """The near tiers over one store, in the order they search (`core.tiers.NEAR`): the opt-in
    ones only when switched on. A new tier is one line here."""
    tiers: list[NearTier] = [LexicalTier(lexical)]
    if embedder is not None:
        from semula.engine.tiers.embedding import EmbeddingTier  # numpy and the model: only when on

        tiers.append(EmbeddingTier(store.vectors, embedder))
    return tiers
