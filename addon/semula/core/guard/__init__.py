"""The hard guard: refuse a near-match whose changed words carry the answer.

The lexical and embedding tiers both call :func:`guard` on the last user texts
(:mod:`semula.core.nearmatch`). Parts: ``tokens`` (how a text becomes tokens),
``features`` (the values found in them: dates, numbers, negations, ...),
``diff`` (which tokens changed), ``check`` (the named checks), ``edits`` (the
harmless-edit lists of the lexical tier), ``words`` (the English word lists)
and ``languages`` (one data table per language). Pure: may import only
``semula.core`` modules.
"""

from __future__ import annotations

from semula.core.guard import check
from semula.core.guard.check import *  # noqa: F403 - the package's names are the checks'

__all__ = check.__all__
