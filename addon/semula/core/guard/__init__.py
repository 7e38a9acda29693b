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

import importlib
from typing import Any

# The package's names are the checks' (`from semula.core.guard import guard`), read from `check` when first
# asked for: importing `check` builds every language's lexicon (~60 ms), which a proxy's start-up and a
# replay of exact hits never need (`words` and `edits` are imported without it).


def __getattr__(name: str) -> Any:
    check = importlib.import_module("semula.core.guard.check")
    if name == "__all__":
        return check.__all__
    if name in check.__all__:
        return getattr(check, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
