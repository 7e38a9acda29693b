"""One data table per language the guard reads: negation, numbers, months, weekdays,
opposites and quantifiers. Data only, no code per language: :mod:`semula.core.guard.lexicons`
merges them. A new language is a module here and one entry in ``TABLES``. May import only
``semula.core.guard.languages.table``."""

from __future__ import annotations

from semula.core.guard.languages import ar, de, en, es, fr, hi, it, ja, ko, nl, pl, pt, ru, sv, tr, zh
from semula.core.guard.languages.table import LanguageTable

__all__ = ["TABLES", "LanguageTable"]

TABLES: tuple[LanguageTable, ...] = tuple(
    m.TABLE for m in (en, de, fr, es, pt, it, nl, sv, pl, ru, zh, ja, ko, ar, hi, tr)
)
