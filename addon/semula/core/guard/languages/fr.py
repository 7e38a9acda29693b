"""French (fr): discontinuous negation (ne … pas / jamais / plus / rien / personne / que),
numbers with hyphens (vingt-deux, soixante-dix), gender and plural endings."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="fr",
    name="French",
    negators={
        "not": "pas aucun aucune aucuns aucunes nullement rien non",
        "never": "jamais",
        "without": "sans",
        "neither": "ni",
        "except": "sauf excepté hormis",
    },
    not_negators="n'importe",
    frame_openers="ne n'",
    frame_partners={
        "not": "pas point aucun aucune rien personne nul nulle guère",
        "never": "jamais",
        "no-longer": "plus",
        "neither": "ni",
        "only": "que qu'",
    },
    negating_prefixes="in im il ir dé dés mé anti non",
    numbers={
        0: "zéro", 2: "deux", 3: "trois", 4: "quatre", 5: "cinq", 6: "six", 7: "sept", 8: "huit",
        9: "neuf", 10: "dix", 11: "onze", 12: "douze", 13: "treize", 14: "quatorze", 15: "quinze",
        16: "seize", 20: "vingt vingts", 30: "trente", 40: "quarante", 50: "cinquante", 60: "soixante",
        80: "quatre-vingt quatre-vingts", 1000: "mille", 10**6: "million millions",
        10**9: "milliard milliards", 12: "douzaine",
    },
    weak_numbers={1: "un une", 100: "cent cents", 0: "nul"},
    ordinals={
        1: "premier première premiers premières 1er 1re", 2: "deuxième second seconde", 3: "troisième",
        4: "quatrième", 5: "cinquième", 6: "sixième", 7: "septième", 8: "huitième", 9: "neuvième",
        10: "dixième", 11: "onzième", 12: "douzième", 20: "vingtième", 100: "centième", 1000: "millième",
    },
    months={
        1: "janvier janv", 2: "février fevrier févr", 3: "mars", 4: "avril", 5: "mai", 6: "juin",
        7: "juillet juil", 8: "août aout", 9: "septembre", 10: "octobre oct", 11: "novembre nov",
        12: "décembre decembre déc",
    },
    weekdays={1: "lundi", 2: "mardi", 3: "mercredi", 4: "jeudi", 5: "vendredi", 6: "samedi", 7: "dimanche"},
    antonyms="""
    plus / moins; avant / après; grand+|gros+ / petit+; augment+|hausse+|croissance / diminu+|baisse+|réduire|réduis+|réduit+|décroissance
    vrai+ / faux|fausse+; autoris+|permet+|permis+|accept+ / interdi+|refus+|rejet+|rejeter|rejete+
    inclu+|inclus+|inclure / exclu+|exclus+|exclure; premier+|première+ / dernier+|dernière+
    minimum|minimal+ / maximum|maximal+; haut|monter|montant / bas|descendre|descendant
    ouvr+|ouvert+ / ferm+; ajout+ / supprim+|retir+|enlev+; activ+ / désactiv+
    croissant+ / décroissant+; entrée / sortie; import+ / export+; début|commencer / fin|finir|terminer
    rapide+ / lent+; nouveau|nouvelle+|neuf|neuve+ / vieux|vieille+|ancien+|ancienne+; élevé+ / bas|basse+
    bon|bonne+|meilleur+ / mauvais+|pire+; tôt / tard; chaud+ / froid+
    long|longue+ / court+; achet+ / vend+; gagn+ / perd+; dessus / dessous; intérieur+ / extérieur+
    gauche / droite; toujours / jamais; oui / non; majeur+ / mineur+; croissant / décroissant
    """,
    quantifiers={
        "all": "tout tous toute toutes chaque",
        "some": "quelques quelque certains certaines plusieurs",
        "any": "quelconque n'importe",
        "few": "peu",
        "many": "beaucoup nombreux nombreuses",
        "most": "plupart",
        "only": "seulement uniquement",
    },
    endings="e s es x aux er ez ent ons é ée és ées ir it is issent ant ion ions",
)
