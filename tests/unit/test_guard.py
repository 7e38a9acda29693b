"""The hard guard: tables of (stored, incoming) texts and the reason each must give.

A reason of None means the guard lets the pair through (the score decides);
otherwise the test checks the reason's start, so the wording stays readable
in the review queue without pinning every character.
"""

from __future__ import annotations

import random

import pytest
from work_counter import count_work

from semula.core.guard import (
    GUARD_CHECKS,
    alternatives_differ,
    antonyms_differ,
    dates_differ,
    entities_differ,
    guard,
    identifiers_differ,
    negation_differs,
    numbers_differ,
    quoted_differ,
    symbols_differ,
    text_diff,
    units_differ,
)
from semula.core.guard.diff import MAX_CHANGED_TOKENS

HOTEL = "The hotel has {} rooms. How many guests can it host if each room sleeps two?"


def _case(stored: str, incoming: str, expected: str | None, id: str):  # noqa: A002
    return pytest.param(stored, incoming, expected, id=id)


REFUSED = [
    # numbers: digits, decimals, percentages, ordinals, spelled and mixed forms
    _case(HOTEL.format(120), HOTEL.format(220), "number 120≠220", "digits"),
    _case("What is 2+2?", "What is 2+3?", "number 2≠3", "arithmetic"),
    _case("Interest is 3.1% a year", "Interest is 3.2% a year", "number 3.1≠3.2", "decimal percentage"),
    _case("Python 3.10 or later", "Python 3.1 or later", "number 3.10≠3.1", "version is not a decimal"),
    _case("The vaccine requires two doses.", "The vaccine requires three doses.", "number two≠three", "spelled"),
    _case("Bake a dozen cookies", "Bake two dozen cookies", "number a dozen≠two dozen", "dozen"),
    _case("Who came first?", "Who came second?", "number first≠second", "ordinal"),
    _case("on the 5th floor", "on the 15th floor", "number 5th≠15th", "digit ordinal"),
    _case("Write a three-line poem", "Write a five-line poem", "number three≠five", "hyphenated"),
    _case("twenty-five apples", "twenty-six apples", "number twenty five≠twenty six", "compound spelled"),
    _case("Give me ideas", "Give me five ideas", "number: 'five' only in incoming", "number added"),
    _case("2 million rows", "2 billion rows", "number 2 million≠2 billion", "scale words"),
    _case("Is the temperature -5 today?", "Is the temperature 5 today?", "number -5≠5", "negative"),
    # dates and times
    _case("What happened on 2024-01-01?", "What happened on 2025-01-01?", "date 2024-01-01≠2025-01-01", "iso"),
    _case("Due January 5, 2024", "Due January 6, 2024", "date January 5, 2024≠January 6, 2024", "named month"),
    _case("Due March 15", "Due February 15", "date March 15≠February 15", "month swap"),
    _case("Due 10 April", "Due 17 April", "date 10 April≠17 April", "day before month"),
    _case("Was it released in 1999?", "Was it released in 2009?", "date 1999≠2009", "year"),
    _case("Due 1/5/2024", "Due 1/6/2024", "date 1/5/2024≠1/6/2024", "slash"),
    _case("Meet at 9 am", "Meet at 9 pm", "date 9 am≠9 pm", "time of day"),
    _case("Open on Monday?", "Open on Tuesday?", "date Monday≠Tuesday", "weekday"),
    # units and currencies
    _case("How far is 10 km?", "How far is 10 miles?", "unit: km→miles", "distance"),
    _case("Is 30 °C hot?", "Is 30 °F hot?", "unit: °C→°F", "temperature symbol"),
    _case("Convert 30 degrees Celsius", "Convert 30 degrees Fahrenheit", "unit: Celsius→Fahrenheit", "temperature"),
    _case("Price: 100 USD", "Price: 100 EUR", "unit: USD→EUR", "currency code"),
    _case("It costs $5", "It costs 5 euros", "unit: $→euros", "currency symbol"),
    _case("A 10 MB file", "A 10 GB file", "unit: MB→GB", "bytes"),
    _case("A 10 MB link", "A 10 Mb link", "unit: MB→Mb", "byte is not bit"),
    _case("Speed is 100 Mbps.", "Speed is 100 MB/s.", "unit: Mbps→MB/s", "rates"),
    _case("Billed per month.", "Billed per week.", "unit: month→week", "period"),
    _case("Ready in 10 days", "Ready in 10 weeks", "unit: days→weeks", "time span"),
    # negation and polarity
    _case("The result was expected.", "The result was not expected.", "negation: 'not' only in incoming", "not"),
    _case("He is here", "He isn't here", "negation: 'isn't' only in incoming", "contraction"),
    _case("I can swim", "I cannot swim", "negation: 'cannot' only in incoming", "cannot"),
    _case("Tea with sugar", "Tea without sugar", "negation: 'without' only in incoming", "without"),
    _case("All fruit except apples", "All fruit including apples", "negation: 'except' only in stored", "except"),
    _case("Is the customer happy?", "Is the customer unhappy?", "negation: happy→unhappy", "un- prefix"),
    _case("List breaking changes", "List non-breaking changes", "negation: 'non-breaking'", "non- prefix"),
    # opposing words and prefixes
    _case("Open on weekdays?", "Open on weekends?", "antonym: weekdays→weekends", "weekday/weekend"),
    _case("Sort in ascending order", "Sort in descending order", "antonym: ascending→descending", "order"),
    _case("What was the minimum?", "What was the maximum?", "antonym: minimum→maximum", "extremes"),
    _case("Wash before cooking", "Wash after cooking", "antonym: before→after", "time order"),
    _case("Find the cheapest flight", "Find the most expensive flight", "antonym: cheapest→expensive", "inflected"),
    _case("Which is the largest?", "Which is the smallest?", "antonym: largest→smallest", "superlative"),
    _case("Turn left here?", "Turn right here?", "antonym: left→right", "directions"),
    _case("Is the door open?", "Is the door closed?", "antonym: open→closed", "open/closed"),
    _case("How do I encrypt it?", "How do I decrypt it?", "antonym: encrypt→decrypt", "listed prefix pair"),
    _case("Describe the hypoglycemia case", "Describe the hyperglycemia case", "antonym: hypoglycemia→", "prefixes"),
    _case("Upload the file", "Download the file", "antonym: upload→download", "up/down"),
    # mutually exclusive alternatives
    _case("What is the mean?", "What is the median?", "alternative: mean→median", "statistics"),
    _case("Set the margin to 4px", "Set the padding to 4px", "alternative: margin→padding", "css"),
    _case("Explain git fetch", "Explain git pull", "alternative: fetch→pull", "git"),
    _case("Answer in python", "Answer in java", "alternative: python→java", "lowercase language"),
    # names, identifiers, quotes
    _case("What is the capital of France?", "What is the capital of Germany?", "entity: France→Germany", "country"),
    _case("Who was Marie Curie?", "Who was Rosalind Franklin?", "entity: Marie Curie→Rosalind Franklin", "run"),
    _case("Compare React and Angular", "Compare Vue and Angular", "entity: React→Vue", "framework"),
    _case("Paris is lovely. Why?", "Berlin is lovely. Why?", "entity: Paris→Berlin", "sentence-initial name"),
    _case("Load data.csv", "Load data.tsv", "identifier: data.csv→data.tsv", "file name"),
    _case("Call get_user", "Call get_users", "identifier: get_user→get_users", "snake_case"),
    _case("What does `ls -s` do?", "What does `ls -S` do?", "identifier: -s→-S", "flag case"),
    _case("Rename getUser", "Rename GetUser", "identifier: getUser→GetUser", "camelCase case"),
    _case("Say 'good night' in Italian", "Say 'good evening' in Italian", "alternative: night→evening", "quote"),
    _case('Translate "a b c"', 'Translate "a b d"', "quoted: a b c→a b d", "quoted catch-all"),
    # symbols: operators, comparisons, brackets, arrows, set and math signs, emoji
    _case("What is a == b?", "What is a != b?", "symbols differ: == → !=", "equality operator"),
    _case("Is x >= 10?", "Is x > 10?", "symbols differ: >= → >", "comparison"),
    _case("Simplify (a + b) * c", "Simplify a + (b * c)", "symbols differ:", "brackets moved"),
    _case("Evaluate 7 - 3", "Evaluate 7 + 3", "symbols differ: - → +", "minus and plus"),
    _case("idle → running → done", "idle ← running ← done", "symbols differ: '→ →' → '← ←'", "arrows"),
    _case("Prove A ∪ B = B ∪ A", "Prove A ∩ B = B ∩ A", "symbols differ: ∪ → ∩", "set union"),
    _case("Compute √27", "Compute ∛27", "symbols differ: √ → ∛", "roots"),
    _case("What does 🔥 mean?", "What does 💀 mean?", "symbols differ: 🔥 → 💀", "emoji"),
    _case("Explain `cmd > out`", "Explain `cmd >> out`", "symbols differ: > → >>", "redirect"),
    _case("Why does if (!done) loop?", "Why does if (done) loop?", "symbols differ: (! → (", "code negation"),
    _case("Was bedeutet ⇒?", "Was bedeutet ⇔?", "symbols differ: ⇒ → ⇔", "german prose"),
    _case("Price $40 on the menu", "Price €40 on the menu", "unit: $→€", "currency by the unit check"),
    # moved words: prepositions are no longer exempt
    _case("copy files from the server to my laptop", "copy files to the server from my laptop", "word order:", "to/from"),
    # scripts without capitals: any changed word may be a name
    _case("法国的首都是哪里？", "德国的首都是哪里？", "entity: 法→德", "chinese"),
    _case("ما هي عاصمة فرنسا؟", "ما هي عاصمة ألمانيا؟", "entity: فرنسا→ألمانيا", "arabic"),
]

PASSED = [
    _case("Same text.", "Same text.", None, "identical"),
    _case("What is the capital of France?", "what is the capital of france", None, "case and punctuation"),
    _case("Is 1,000 enough?", "Is 1000 enough?", None, "thousands separator"),
    _case("Give me five ideas", "Give me 5 ideas", None, "spelled = digits"),
    _case("twenty-five apples", "25 apples", None, "compound = digits"),
    _case("a hundred people", "one hundred people", None, "a hundred"),
    _case("the twenty-first century", "the 21st century", None, "ordinal forms"),
    _case("Show 2 million rows", "Show two million rows", None, "scaled digits"),
    _case("Is it 10k?", "Is it 10,000?", None, "k suffix"),
    _case("Is 5% enough", "Is 5 percent enough", None, "percent sign"),
    _case("It costs $5", "It costs 5 dollars", None, "dollar sign"),
    _case("Due 2024-01-05", "Due January 5, 2024", None, "date formats agree"),
    _case("He isn't here", "He is not here", None, "contraction = not"),
    _case("Explain recursion", "Describe recursion", None, "sentence starters are not names"),
    _case("What's Australia's capital city?", "Which city serves as Australia's capital?", None, "paraphrase"),
    _case("How can one learn Go?", "How do I learn Go?", None, "one as a pronoun"),
    _case("Why do people believe this in this day and age?", "Why do people believe this?", None, "weak unit"),
    _case("What is the best way to learn?", "How should I learn?", None, "one-sided opposite word"),
    _case("Hello, world.", "hello world!", None, "sentence punctuation is no symbol"),
    _case("Is (a + b) ok?", "is ( a + b ) ok", None, "symbols spaced differently"),
    _case("Is a well-known fix", "Is a well-known fix?", None, "hyphen inside a word"),
    _case("Due 2024-01-05 at 9:30", "Due 2024-01-05 at 9:30.", None, "date and time separators"),
    _case("Reply 'see you 👍'", "Reply “see you 👍”", None, "emoji inside curly quotes"),
    _case("", "", None, "empty"),
    _case("?!...", "!!!", None, "punctuation only"),
    _case("the of and", "a an the", None, "stopwords only"),
]


@pytest.mark.parametrize("stored, incoming, expected", REFUSED + PASSED)
def test_guard_reasons(stored: str, incoming: str, expected: str | None) -> None:
    reason = guard(stored, incoming)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected), reason


@pytest.mark.parametrize("stored, incoming, expected", REFUSED)
def test_guard_is_symmetric_in_refusing(stored: str, incoming: str, expected: str) -> None:
    assert guard(incoming, stored) is not None


@pytest.mark.parametrize(
    "check, stored, incoming",
    [
        (dates_differ, "on 2024-01-01", "on 2024-01-02"),
        (numbers_differ, "buy 3 eggs", "buy 4 eggs"),
        (units_differ, "10 km", "10 miles"),
        (negation_differs, "it works", "it never works"),
        (antonyms_differ, "increase it", "decrease it"),
        (alternatives_differ, "the mode", "the median"),
        (entities_differ, "visit Kyoto now", "visit Osaka now"),
        (identifiers_differ, "run main.py", "run main.rs"),
        (quoted_differ, 'say "hi there"', 'say "hi where"'),
        (symbols_differ, "is a < b", "is a <= b"),
    ],
)
def test_each_check_alone(check, stored: str, incoming: str) -> None:
    diff = text_diff(stored, incoming)
    assert diff is not None
    assert check(diff) is not None
    assert check(text_diff(stored, stored)) is None  # type: ignore[arg-type]


def test_checks_are_named_functions_in_order() -> None:
    names = [c.__name__ for c in GUARD_CHECKS]
    assert names[:3] == ["dates_differ", "numbers_differ", "units_differ"]
    assert all(name.endswith(("_differ", "_differs")) for name in names)


def _one_number_changed(words: int, at: int) -> tuple[str, str]:
    rng = random.Random(7)
    vocabulary = "the quick brown fox jumps over a lazy dog near Paris on weekdays".split()
    text = " ".join(rng.choice(vocabulary) for _ in range(words))
    return text[:at] + " 120 " + text[at:], text[:at] + " 121 " + text[at:]


def test_a_huge_prompt_with_one_change_is_fast_and_caught() -> None:
    # No clock: the guard's cost is its tokeniser and difflib, so count what they are given. A
    # 1 MB prompt must cost what a 10 KB one costs (only the differing middle is analysed).
    original, changed = _one_number_changed(180_000, 500_000)
    with count_work(max_diff_tokens=2 * MAX_CHANGED_TOKENS) as huge:
        assert guard(original, changed) == "number 120≠121"
    with count_work() as small:
        assert guard(*_one_number_changed(1_800, 5_000)) == "number 120≠121"
    assert 0 < huge.tokenised_chars <= small.tokenised_chars < 1_000
    assert huge.largest_diff <= small.largest_diff


def test_huge_unrelated_prompts_are_refused_quickly() -> None:
    # "Quickly", counted: texts this far apart are refused before any token is analysed or diffed.
    rng = random.Random(8)
    vocabulary = "alpha beta gamma delta epsilon zeta eta theta".split()
    a = " ".join(rng.choice(vocabulary) for _ in range(150_000))
    b = " ".join(rng.choice(vocabulary) for _ in range(150_000))
    with count_work(max_diff_tokens=2 * MAX_CHANGED_TOKENS) as work:
        reason = guard(a, b)
        assert reason is not None and reason.startswith("texts differ too widely")
        assert guard(a, "hello") is not None
    assert work.tokenised_chars == 0 and work.difflib_tokens == []


@pytest.mark.parametrize(
    "stored, incoming",
    [("dog bites man", "man bites dog"), ("Convert 5 USD to EUR", "Convert 5 EUR to USD"),
     ("sort the list then filter the rows", "filter the list then sort the rows")],
)
def test_pure_reorders_are_refused(stored, incoming):
    assert guard(stored, incoming).startswith("word order")


# ---------------------------------------------------------------- edits: allow-list and small edits

from semula.core.guard.edits import edits_change_question, edits_unlisted  # noqa: E402
from semula.core.nearmatch import lexical_tokens  # noqa: E402


# (stored, incoming, id): edits the allow-list knows
HARMLESS = [
    ("Explain how a hash map works.", "Please explain how a hash map works", "please"),
    ("Could you summarise this article?", "Summarise this article.", "request frame"),
    ("What's the difference between TCP and UDP?", "What is the difference between TCP and UDP?", "contraction"),
    ("I don't get it", "I do not get it", "n't"),
    ("How do I center a div?", "How can I centre a div?", "how can I, spelling"),
    ("Which phone should I buy?", "What phone should I purchase?", "which/what, synonym"),
    ("Por favor, resume este texto.", "Resume este texto.", "spanish politeness"),
    ("Bitte übersetze den Satz.", "Übersetze den Satz.", "german politeness"),
    ("Peux-tu l'expliquer, s'il te plaît ?", "Peux-tu l'expliquer ?", "french politeness"),
    ("Hi! Write a poem about the sea, thanks", "Write a poem about the sea.", "greeting and thanks"),
]

NOT_HARMLESS = [
    _case("How often should I feed my cat?", "How often should I feed my dog?", "edit not known harmless: cat → dog", "noun swap"),
    _case("Read a CSV with pandas", "Read a CSV with polars", "edit not known harmless: pandas → polars", "library"),
    _case("Convert this to json", "Convert this to yaml", "edit not known harmless: json → yaml", "format"),
    _case("Should all tests pass?", "Should most tests pass?", "edit not known harmless: all → most", "quantifier"),
    _case("Should I tell her?", "Must I tell her?", "edit not known harmless: should → must", "modal"),
    _case("Did they announce it?", "Will they announce it?", "edit not known harmless: did → will", "tense"),
    _case("Copy from the server to my laptop", "Copy to the server from my laptop", "edit not known harmless:", "to/from"),
    _case("Turn on dark mode", "Turn off dark mode", "edit not known harmless: on → off", "on/off"),
    _case("The landlord sued the tenant", "The landlord was sued by the tenant", "edit not known harmless: 'was' only in incoming", "passive"),
    _case("Il est parti avant le dîner", "Il est parti après le dîner", "edit not known harmless: avant → après", "french"),
    _case("¿Cuál es más caro?", "¿Cuál es menos caro?", "edit not known harmless: más → menos", "spanish"),
    _case("dog bites man", "man bites dog", "edit not known harmless:", "moved words"),
    _case("Explain it", "Explain it simply", "edit not known harmless: 'simply' only in incoming", "manner adverb"),
    _case("Is a == b?", "Is a != b?", "edit not known harmless: == → !=", "symbol"),
]


@pytest.mark.parametrize("stored, incoming, expected", [_case(a, b, None, i) for a, b, i in HARMLESS] + NOT_HARMLESS)
def test_edits_unlisted(stored: str, incoming: str, expected: str | None) -> None:
    reason = edits_unlisted(lexical_tokens(stored), lexical_tokens(incoming))
    assert reason == expected if expected is None else (reason or "").startswith(expected)
    if expected is not None:  # refusing does not depend on which side was recorded
        assert edits_unlisted(lexical_tokens(incoming), lexical_tokens(stored)) is not None


SMALL_EDITS = [
    _case("How often should I feed my cat?", "How often should I feed my dog?", "small edit, words swapped: cat → dog", "noun swap"),
    _case("Should I scale up the cluster?", "Should I scale down the cluster?", "small edit, words swapped: up → down", "direction"),
    _case("The landlord sued the tenant", "The landlord was sued by the tenant", "small edit, relation word: 'by'", "passive"),
    _case("walking for half an hour", "walking for an hour and a half", "small edit, word moved:", "moved"),
    _case("Write arguments for the plan", "Write arguments for the plan, please", None, "harmless"),
    _case("What is the best way to learn Python?", "What are the best ways to learn Python?", "small edit, words swapped: way → ways", "plural"),
    _case("What is the best way to lose weight fast without going hungry?",
          "How can someone lose weight quickly and safely while not feeling starved all day?", None, "rewording"),
]


@pytest.mark.parametrize("stored, incoming, expected", SMALL_EDITS)
def test_edits_change_question(stored: str, incoming: str, expected: str | None) -> None:
    reason = edits_change_question(lexical_tokens(stored), lexical_tokens(incoming))
    assert reason == expected if expected is None else (reason or "").startswith(expected)
