"""Spanish (es): negation with no/nunca/nada/ningún, numbers (veintiuno, treinta y uno),
gender and plural endings."""

from semula.core.guard.languages.table import LanguageTable

TABLE = LanguageTable(
    code="es",
    name="Spanish",
    negators={
        "not": "no nada nadie ningún ninguno ninguna ningunos ningunas ni tampoco",
        "never": "nunca jamás jamas",
        "without": "sin",
        "except": "excepto salvo menos",
    },
    negating_prefixes="in im des dis anti",
    numbers={
        0: "cero", 2: "dos", 3: "tres", 4: "cuatro", 5: "cinco", 6: "seis", 7: "siete", 8: "ocho",
        9: "nueve", 10: "diez", 12: "doce", 13: "trece", 14: "catorce", 15: "quince", 16: "dieciséis dieciseis",
        17: "diecisiete", 18: "dieciocho", 19: "diecinueve", 20: "veinte", 21: "veintiuno veintiún veintiuna",
        22: "veintidós veintidos", 23: "veintitrés veintitres", 24: "veinticuatro", 25: "veinticinco",
        26: "veintiséis veintiseis", 27: "veintisiete", 28: "veintiocho", 29: "veintinueve", 30: "treinta",
        40: "cuarenta", 50: "cincuenta", 60: "sesenta", 70: "setenta", 80: "ochenta", 90: "noventa",
        100: "cien ciento cientos", 200: "doscientos doscientas", 300: "trescientos trescientas",
        500: "quinientos quinientas", 1000: "mil", 10**6: "millón millon millones",
    },
    weak_numbers={1: "un una uno", 11: "once"},
    ordinals={
        1: "primero primera primeros primeras primer", 2: "segundo segunda segundos segundas",
        3: "tercero tercera terceros terceras tercer", 4: "cuarto cuarta", 5: "quinto quinta",
        6: "sexto sexta", 7: "séptimo séptima septimo", 8: "octavo octava", 9: "noveno novena",
        10: "décimo décima decimo", 100: "centésimo", 1000: "milésimo",
    },
    months={
        1: "enero", 2: "febrero", 3: "marzo", 4: "abril", 5: "mayo", 6: "junio", 7: "julio",
        8: "agosto", 9: "septiembre setiembre", 10: "octubre", 11: "noviembre", 12: "diciembre",
    },
    weekdays={
        1: "lunes", 2: "martes", 3: "miércoles miercoles", 4: "jueves", 5: "viernes", 6: "sábado sabado sábados",
        7: "domingo domingos",
    },
    antonyms="""
    más|mas / menos; antes / después|despues; mayor+ / menor+
    grande+ / pequeñ+|chic+; aument+|increment+|subir|sube|suba / disminu+|reduc+|reduzc+|decrement+|bajar|baja
    verdader+|cierto+ / fals+; permit+|acept+ / deneg+|rechaz+|prohib+; inclu+|incluy+ / exclu+|excluy+
    primer+ / últim+|ultim+; mínim+|minim+ / máxim+|maxim+; arriba / abajo; abr+|abiert+ / cerr+|cierr+
    añad+|agreg+ / elimin+|borr+|quit+; habilit+|activ+ / deshabilit+|desactiv+
    ascendente+ / descendente+; entrada / salida; import+ / export+; inicio|empez+|comenz+ / fin|final+|termin+
    rápid+ / lent+; nuev+ / viej+|antigu+; alt+ / baj+; buen+|bueno+|mejor+ / mal+|malo+|peor+
    barat+ / car+; temprano / tarde; calient+ / frí+; larg+ / cort+; compr+ / vend+; gan+ / perd+
    encima / debajo; dentro|interior+ / fuera|exterior+; izquierd+ / derech+; siempre / nunca; sí / no
    """,
    quantifiers={
        "all": "todo todos toda todas cada",
        "some": "algunos algunas algún alguno alguna varios varias",
        "any": "cualquier cualquiera",
        "both": "ambos ambas",
        "few": "pocos pocas",
        "many": "muchos muchas mucho mucha",
        "most": "mayoría",
        "only": "solo sólo solamente únicamente",
    },
    endings="o a os as e es ar er ir ado ada ados adas ido ida idos idas ó aba ando iendo",
)
