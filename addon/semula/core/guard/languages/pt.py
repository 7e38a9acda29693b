"""Portuguese (pt): negation with não/nunca/nada/nenhum, numbers (vinte e um), gender and
plural endings; weekdays as "segunda-feira"."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="pt",
    name="Portuguese",
    negators={
        "not": "não nao nada ninguém ninguem nenhum nenhuma nenhuns nenhumas nem tampouco",
        "never": "nunca jamais",
        "without": "sem",
        "except": "exceto excepto salvo",
    },
    negating_prefixes="in im des anti",
    numbers={
        0: "zero", 2: "dois duas", 3: "três tres", 4: "quatro", 5: "cinco", 6: "seis", 7: "sete", 8: "oito",
        9: "nove", 10: "dez", 11: "onze", 12: "doze", 13: "treze", 14: "catorze quatorze", 15: "quinze",
        16: "dezesseis dezasseis", 17: "dezessete dezassete", 18: "dezoito", 19: "dezenove dezanove",
        20: "vinte", 30: "trinta", 40: "quarenta", 50: "cinquenta", 60: "sessenta", 70: "setenta",
        80: "oitenta", 90: "noventa", 100: "cem cento", 200: "duzentos duzentas", 300: "trezentos trezentas",
        500: "quinhentos quinhentas", 1000: "mil", 10**6: "milhão milhao milhões milhoes",
    },
    weak_numbers={1: "um uma"},
    ordinals={
        1: "primeiro primeira primeiros primeiras", 2: "segundo segunda segundos segundas",
        3: "terceiro terceira", 4: "quarto quarta", 5: "quinto quinta", 6: "sexto sexta", 7: "sétimo sétima",
        8: "oitavo oitava", 9: "nono nona", 10: "décimo décima decimo",
    },
    months={
        1: "janeiro", 2: "fevereiro", 3: "março marco", 4: "abril", 5: "maio", 6: "junho", 7: "julho",
        8: "agosto", 9: "setembro", 10: "outubro", 11: "novembro", 12: "dezembro",
    },
    weekdays={
        1: "segunda-feira", 2: "terça-feira terca-feira terça", 3: "quarta-feira", 4: "quinta-feira",
        5: "sexta-feira", 6: "sábado sabado", 7: "domingo",
    },
    antonyms="""
    mais / menos; antes / depois; maior+ / menor+; grande+ / pequen+
    aument+|increment+|subir / diminu+|reduz+|decrement+|baixar; verdadeir+ / fals+
    permit+|aceit+ / neg+|rejeit+|proib+; inclu+ / exclu+; primeir+ / últim+|ultim+
    mínim+|minim+ / máxim+|maxim+; cima / baixo; abr+|abert+ / fech+; adicion+|acrescent+ / remov+|exclu+|apag+
    habilit+|ativ+ / desabilit+|desativ+; crescente+ / decrescente+; entrada / saída|saida; import+ / export+
    início|inicio|começ+ / fim|final+|termin+; rápid+ / lent+; nov+ / velh+|antig+; alt+ / baix+
    bom|boa+|melhor+ / mau|má|ruim+|pior+; barat+ / car+; cedo / tarde; quente+ / fri+; long+ / curt+
    compr+ / vend+; ganh+ / perd+; dentro|interior+ / fora|exterior+; esquerd+ / direit+; sempre / nunca; sim / não
    """,
    quantifiers={
        "all": "todo todos toda todas cada",
        "some": "alguns algumas algum alguma vários várias",
        "any": "qualquer quaisquer",
        "both": "ambos ambas",
        "few": "poucos poucas",
        "many": "muitos muitas muito muita",
        "most": "maioria",
        "only": "só somente apenas unicamente",
    },
    endings="o a os as e es ar er ir ado ada ados adas ido ida ou ando endo ão ões",
)
