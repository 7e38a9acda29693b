"""German (de): negation with nicht/kein*/nie, compound numbers (einundzwanzig), inflected
adjectives and verbs (stems ending in ``+`` take the endings below)."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="de",
    name="German",
    negators={
        "not": "nicht kein keine keinen keinem keiner keines keins nichts niemand niemanden niemandem "
        "nirgends nirgendwo keinerlei keineswegs keinesfalls",
        "never": "nie niemals nimmer",
        "without": "ohne",
        "neither": "weder",
        "except": "außer ausser ausgenommen",
    },
    negating_prefixes="un miss",
    negating_suffixes="los lose losen loser loses frei freie freien",
    numbers={
        1: "eins", 2: "zwei zwo", 3: "drei", 4: "vier", 5: "fünf", 6: "sechs", 7: "sieben",
        8: "acht", 9: "neun", 10: "zehn", 11: "elf", 12: "zwölf", 13: "dreizehn", 14: "vierzehn",
        15: "fünfzehn", 16: "sechzehn", 17: "siebzehn", 18: "achtzehn", 19: "neunzehn", 20: "zwanzig",
        30: "dreißig dreissig", 40: "vierzig", 50: "fünfzig", 60: "sechzig", 70: "siebzig", 80: "achtzig",
        90: "neunzig", 100: "hundert einhundert", 200: "zweihundert", 300: "dreihundert",
        1000: "tausend eintausend", 2000: "zweitausend", 10**6: "million millionen", 10**9: "milliarde milliarden",
        2.5: "zweieinhalb", 1.5: "anderthalb eineinhalb",
    },
    compound_tens={20: "zwanzig", 30: "dreißig dreissig", 40: "vierzig", 50: "fünfzig", 60: "sechzig",
                   70: "siebzig", 80: "achtzig", 90: "neunzig"},
    compound_units={1: "einund", 2: "zweiund", 3: "dreiund", 4: "vierund", 5: "fünfund", 6: "sechsund",
                    7: "siebenund", 8: "achtund", 9: "neunund"},
    compound_order="unit-first",
    weak_numbers={1: "ein eine einen einem einer eines", 0: "null"},
    ordinals={
        1: "erst+", 2: "zweit+", 3: "dritt+", 4: "viert+", 5: "fünft+", 6: "sechst+", 7: "siebt+ siebent+",
        8: "acht+", 9: "neunt+", 10: "zehnt+", 11: "elft+", 12: "zwölft+", 20: "zwanzigst+",
        100: "hundertst+", 1000: "tausendst+",
    },
    months={
        1: "januar jänner jan", 2: "februar feber feb", 3: "märz maerz", 4: "april apr", 5: "mai",
        6: "juni", 7: "juli", 8: "august aug", 9: "september sept", 10: "oktober okt", 11: "november nov",
        12: "dezember dez",
    },
    weekdays={
        1: "montag montags", 2: "dienstag dienstags", 3: "mittwoch mittwochs", 4: "donnerstag donnerstags",
        5: "freitag freitags", 6: "samstag samstags sonnabend", 7: "sonntag sonntags",
    },
    antonyms="""
    mehr|mehrere / weniger; vor|vorher|bevor|davor / nach|nachher|danach; größt+|grösst+ / kleinst+
    größer+|grösser+ / kleiner+; groß+|gross+ / klein+; erhöh+|steiger+|zunehm+|zunahme|anstieg / verringer+|senk+|abnehm+|abnahme|rückgang
    wahr / falsch; richtig / falsch; erlaub+|zulass+|gestatt+ / verbiet+|verweiger+|verbot+
    einschließ+|einschliess+|inklusive / ausschließ+|ausschliess+|exklusive; erst+ / letzt+
    minimum|minimal+|mindest+ / maximum|maximal+|höchst+; auf|hoch|oben|aufwärts / ab|runter|unten|abwärts
    öffn+|offen+|geöffnet+ / schließ+|schliess+|geschlossen+; hinzufüg+|ergänz+ / entfern+|lösch+
    aktivier+ / deaktivier+; aufsteigend+ / absteigend+; eingabe / ausgabe; import+ / export+
    anfang|beginn|start / ende|schluss; schnell+ / langsam+; neu+ / alt+; hoch+|höher+ / niedrig+|tief+
    billig+|günstig+ / teuer+|teur+; früh+ / spät+; heiß+ / kalt+; lang+ / kurz+; gut+|besser+|best+ / schlecht+|schlimm+
    kauf+ / verkauf+; gewinn+ / verlier+|verlust+; über / unter; innen|intern+ / außen|extern+; links / rechts
    immer / nie; ja / nein; plus / minus
    """,
    quantifiers={
        "all": "alle alles aller allen jede jeder jedes jeden jedem sämtliche ganze",
        "some": "einige manche etliche etwas",
        "any": "irgendein irgendeine irgendwelche",
        "both": "beide beiden beides",
        "few": "wenige wenigen",
        "many": "viele vielen viel",
        "most": "meiste meisten",
        "only": "nur lediglich",
    },
    endings="e en er es em n s t st te ten et",
)
