"""English (en). Most English lists live in :mod:`semula.core.guard.words` (units, names, the
older opposites); this table adds what every language carries: negation classes, quantifiers
and the core opposites, so English is checked like the others."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="en",
    name="English",
    negators={
        "not": "not no none nothing nobody nowhere cannot nope non",
        "never": "never",
        "without": "without w/o lacking lacks",
        "neither": "neither nor",
        "no-longer": "",
        "except": "except excluding unless",
    },
    negating_prefixes="un non in im il ir dis",
    negating_suffixes="less",
    quantifiers={
        "all": "all every everything everyone everybody entire whole",
        "each": "each",
        "some": "some several certain",
        "any": "any anything anyone anybody",
        "none": "none",
        "both": "both",
        "either": "either",
        "neither": "neither",
        "few": "few fewer",
        "many": "many much lots numerous",
        "most": "most majority",
        "only": "only solely",
    },
    antonyms="""
    more / less|fewer; before / after; largest|biggest|greatest / smallest|least|tiniest
    increase / decrease; true / false; allow / deny; include / exclude; first / last
    min|minimum / max|maximum; up / down; open / close; add / remove; enable / disable
    always / never|sometimes; yes / no; accept / reject; success / failure; above / below
    """,
)
