"""Dutch (nl): negation with niet/geen/nooit, compound numbers (eenentwintig), inflected
adjectives (-e) and verbs."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="nl",
    name="Dutch",
    negators={
        "not": "niet geen niets niemand nergens geenszins",
        "never": "nooit",
        "without": "zonder",
        "neither": "noch",
        "except": "behalve uitgezonderd",
    },
    negating_prefixes="on",
    negating_suffixes="loos loze vrij vrije",
    numbers={
        2: "twee", 3: "drie", 4: "vier", 5: "vijf", 6: "zes", 7: "zeven", 8: "acht", 9: "negen",
        10: "tien", 11: "elf", 12: "twaalf", 13: "dertien", 14: "veertien", 15: "vijftien", 16: "zestien",
        17: "zeventien", 18: "achttien", 19: "negentien", 20: "twintig", 30: "dertig", 40: "veertig",
        50: "vijftig", 60: "zestig", 70: "zeventig", 80: "tachtig", 90: "negentig", 100: "honderd",
        1000: "duizend", 10**6: "miljoen", 10**9: "miljard",
    },
    compound_tens={20: "twintig", 30: "dertig", 40: "veertig", 50: "vijftig", 60: "zestig", 70: "zeventig",
                   80: "tachtig", 90: "negentig"},
    compound_units={1: "eenen", 2: "tweeën tweeen", 3: "drieën drieen", 4: "vieren", 5: "vijfen", 6: "zesen",
                    7: "zevenen", 8: "achten", 9: "negenen"},
    compound_order="unit-first",
    weak_numbers={1: "een één", 0: "nul"},
    ordinals={
        1: "eerste", 2: "tweede", 3: "derde", 4: "vierde", 5: "vijfde", 6: "zesde", 7: "zevende", 8: "achtste",
        9: "negende", 10: "tiende", 11: "elfde", 12: "twaalfde", 20: "twintigste", 100: "honderdste",
    },
    months={
        1: "januari", 2: "februari", 3: "maart", 4: "april", 5: "mei", 6: "juni", 7: "juli", 8: "augustus",
        9: "september", 10: "oktober", 11: "november", 12: "december",
    },
    weekdays={1: "maandag", 2: "dinsdag", 3: "woensdag", 4: "donderdag", 5: "vrijdag", 6: "zaterdag", 7: "zondag"},
    antonyms="""
    meer / minder; voor|voordat|vóór / na|nadat|daarna; grootst+ / kleinst+; groter+ / kleiner+; groot+|grote+ / klein+
    verhog+|verhoogd+|toename|toenemen|stijg+ / verlag+|verlaagd+|afname|afnemen|daal+|daling; waar / onwaar|vals+
    toestaan|toegestaan+|accepter+ / weiger+|verbied+|verboden+; inclusief|insluiten / exclusief|uitsluiten
    eerst+ / laatst+; minimum|minimaal+ / maximum|maximaal+; omhoog|op / omlaag|neer; open+|openen / sluit+|sluiten|dicht|gesloten
    toevoeg+|toegevoegd+ / verwijder+; inschakel+|activer+ / uitschakel+|deactiver+; oplopend+ / aflopend+
    invoer / uitvoer; import+ / export+; begin|start / einde|eind; snel+ / langzaam+|traag+; nieuw+ / oud+
    hoog+|hoge+ / laag+|lage+; goed+|beter+|best+ / slecht+|erger+; goedkoop|goedkope+ / duur|dure+; vroeg+ / laat|late+
    warm+|heet|hete+ / koud+; lang+ / kort+; kop+|koop+ / verkop+|verkoop+; win+ / verlie+; binnen / buiten
    links / rechts; altijd / nooit; ja / nee
    """,
    quantifiers={
        "all": "alle alles elk elke ieder iedere",
        "some": "sommige enkele enige wat",
        "any": "enig",
        "both": "beide beiden",
        "few": "weinig weinige",
        "many": "veel vele",
        "most": "meeste",
        "only": "alleen slechts enkel",
    },
    endings="e en er ere st ste t te ten d de den s",
)
