"""Polish (pl): negation with nie/nigdy/żaden, number words in their cases (dwa, dwie, dwóch,
dwoma), ordinals and adjectives as stems with case endings."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="pl",
    name="Polish",
    negators={
        "not": "nie nic niczego niczym nikt nikogo nikomu nikim nigdzie żaden żadna żadne żadnego żadnej "
        "żadnych żadnym zaden",
        "never": "nigdy",
        "without": "bez beze",
        "neither": "ani",
        "except": "oprócz poza",
    },
    negating_prefixes="nie bez",
    numbers={
        0: "zero", 1: "jeden jedna jedno jednego jednej jednemu jednym jedną", 2: "dwa dwie dwóch dwoch dwoma dwom dwu",
        3: "trzy trzech trzem trzema", 4: "cztery czterech czterem czterema", 5: "pięć pięciu pięcioma piec",
        6: "sześć sześciu sześcioma", 7: "siedem siedmiu siedmioma", 8: "osiem ośmiu ośmioma",
        9: "dziewięć dziewięciu dziewięcioma", 10: "dziesięć dziesięciu dziesięcioma",
        11: "jedenaście jedenastu", 12: "dwanaście dwunastu", 13: "trzynaście trzynastu", 14: "czternaście czternastu",
        15: "piętnaście piętnastu", 16: "szesnaście szesnastu", 17: "siedemnaście siedemnastu",
        18: "osiemnaście osiemnastu", 19: "dziewiętnaście dziewiętnastu", 20: "dwadzieścia dwudziestu",
        30: "trzydzieści trzydziestu", 40: "czterdzieści czterdziestu", 50: "pięćdziesiąt pięćdziesięciu",
        60: "sześćdziesiąt", 70: "siedemdziesiąt", 80: "osiemdziesiąt", 90: "dziewięćdziesiąt",
        100: "stu", 200: "dwieście dwustu", 300: "trzysta", 1000: "tysiąc tysiące tysięcy",
        10**6: "milion miliony milionów",
    },
    weak_numbers={100: "sto", 1: "raz"},
    ordinals={
        1: "pierwsz+", 2: "drug+", 3: "trzec+", 4: "czwart+", 5: "piąt+", 6: "szóst+", 7: "siódm+", 8: "ósm+",
        9: "dziewiąt+", 10: "dziesiąt+", 11: "jedenast+", 12: "dwunast+", 20: "dwudziest+", 100: "setn+",
    },
    months={
        1: "styczeń stycznia styczniu", 2: "luty lutego lutym", 3: "marzec marca marcu",
        4: "kwiecień kwietnia kwietniu", 5: "maj maja maju", 6: "czerwiec czerwca czerwcu",
        7: "lipiec lipca lipcu", 8: "sierpień sierpnia sierpniu", 9: "wrzesień września wrześniu",
        10: "październik października październiku", 11: "listopad listopada listopadzie",
        12: "grudzień grudnia grudniu",
    },
    weekdays={
        1: "poniedziałek poniedziałku poniedziałki", 2: "wtorek wtorku wtorki", 3: "środa środę środy środzie",
        4: "czwartek czwartku czwartki", 5: "piątek piątku piątki", 6: "sobota sobotę soboty sobocie",
        7: "niedziela niedzielę niedzieli",
    },
    antonyms="""
    więcej|bardziej / mniej; najwyższ+ / najniższ+; wyższ+ / niższ+; przed|wcześniej / po|potem|później; największ+ / najmniejsz+; większ+ / mniejsz+
    duż+ / mał+; zwiększ+|wzrost+|podwyższ+ / zmniejsz+|spad+|obniż+; prawd+|prawdziw+ / fałsz+|fałszyw+
    zezwal+|zezwol+|pozwal+|pozwol+|akceptuj+ / odmaw+|odmów+|zabron+|zakaz+|odrzuć|odrzuc+
    uwzględni+|włącz+ / wyklucz+|wyłącz+; pierwsz+ / ostatni+; minimaln+|minimum / maksymaln+|maksimum
    górę|góry / dół|dołu; otw+|otwart+|otworzy+ / zamk+|zamknięt+|zamkn+; doda+|dodaj+|dodać|dodawać / usu+|usuwa+|usunię+|usunąć|usuń
    rosnąc+ / malejąc+; wejście / wyjście; import+ / eksport+; początek|początku / koniec|końcu
    szybk+ / woln+; now+ / star+; wysok+ / nisk+; dobr+|lepsz+|najlepsz+ / zł+|gorsz+|najgorsz+
    tan+ / drog+; wczesn+ / późn+; gorąc+|ciepł+ / zimn+; dług+ / krótk+; kup+|kupi+ / sprzeda+
    wygr+ / przegr+; wewnątrz|wewnętrzn+ / zewnątrz|zewnętrzn+; lew+ / praw+; zawsze / nigdy; tak / nie
    """,
    quantifiers={
        "all": "wszystkie wszystko wszyscy wszystkich każdy każda każde każdego",
        "some": "niektóre niektórzy kilka kilku",
        "any": "jakikolwiek jakiekolwiek jakiś",
        "both": "oba obie obydwa obu",
        "few": "niewiele",
        "many": "wiele wielu dużo",
        "most": "większość",
        "only": "tylko jedynie",
    },
    endings="y i a e ą ę o u ego ej emu ym im ych ich ymi imi ie ów om ami ach ć ać ić eć yć uje ują ał "
    "ała ało ali ały enie enia eniu",
)
