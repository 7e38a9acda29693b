"""Italian (it): negation with non/mai/niente/nessuno, numbers (ventuno, trentadue),
gender and plural endings."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="it",
    name="Italian",
    negators={
        "not": "non niente nulla nessuno nessuna nessun né neanche nemmeno neppure",
        "never": "mai",
        "without": "senza",
        "except": "tranne eccetto salvo",
    },
    negating_prefixes="in im il ir dis s anti",
    numbers={
        0: "zero", 3: "tre", 4: "quattro", 5: "cinque", 7: "sette", 8: "otto", 9: "nove",
        10: "dieci", 11: "undici", 12: "dodici", 13: "tredici", 14: "quattordici", 15: "quindici",
        16: "sedici", 17: "diciassette", 18: "diciotto", 19: "diciannove", 100: "cento", 1000: "mille mila",
        10**6: "milione milioni", 10**9: "miliardo miliardi",
    },
    compound_tens={
        20: "venti vent", 30: "trenta trent", 40: "quaranta quarant", 50: "cinquanta cinquant",
        60: "sessanta sessant", 70: "settanta settant", 80: "ottanta ottant", 90: "novanta novant",
    },
    compound_units={1: "uno", 2: "due", 3: "tre tré", 4: "quattro", 5: "cinque", 6: "sei", 7: "sette", 8: "otto", 9: "nove"},
    compound_order="tens-first",
    weak_numbers={1: "un una uno", 2: "due", 6: "sei"},
    ordinals={
        1: "primo primi", 2: "seconda secondi", 3: "terzo terza terzi", 4: "quarto quarta", 5: "quinto quinta",
        6: "sesto sesta", 7: "settimo settima", 8: "ottavo ottava", 9: "nono nona", 10: "decimo decima",
    },
    months={
        1: "gennaio", 2: "febbraio", 3: "marzo", 4: "aprile", 5: "maggio", 6: "giugno", 7: "luglio",
        8: "agosto", 9: "settembre", 10: "ottobre", 11: "novembre", 12: "dicembre",
    },
    weekdays={
        1: "lunedì lunedi", 2: "martedì martedi", 3: "mercoledì mercoledi", 4: "giovedì giovedi",
        5: "venerdì venerdi", 6: "sabato", 7: "domenica",
    },
    antonyms="""
    più|piu / meno; prima / dopo; maggior+ / minor+; grand+ / piccol+
    aument+|cresc+|increment+ / diminu+|ridu+|ridott+|cal+|decrement+; ver+ / fals+
    permett+|consent+|accett+ / neg+|rifiut+|viet+; inclu+ / esclu+; prim+ / ultim+
    minim+ / massim+; su|sopra / giù|giu|sotto; apr+|apert+ / chiud+|chius+; aggiung+|aggiunt+ / rimuov+|rimoss+|elimin+|cancell+
    abilit+|attiv+ / disabilit+|disattiv+; crescente / decrescente; ingresso|entrata / uscita; import+ / esport+
    inizio|inizi+ / fine|finir+|termin+; veloc+|rapid+ / lent+; nuov+ / vecchi+; alt+ / bass+
    buon+|miglior+ / cattiv+|peggior+; economic+ / costos+|car+; presto / tardi; cald+ / fredd+; lung+ / cort+
    compr+ / vend+; vinc+ / perd+; dentro|intern+ / fuori|estern+; sinistr+ / destr+; sempre / mai; sì / no
    """,
    quantifiers={
        "all": "tutto tutti tutta tutte ogni ciascuno ciascuna",
        "some": "alcuni alcune qualche parecchi",
        "any": "qualsiasi qualunque",
        "both": "entrambi entrambe ambedue",
        "few": "pochi poche",
        "many": "molti molte molto molta tanti",
        "most": "maggioranza",
        "only": "solo soltanto solamente",
    },
    endings="o a i e are ere ire ato ata ati ate ito ita uto uta ando endo iamo ano ono",
)
