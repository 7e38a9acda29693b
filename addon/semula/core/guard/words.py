"""The guard's word lists: opposites, alternatives, negators, number words, months, units.

English only. Kept apart from the guard's logic (semula/core/guard/) so the lists can grow
without the checks moving; each list is written as plain text and expanded with simple
inflections.
"""

from __future__ import annotations

import re


def _table(spec: str) -> list[list[list[str]]]:
    """"a|a2 / b ; c / d" -> groups of poles of spellings (a newline ends a group
    unless the line ends with '/')."""
    groups = []
    for group in re.split(r"[;\n]", re.sub(r"/\s*\n\s*", "/ ", spec)):
        if group.strip():
            groups.append([pole.split("|") for pole in (p.strip() for p in group.split("/"))])
    return groups


def _inflections(word: str) -> set[str]:
    """Plural, verb and comparative forms of a base word (over-generation is harmless)."""
    forms = {word}
    if " " in word or len(word) < 3:
        return forms
    last, stem = word[-1], word[:-1]
    vowels = "aeiou"
    if last == "y" and word[-2] not in vowels:
        forms |= {stem + s for s in ("ies", "ied", "ier", "iest")} | {word + "ing"}
    elif last == "e":
        forms |= {word + s for s in ("s", "d", "r", "st")} | {stem + "ing"}
    else:
        plural = "es" if word.endswith(("s", "x", "z", "ch", "sh")) else "s"
        forms |= {word + plural} | {word + s for s in ("ed", "ing", "er", "est")}
        if len(word) >= 3 and last not in vowels + "wxy" and word[-2] in vowels and word[-3] not in vowels:
            forms |= {word + last + s for s in ("ed", "ing", "er", "est")}
    return forms


def _lexicon(spec: str) -> dict[str, tuple[tuple[int, int], ...]]:
    """word form -> ((group, pole), ...); a word may sit in several groups."""
    out: dict[str, set[tuple[int, int]]] = {}
    for g, group in enumerate(_table(spec)):
        for p, pole in enumerate(group):
            for base in pole:
                for form in _inflections(base.strip()):
                    out.setdefault(form, set()).add((g, p))
    return {k: tuple(sorted(v)) for k, v in out.items()}


# Opposites: two poles; "|" joins spellings of one pole. Base forms only.
ANTONYM_LEXICON = _lexicon(
    """
    weekday / weekend; increase|increment|rise|grow|growth / decrease|decrement|reduce|reduction|decline|shrink
    before|prior / after; minimum|min|minimal|minimize|minimise|minimizing / maximum|max|maximal|maximize|maximise
    ascend|ascending|asc / descend|descending|desc; open|opened / close|closed|shut
    include|including|inclusive / exclude|excluding|exclusive; enable / disable; first / last; import / export
    large|big|huge / small|little|tiny; high / low; tall / short; long / short; wide|broad / narrow
    encrypt|encryption / decrypt|decryption; encode / decode; compress|compression / decompress|decompression
    serialize|serialise / deserialize|deserialise; zip / unzip; mount / unmount; install / uninstall
    connect / disconnect; lock / unlock; cheap|inexpensive / expensive|costly|pricey
    good|better|best / bad|worse|worst; right|correct / wrong|incorrect; left / right; deep / shallow
    strong / weak; strength / weakness; pro / con; advantage / disadvantage; benefit / drawback
    approve|approval|accept|allow|permit|grant / reject|rejection|deny|refuse|decline|forbid|block|prohibit
    young|new|newer|newest|recent / old|elderly; early|earliest / late|latest; hot|warm / cold|cool
    heavy / light; dark / light; fast|quick|rapid / slow; hard|difficult / easy|simple; hard / soft
    rich|wealthy / poor; happy / sad; love|like / hate|dislike; agree / disagree; friend|ally / enemy
    win|won|winner|victory / lose|lost|loser|defeat; profit|gain / loss; income|revenue / expense|cost
    asset / liability; credit / debit; deposit / withdraw|withdrawal
    buy|bought|purchase|buyer / sell|sold|seller
    lend|lender / borrow|borrower; send|sent|sender / receive|recipient|receiver; incoming / outgoing
    inbound / outbound; input / output; upload / download; upstream / downstream; push / pull; push / pop
    arrive|arrival / depart|departure; enter|entrance|entry / exit|leave
    begin|start|beginning|starting / end|finish|stop
    above|over / below|under|beneath; upper|uppercase / lower|lowercase; top / bottom
    inside|internal|inner|interior / outside|external|outer|exterior; front / back|rear; forward / backward
    next / previous; more / less|fewer; most / least; many / few; true / false
    pass|passed / fail|failed|failure; success|succeed|successful / failure|fail|unsuccessful
    safe / dangerous|unsafe; positive / negative; odd / even; prime / composite; convex / concave
    add|insert|append|create / remove|delete|drop|destroy; show / hide; expand / collapse
    login|signin / logout|signout; horizontal / vertical; clockwise / counterclockwise|anticlockwise
    row / column; sunrise / sunset; daytime / nighttime; singular / plural; active / passive
    literal / figurative; objective / subjective; qualitative / quantitative; inductive / deductive
    synchronous|sync / asynchronous|async; static / dynamic; mutable / immutable; local / remote|global
    client / server; frontend / backend; read / write; getter / setter; enqueue / dequeue; head / tail
    male / female; man|men / woman|women; boy / girl; husband / wife; father|dad / mother|mom|mum
    son / daughter; brother / sister; king / queen; parent / child; employer / employee; landlord / tenant
    teacher / student; predator / prey; host / guest; cause / effect; question / answer; problem / solution
    attack|offense|offence / defense|defence; similar|similarity|same|alike / different|difference|differ
    bull|bullish / bear|bearish; benign / malignant; acute / chronic; systolic / diastolic; acid|acidic / alkaline
    import / export; overestimate / underestimate; overweight / underweight; plaintiff / defendant
    """
)

# Mutually exclusive choices within one domain: any swap changes the answer.
ALTERNATIVE_LEXICON = _lexicon(
    """
    mean|average|avg / median / mode / sum|total / variance / deviation|stdev|std / range
    fetch / pull / push / merge / rebase / clone / commit / checkout / stash / cherry-pick
    margin / padding / border / outline
    key / value / item
    tuple / dict|dictionary / array / queue / stack / heap / tree
    union / intersection
    inner / outer / cross / full
    north|northern / south|southern / east|eastern / west|western
    spring / summer / autumn|fall / winter
    morning / afternoon / evening / night
    past / present / future
    yesterday / today / tomorrow
    red / orange / yellow / green / blue / purple|violet / pink / brown / black / white / gray|grey
    positive / negative / neutral
    sin|sine / cos|cosine / tan|tangent
    derivative / integral
    width / height / length / depth
    english / german / french / spanish / italian / dutch / portuguese / chinese|mandarin / japanese / korean /
        russian / arabic / hindi / turkish / polish / swedish / greek / hebrew / latin
    python / java / javascript / typescript / golang / rust / ruby / php / swift / kotlin / scala / perl /
        haskell / matlab / julia / lua / bash / powershell / sql / html / css
    """
)

# Prefixes that negate the word they are glued to (happy/unhappy, lock/unlock).
NEGATING_PREFIXES = frozenset({"un", "non", "in", "im", "il", "ir", "dis", "de", "anti", "counter", "mis", "ab"})
# Prefix pairs that turn a word into its opposite (encrypt/decrypt, inbound/outbound).
PREFIX_SWAPS = (
    ("en", "de"), ("in", "ex"), ("im", "ex"), ("in", "de"), ("in", "out"), ("up", "down"), ("pre", "post"),
    ("over", "under"), ("hyper", "hypo"), ("inter", "intra"), ("micro", "macro"), ("max", "min"),
)  # fmt: skip

NEGATORS = frozenset(
    "not no never without cannot none nothing nobody nowhere neither nor except excluding exclude excludes "
    "excluded unless lacks lacking w/o nope non".split()
)

# --- numbers: word -> (value, role)
_SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
_TENS_ORDINALS = "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split()
NUMBER_SCALES: dict[str, int] = {
    "hundred": 100, "dozen": 12, "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12,
}  # fmt: skip
NUMBER_WORDS: dict[str, tuple[int | str, str]] = {
    **{w: (i, "unit") for i, w in enumerate(_SMALL)},
    **{w: (20 + 10 * i, "tens") for i, w in enumerate(_TENS)},
    **{w: (i + 1, "ordinal") for i, w in enumerate(_ORDINALS)},
    **{w: (20 + 10 * i, "ordinal") for i, w in enumerate(_TENS_ORDINALS)},
    "hundred": (100, "hundred"), "dozen": (12, "hundred"),
    **{w: (v, "scale") for w, v in NUMBER_SCALES.items() if v >= 1000},
    "hundredth": (100, "ordinal"), "thousandth": (1000, "ordinal"), "millionth": (10**6, "ordinal"),
    "twice": (2, "unit"), "thrice": (3, "unit"),
    **{w: (w, "vague") for w in ("dozens", "hundreds", "thousands", "millions", "billions")},
}  # fmt: skip

# "one" is a pronoun, not a number, after these ("how can one", "which one", "no one").
ONE_AS_PRONOUN_AFTER = frozenset(
    """can could should would must may might will shall does do did no any every some each which the this that
    other another little right wrong new old only same last next""".split()
)

_NUMBERISH = frozenset(NUMBER_WORDS) | {"a", "an", "and"}

# --- dates
_MONTH_NAMES = "january february march april may june july august september october november december".split()
MONTHS: dict[str, int] = {
    **{name: n for n, name in enumerate(_MONTH_NAMES, 1)},
    **{name[:3]: n for n, name in enumerate(_MONTH_NAMES, 1)},
    "sept": 9,
}
# Written in lower case these are verbs; as names they need a day or a year.
AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar"})
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# A bare four-digit number is a year after these ("in 1999", "since 2020").
YEAR_WORDS = frozenset(
    "in since from until till by before after during of year between and to around circa early late mid".split()
)

# --- units: canonical names. Exact spellings first (case matters: MB is not Mb).
UNITS_EXACT: dict[str, str] = {
    "MB": "MB", "Mb": "Mbit", "mb": "MB", "GB": "GB", "Gb": "Gbit", "gb": "GB", "KB": "KB", "kB": "KB",
    "Kb": "Kbit", "kb": "KB", "TB": "TB", "Tb": "Tbit", "tb": "TB", "PB": "PB",
    "MB/s": "MB/s", "MBps": "MB/s", "mb/s": "MB/s", "Mb/s": "Mbit/s", "Mbps": "Mbit/s", "mbps": "Mbit/s",
    "GB/s": "GB/s", "Gb/s": "Gbit/s", "Gbps": "Gbit/s", "gbps": "Gbit/s", "KB/s": "KB/s", "kB/s": "KB/s",
    "Kbps": "Kbit/s", "kbps": "Kbit/s", "KiB": "KiB", "MiB": "MiB", "GiB": "GiB", "TiB": "TiB",
    "°C": "celsius", "°F": "fahrenheit", "°K": "kelvin", "°": "degree",
    "$": "USD", "US$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY/CNY", "₹": "INR", "%": "percent",
}  # fmt: skip
# Spellings that are units only right after a number ("5 m", "10s", "3 h").
UNITS_AFTER_NUMBER: dict[str, str] = {
    "m": "m", "s": "second", "h": "hour", "g": "g", "l": "l", "L": "l", "t": "tonne", "mi": "mile",
    "min": "minute", "mins": "minute", "sec": "second", "secs": "second", "hr": "hour", "hrs": "hour",
    "yr": "year", "yrs": "year", "mo": "month", "d": "day", "wk": "week", "pt": "pint", "qt": "quart",
    "J": "joule", "kJ": "kJ", "Pa": "pascal", "kPa": "kPa", "ha": "hectare", "bar": "bar", "cal": "calorie",
    "nm": "nm", "W": "watt", "kW": "kW", "MW": "MW", "mW": "mW", "GW": "GW", "kWh": "kWh", "V": "volt",
    "mV": "mV", "A": "ampere", "mA": "mA", "mAh": "mAh", "Hz": "Hz", "kHz": "kHz", "MHz": "MHz", "GHz": "GHz",
    "B": "byte", "bit": "bit", "bits": "bit",
}  # fmt: skip
_UNIT_WORDS = """
    km kms kilometre kilometer = km; mile = mile; metre meter = m; cm centimetre centimeter = cm
    mm millimetre millimeter = mm; inch inches = inch; ft foot feet = ft; yard yd yds = yard
    kg kgs kilo kilogram kilogramme = kg; gram gramme = g; mg milligram = mg; lb lbs = lb; pound = pound
    oz ounce = oz; ton = ton; tonne = tonne; litre liter = l; ml millilitre milliliter = ml; gallon gal = gallon
    quart = quart; pint = pint; cup = cup; tablespoon tbsp tbs = tbsp; teaspoon tsp = tsp
    celsius centigrade = celsius; fahrenheit = fahrenheit; kelvin = kelvin; degree = degree
    byte = byte; kilobyte = KB; megabyte = MB; gigabyte = GB; terabyte = TB; petabyte = PB
    kilobit = Kbit; megabit = Mbit; gigabit = Gbit; kib = KiB; mib = MiB; gib = GiB
    hertz hz = Hz; khz = kHz; mhz = MHz; ghz = GHz; watt = watt; kilowatt = kW; kwh = kWh; volt = volt
    mph = mph; kph kmh km/h = km/h; m/s = m/s; knot = knot
    ms millisecond = millisecond; microsecond = microsecond; ns nanosecond = nanosecond; second seconds = second
    minute = minute; hour hourly = hour; day daily = day; week weekly = week; fortnight = fortnight
    month monthly = month; year yearly annual annually = year; decade = decade; century centuries = century
    percent percentage pct = percent; dollar usd = USD; euro eur = EUR; gbp sterling = GBP; yen jpy = JPY
    yuan rmb cny renminbi = CNY; rupee inr = INR; franc chf = CHF; cad = CAD; aud = AUD; nzd = NZD
    hkd = HKD; sgd = SGD; sek = SEK; nok = NOK; dkk = DKK; pln = PLN; mxn = MXN; brl = BRL; krw = KRW
    zar = ZAR; ruble rouble = RUB; btc bitcoin = BTC; eth ether ethereum = ETH; cent = cent; penny pence = penny
    acre = acre; hectare = hectare; calorie = calorie; kcal kilocalorie = kcal; joule = joule; psi = psi
    pascal = pascal; atm = atm; px pixel = px; dpi = dpi; fps = fps; rpm = rpm
"""


def _unit_table(spec: str) -> dict[str, str]:
    """"km kilometre = km; ..." -> spelling (and its plural) -> canonical unit."""
    out: dict[str, str] = {}
    for group in re.split(r"[;\n]", spec):
        if "=" in group:
            spellings, canonical = group.split("=")
            for spelling in spellings.split():
                for form in (spelling, spelling + "s", spelling + "es") if len(spelling) >= 3 else (spelling,):
                    out.setdefault(form, canonical.strip())
    return out


UNITS = _unit_table(_UNIT_WORDS)
# Everyday words that are units only sometimes: alone, they need the other
# side to change a unit too (a number before them makes them units proper).
WEAK_UNIT_WORDS = frozenset(
    """day days daily week weeks weekly month months monthly year years yearly annual annually hour hours
    hourly minute minutes second seconds decade decades century centuries yard yards cup cups degree degrees
    pound pounds percentage cent cents ton tons bit bits quarter""".split()
)
_UNIT_SPELLINGS = frozenset(UNITS_EXACT) | frozenset(UNITS_AFTER_NUMBER)
SYMBOL_TOKENS = frozenset({"$", "€", "£", "¥", "₹", "%", "°"})

# --- names. Never names wherever they stand:
NEVER_NAMES = frozenset({"i", "i'm", "i've", "i'd", "i'll", "ok", "okay"})
# Capitalised only because they start a sentence, line, quote or bullet.
SENTENCE_STARTERS = frozenset(
    """
    a an the this that these those there here it its it's they them their we our us you your you're he she his
    her him my me i mine what what's which who who's whom whose why when where how how's whether is are was
    were be been am do does did done have has had can could would should will shall may might must let let's
    please kindly and but or so yet for nor if then than also as at by in into of off on onto out over to
    up with within without from about above after before below between during through under until while
    since because although though however therefore thus hence moreover furthermore meanwhile instead
    otherwise still just only even very really quite now today tomorrow yesterday again always never often
    sometimes usually all any each every some many much more most few several both either neither no not
    one other another such same own yes hi hello hey thanks thank dear ok okay sure well oh
    write rewrite explain describe give tell list summarize summarise create generate make show help
    translate convert find suggest draft compose provide recommend compare define calculate compute
    determine identify name classify analyze analyse evaluate review check fix correct improve edit
    rephrase paraphrase shorten expand simplify outline plan design build implement add remove delete
    sort filter count extract format convert put turn use answer solve prove derive estimate predict
    imagine pretend act consider assume suppose note remember keep ensure avoid return print output
    read respond reply continue start begin stop finish get go look see say think know want need like
    try take set run open close call send buy pay tell ask choose pick select insert update come
    question answer context summary note input output task instructions instruction example examples
    text passage review data document article email message story poem code query request response
    por favor bitte per favore merci gracias danke grazie obrigado obrigada svp optimize optimise organize organise
    step steps first second third next last finally lastly overall bonus tip warning important
    """.split()
)

# =================================================================== tokens
