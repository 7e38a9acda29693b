"""Count the work the near-match core does, so tests can bound it without a clock.

A wall-clock bound ("< 2 s") fails on a loaded runner and proves nothing on a fast one. What
keeps a 1 MB prompt cheap is that the per-token Python loops (the guard's tokeniser, the lexical
tokeniser, difflib) only ever see the part of the texts that differs. `count_work()` wraps those
steps with `unittest.mock.patch(..., wraps=...)` (behaviour unchanged) and records how much input
each one got, so a test can assert that the work stays bounded as the prompt grows.
Speed figures themselves belong in a benchmark script, not in a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from unittest import mock

import semula.core.guard.diff as guard_diff
import semula.core.nearmatch as nearmatch

# Every module that builds a SequenceMatcher on the near-match path.
_MATCHER_MODULES = ("semula.core.guard.diff", "semula.core.guard.check", "semula.core.guard.edits")
# The lexical proposers (DuckDB, Postgres), which turn the request's text into an index query.
_PROPOSER_MODULES = ("semula.store.duckdb.fts", "semula.store.postgres.lexical")


@dataclass
class Work:
    """What the expensive steps were given, one entry per call."""

    guard_chars: list[int] = field(default_factory=list)  # text the guard tokenised and analysed
    lexical_chars: list[int] = field(default_factory=list)  # text the lexical tokeniser read
    difflib_tokens: list[int] = field(default_factory=list)  # len(a) + len(b) of each SequenceMatcher
    query_chars: list[int] = field(default_factory=list)  # text a lexical proposer turned into words
    verdicts: int = 0  # near_match calls made by the engine's search (one per candidate judged)

    @property
    def tokenised_chars(self) -> int:
        """All the characters the per-token Python loops read."""
        return sum(self.guard_chars) + sum(self.lexical_chars)

    @property
    def largest_diff(self) -> int:
        """The most tokens one difflib comparison was given (its cost grows faster than linearly)."""
        return max(self.difflib_tokens, default=0)


@contextmanager
def count_work(max_diff_tokens: int | None = None) -> Iterator[Work]:
    """Count the work inside the block. With ``max_diff_tokens``, a difflib comparison given more
    fails at once, before it runs: an unbounded diff of 1 MB would hang the test, not fail it."""
    work = Work()

    def analyse(text, *args, **kwargs):
        work.guard_chars.append(len(text))
        return real_analyse(text, *args, **kwargs)

    def lexical_tokens(text, *args, **kwargs):
        work.lexical_chars.append(len(text))
        return real_lexical_tokens(text, *args, **kwargs)

    def matcher(isjunk=None, a="", b="", *args, **kwargs):
        work.difflib_tokens.append(len(a) + len(b))
        if max_diff_tokens is not None and len(a) + len(b) > max_diff_tokens:
            raise AssertionError(f"difflib was given {len(a) + len(b)} tokens (at most {max_diff_tokens})")
        return SequenceMatcher(isjunk, a, b, *args, **kwargs)

    def lexical_words(text, *args, **kwargs):
        work.query_chars.append(len(text))
        return nearmatch.lexical_words(text, *args, **kwargs)

    def near_match(*args, **kwargs):
        work.verdicts += 1
        return nearmatch.near_match(*args, **kwargs)

    real_analyse, real_lexical_tokens = guard_diff.analyse, nearmatch.lexical_tokens
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(guard_diff, "analyse", wraps=analyse))
        stack.enter_context(mock.patch.object(nearmatch, "lexical_tokens", wraps=lexical_tokens))
        for module in _MATCHER_MODULES:
            stack.enter_context(mock.patch(f"{module}.SequenceMatcher", wraps=matcher))
        for module in _PROPOSER_MODULES:
            stack.enter_context(mock.patch(f"{module}.lexical_words", wraps=lexical_words))
        stack.enter_context(mock.patch("semula.engine.tiers.base.near_match", wraps=near_match))
        yield work
