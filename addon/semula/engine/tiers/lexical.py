"""The lexical tier: the store's full-text index proposes recordings whose last user text shares
words with the request's; the Dice score of the two texts judges them.

It only reads, through the handle it is given, so it runs on any reader thread: misses search in
parallel. Its index (`store.base.LexicalProposer`) lives in the store's backend.
"""

from __future__ import annotations

from semula.core.cascade import Candidate, NearQuery
from semula.core.settings import ProjectSettings
from semula.core.tiers import Tier
from semula.engine.tiers.base import LearntFor, SearchReads, judge
from semula.store.base import LexicalProposer
from semula.store.types import NewEntry


class LexicalTier:
    tier = Tier.LEXICAL
    needs_store = False  # reads only: any thread with its own store handle

    def __init__(self, proposer: LexicalProposer):
        self.proposer = proposer

    def serves(self, settings: ProjectSettings) -> bool:
        return True  # its serve threshold is always set (1.0 by default: identical words only)

    def candidates(self, reads: SearchReads, query: NearQuery, learnt: LearntFor) -> list[Candidate]:
        ids = self.proposer.propose(query.project, query.request.last_user_text())
        if not ids:
            return []
        return judge(reads, query, self.tier, [(e, None) for e in ids if not reads.rejected(e)], query.settings,
                     learnt)

    def written(self, entry_id: int, new: NewEntry, settings: ProjectSettings) -> None:
        self.proposer.written(entry_id, new.project, new.last_text)

    def deleted(self, entry_id: int) -> None:
        self.proposer.deleted(entry_id)

    def reloaded(self) -> None:
        self.proposer.maybe_rebuild()

    def close(self) -> None:
        self.proposer.close()
