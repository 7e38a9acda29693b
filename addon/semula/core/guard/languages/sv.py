"""Swedish (sv): negation with inte/ej/aldrig/ingen, compound numbers (tjugoett), the
definite and plural endings."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="sv",
    name="Swedish",
    negators={
        "not": "inte ej icke ingen inget inga ingenting ingenstans",
        "never": "aldrig",
        "without": "utan",
        "neither": "varken",
        "except": "förutom utom",
    },
    negating_prefixes="o",
    negating_suffixes="lös löst lösa fri fritt fria",
    numbers={
        0: "noll", 2: "två", 3: "tre", 4: "fyra", 5: "fem", 6: "sex", 7: "sju", 8: "åtta", 9: "nio",
        10: "tio", 11: "elva", 12: "tolv", 13: "tretton", 14: "fjorton", 15: "femton", 16: "sexton",
        17: "sjutton", 18: "arton", 19: "nitton", 20: "tjugo", 30: "trettio", 40: "fyrtio", 50: "femtio",
        60: "sextio", 70: "sjuttio", 80: "åttio", 90: "nittio", 100: "hundra etthundra", 1000: "tusen",
        10**6: "miljon miljoner",
    },
    compound_tens={20: "tjugo", 30: "trettio", 40: "fyrtio", 50: "femtio", 60: "sextio", 70: "sjuttio",
                   80: "åttio", 90: "nittio"},
    compound_units={1: "ett en", 2: "två", 3: "tre", 4: "fyra", 5: "fem", 6: "sex", 7: "sju", 8: "åtta", 9: "nio"},
    compound_order="tens-first",
    weak_numbers={1: "en ett"},
    ordinals={
        1: "första", 2: "andra", 3: "tredje", 4: "fjärde", 5: "femte", 6: "sjätte", 7: "sjunde", 8: "åttonde",
        9: "nionde", 10: "tionde", 11: "elfte", 12: "tolfte", 20: "tjugonde", 100: "hundrade",
    },
    months={
        1: "januari", 2: "februari", 3: "mars", 4: "april", 5: "maj", 6: "juni", 7: "juli", 8: "augusti",
        9: "september", 10: "oktober", 11: "november", 12: "december",
    },
    weekdays={1: "måndag", 2: "tisdag", 3: "onsdag", 4: "torsdag", 5: "fredag", 6: "lördag", 7: "söndag"},
    antonyms="""
    mer|mera / mindre; före|innan / efter; störst+ / minst+; större / mindre; stor+ / liten|litet|små
    ök+ / minsk+; sann+|sant / falsk+; tillåt+|tillät+ / neka+|förbjud+|avvis+; inkluder+ / exkluder+
    först+ / sist+; minimum|minimal+ / maximum|maximal+; upp|uppåt / ned|ner|nedåt; öppn+|öppen+ / stäng+
    aktiver+ / inaktiver+|avaktiver+; stigande / fallande; indata / utdata; import+ / export+
    början|start / slut+; snabb+ / långsam+; ny+ / gammal|gamla+; hög+ / låg+; bra|bättre|bäst+ / dålig+|sämre|sämst+
    billig+ / dyr+; tidig+ / sen|sent|sena; varm+ / kall+; lång+ / kort+; köp+ / sälj+|sålt|sålde; vinn+ / förlor+
    inne|inuti / ute|utanför; vänster / höger; alltid / aldrig; ja / nej
    """,
    quantifiers={
        "all": "alla allt all varje",
        "some": "några någon något vissa",
        "both": "båda bägge",
        "few": "få",
        "many": "många mycket",
        "most": "flesta",
        "only": "bara endast enbart",
    },
    endings="a e t en et ar er or na erna arna are ast aste ade at",
)
