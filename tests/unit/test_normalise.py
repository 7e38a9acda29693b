from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from semula.core.request.normalise import (
    VOLATILE_PATTERNS,
    compile_scrub_patterns,
    normalise_text,
    scrub_volatile,
    words,
)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # whitespace
        ("Summarise this.\n\nBright flat,  78 m2.", "Summarise this.\r\n\r\nBright flat, 78 m2."),
        ("What are the causes of bleaching?", "  What are the causes of bleaching?\n\n\n"),
        ("a\tb", "a  b"),
        # letter case of prose
        ("WHAT IS THE CHEMICAL FORMULA FOR TABLE SALT?", "What is the chemical formula for table salt?"),
        ("how do i renew a library book online?", "How do I renew a library book online?"),
        ("Hello there, how are you", "HELLO THERE, HOW ARE YOU"),
        ("Where is the Straße", "WHERE IS THE STRASSE"),
        # trailing punctuation
        ("Name the largest ocean in the world.", "Name the largest ocean in the world"),
        ("Is it good?", "Is it good??"),
        ("Go!", "Go!!!"),
        ("Continue the story...", "Continue the story"),
        ("What is 12 x 15？", "What is 12 x 15"),
        # unicode variants
        ("Explain \"it's raining\"", "Explain \u201cit\u2019s raining\u201d"),
        ("the driver's name", "the driver\u2018s name"),
        ("the driver's name", "the driver\u00b4s name"),
        ("5' 11\"", "5\u2032 11\u2033"),
        ("10 000 USD", "10\u00a0000\u00a0USD"),
        ("2 to 3:30 pm", "2\u202fto 3:30\u2009pm"),
        ("What is 12 x 15?", "What is \uff11\uff12 x \uff11\uff15\uff1f"),
        ("How does a cr\u00eape differ?", unicodedata.normalize("NFD", "How does a cr\u00eape differ?")),
        ("Who made Pok\u00e9mon", unicodedata.normalize("NFD", "WHO MADE POK\u00c9MON")),
        ("9 am-8 pm", "9 am\u20138 pm"),
        ("zero width", "zero\u200b width"),
        ("3^2", "3\u00b2"),
        # JSON pasted into a prompt
        (
            'Record: {"first": "Carol", "last": "Nguyen"}. Which plan?',
            'Record: {\n    "last": "Nguyen",\n    "first": "Carol"\n}. Which plan?',
        ),
        ("Sum [1, 2, 3]", "Sum [1,2,3]"),
        ('```json\n{"b": 1, "a": [1, 2]}\n```', '```JSON\n{\n  "a": [1,2],\n  "b": 1\n}\n```'),
        ('Run `{"a": 1, "b": 2}`', 'Run `{"b":2,"a":1}`'),
        # fenced code: line endings, trailing spaces, blank lines and a common indent
        ("```py\ndef f():\n    return 1\n```", "```py\r\n    def f():   \r\n\r\n        return 1\r\n```"),
    ],
)
def test_same_after_normalising(a: str, b: str) -> None:
    assert normalise_text(a) == normalise_text(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # code keeps its case
        ("Explain what the flag in `ls -s` does.", "Explain what the flag in `ls -S` does."),
        ("Explain ls -s", "Explain ls -S"),
        ("What does --Foo do", "What does --foo do"),
        ("Call getUser here", "Call getuser here"),
        ("Rename get_user", "Rename GET_USER"),
        ("Use MAX_RETRIES", "Use max_retries"),
        ("Load data.CSV", "Load data.csv"),
        ("Edit /etc/Hosts", "Edit /etc/hosts"),
        ("Edit .Env", "Edit .env"),
        ("Explain HTTPServer", "Explain httpserver"),
        ("Compare the iPhone 15", "Compare the IPHONE 15"),
        ("Format with %M", "Format with %m"),
        ("What is NaCl", "What is NACL"),
        ("Is H2O safe", "Is h2o safe"),
        ("Call len(X)", "Call len(x)"),
        ("```\nX = 1\n```", "```\nx = 1\n```"),
        ("```py\nif a:\n    b()\nc()\n```", "```py\nif a:\n    b()\n    c()\n```"),  # indentation is syntax
        # units after a number
        ("Download 100 MB", "Download 100 Mb"),
        ("Rated 5 MW", "Rated 5 mW"),
        # NFKC must not merge different numbers
        ("What is 3\u00b2?", "What is 32?"),
        ("Add 1\u00bd cups", "Add 11/2 cups"),
        ("x\u2081 + y", "x1 + y"),
        # punctuation that is not a sentence end
        ("cd ..", "cd ."),
        ("cd ..", "cd"),
        # different words stay different
        ("Load data.csv into pandas", "Load data.tsv into pandas"),
        ("Translate into German", "Translate into Dutch"),
        ("Is it open on 2024-03-01", "Is it open on 2024-03-02"),
        ('Record {"plan": "pro"}', 'Record {"plan": "Pro"}'),
        ("Find the mean", "Find the mode"),
        # acronyms keep their case outside a shouting prompt
        ("What are APIs?", "what are apis"),
        ("Hello", "HELLO"),
    ],
)
def test_different_after_normalising(a: str, b: str) -> None:
    assert normalise_text(a) != normalise_text(b)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello,   World!!", "hello, world"),
        ("  \n ", ""),
        ("???", "???"),
        ("Explain `ls -S` now.", "explain `ls -S` now"),
        ('Record: {\n "b": 1, "a": 2\n}.', 'record: {"a":2,"b":1}'),
        ("x\n```Python\n    def F():\n        pass\n```\nThen?", "x ```python\ndef F():\n pass\n``` then"),
        ("Run ```SELECT * FROM T``` now", "run ```\nSELECT * FROM T\n``` now"),
        ("ls -S --Sort getUser data.CSV", "ls -S --Sort getUser data.CSV"),
        ("The 5TH item", "the 5th item"),
    ],
)
def test_normalise_text_output(text: str, expected: str) -> None:
    assert normalise_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User 803d7f67-a5b0-4c3b-8a16-a64ae65c469e asks", "User <uuid> asks"),
        ("id 803D7F67-A5B0-1C3B-8A16-A64AE65C469E", "id <uuid>"),  # any version, any case
        ("sent at 2026-01-03T01:27:10Z: when", "sent at <datetime>: when"),
        ("taken 2025-11-30T00:35:10.671Z:", "taken <datetime>:"),
        ("As of 2025-07-23T19:14:02+01:00, write", "As of <datetime>, write"),
        ("logged 2025-07-23 19:14:02.5 UTC", "logged <datetime> UTC"),
        ("book for 2025-07-23 19:00", "book for 2025-07-23 19:00"),  # a human time, not a log stamp
        ("stamp 20250723T191402Z", "stamp <datetime>"),
        ("req_5cf9f6c8 | Explain", "<id> | Explain"),
        ("Request req_73aea22c: list", "Request <id>: list"),
        ("[trace_id: 65819f95bd451ad2611947d093c8676a] Make", "[trace_id: <id>] Make"),
        ("(trace e628d0dd275641925f9be327329fd435) Draft", "(trace <id>) Draft"),
        ("trace-7f3a9c21b0 done", "<id> done"),
        ("msg_01XFDUDYJgAACzvnptvVoYEL and toolu_01A09q90qw90lq917835lq9", "<id> and <id>"),
        ("call_abc123DEF", "<id>"),
        # not volatile: these change answers
        ("Is it open on 2024-03-01?", "Is it open on 2024-03-01?"),
        ("Meet at 3:30 pm", "Meet at 3:30 pm"),
        ("Policy MTR-558210", "Policy MTR-558210"),
        ("Status of order-123456", "Status of order-123456"),
        ("Use claude-3-5-sonnet-20241022", "Use claude-3-5-sonnet-20241022"),
        ("Card 4111111111111111", "Card 4111111111111111"),
        ("commit 3f2a9c1", "commit 3f2a9c1"),
        ("request_handler and run_tests", "request_handler and run_tests"),
    ],
)
def test_scrub_volatile(text: str, expected: str) -> None:
    assert scrub_volatile(text) == expected


def test_volatile_patterns_are_compiled_with_placeholders() -> None:
    assert {p for p, _ in VOLATILE_PATTERNS} == {"<uuid>", "<datetime>", "<id>"}
    assert all(isinstance(rx, re.Pattern) for _, rx in VOLATILE_PATTERNS)


@pytest.mark.parametrize(
    ("text", "patterns", "expected"),
    [
        ("Order #4521 shipped", [r"#\d+"], "Order <scrubbed> shipped"),
        ("seed=99 run", [r"seed=\d+", r"run"], "<scrubbed> <scrubbed>"),
        ("no match", [r"zzz"], "no match"),
    ],
)
def test_scrub_volatile_extra_patterns(text: str, patterns: list[str], expected: str) -> None:
    assert scrub_volatile(text, patterns) == expected


@pytest.mark.parametrize("pattern", ["(unclosed", "[a-", "*x", "", "a*"])
def test_invalid_scrub_pattern_names_the_pattern(pattern: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(pattern))):
        compile_scrub_patterns([r"ok\d", pattern])


def test_compile_scrub_patterns_returns_compiled() -> None:
    (rx,) = compile_scrub_patterns([r"ab+c"])
    assert rx.search("xabbcx")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World! It's 2024.", ["hello", "world", "it", "s", "2024"]),
        ("ls -S getUser", ["ls", "s", "getuser"]),
        ("User 803d7f67-a5b0-4c3b-8a16-a64ae65c469e asks", ["user", "uuid", "asks"]),
        ("東京の天気は？", ["東", "京", "の", "天", "気", "は"]),
        ("Python で東京", ["python", "で", "東", "京"]),
        ("서울 날씨", ["서울", "날씨"]),
        ("Ünïcödé Wörds", ["ünïcödé", "wörds"]),
        ("", []),
    ],
)
def test_words(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_words_use_extra_scrub_patterns() -> None:
    assert words("Order #4521", [r"#\d+"]) == ["order", "scrubbed"]


# ------------------------------------------------ whitespace and case that carry meaning

SAME_LAYOUT = [
    # indentation is relative nesting: a whole block re-indented is the same
    ("```py\ndef f():\n    if x:\n        return 1\n```", "```py\ndef f():\n  if x:\n    return 1\n```"),
    ("```sql\nSELECT a\nFROM t\n```", "```sql\n    SELECT a\n    FROM t\n```"),
    ("Fix:\nfor x in xs:\n    y(x)\nz()", "Fix:\nfor x in xs:\n  y(x)\nz()"),
    ("Check:\n\na:\n  b: 1\nc: 2", "Check:\n\na:\n    b: 1\nc: 2"),
    # a list indented under its prose lead-in line
    ("Summarise these notes:\n- one\n- two", "Summarise these notes:\n    - one\n    - two"),
    ("Summarise these notes:\n- a\n  - b\n- c", "Summarise these notes:\n  - a\n      - b\n  - c"),
    # a Markdown list re-indented as a whole under a short lead-in, a blank line before a heading
    ("Zutaten:\n- Mehl\n- Zucker\n  - braun\n## Schritte\nrühren", "Zutaten:\n   - Mehl\n   - Zucker\n     - braun\n\n## Schritte\nrühren"),
    ("Kroky:\n1. otevřít\n2. zavřít", "Kroky:\n    1. otevřít\n    2. zavřít"),
    ("Lista:\n+ uno\n+ dos", "Lista:\n  + uno\n  + dos"),
    ("steps:\n  - name: build\n    run: make", "steps:\n- name: build\n  run: make"),  # YAML: the same too
    # the prose question's case changed over an unchanged indented block
    ("cosa stampa?\n    x = 1\n    print(x)", "Cosa stampa?\n    x = 1\n    print(x)"),
    ("WAS MACHT DAS\n    x = 1\n    print(x)", "was macht das\n    x = 1\n    print(x)"),
    ("Run this:\n    x = 1\nwhat is x now?", "Run this:\n    x = 1\nWhat is x now?"),
    # tabs are width where no Makefile rule is in sight
    ("```go\nfunc f() {\n\treturn\n}\n```", "```go\nfunc f() {\n    return\n}\n```"),
    # whole-prompt case, sentence capitals, "i"
    ("LIST THREE SIDE EFFECTS OF AMOXICILLIN.", "List three side effects of amoxicillin."),
    ("WHAT DOES `ls -S` DO?", "What does `ls -S` do?"),
    ("CONVERT 5 KM TO MILES", "Convert 5 km to miles"),
    ("WHAT IS H2O", "What is H2O"),
    ("explain it. then stop.", "Explain it. Then stop."),
    ("can i go?", "Can I go?"),
    ("What Is The Best Way To Store Basil?", "what is the best way to store basil?"),
    ("The 5TH item", "the 5th item"),
    # quotes are found without eating apostrophes or inch marks
    ("It's the drivers' car", "IT'S THE DRIVERS' CAR"),
    ('Explain "break a leg" please', 'explain "break a leg" please'),
    # inline code: a re-wrapped line break is a space
    ("Run `ls -l\n/tmp` now", "Run `ls -l /tmp` now"),
]

DIFFERENT_LAYOUT = [
    # indentation in code, fenced or not
    ("```py\nif a:\n    b()\nc()\n```", "```py\nif a:\n    b()\n    c()\n```"),
    ("Fix:\nfor x in xs:\n    y(x)\n    z()", "Fix:\nfor x in xs:\n    y(x)\nz()"),
    ("Why?\n\ndef f():\nreturn 1", "Why?\n\ndef f():\n    return 1"),
    ("Check:\n\na:\n  b: 1\n  c: 2", "Check:\n\na:\n  b: 1\nc: 2"),
    ("```yaml\na:\n  - b\n  - c\n```", "```yaml\na:\n  - b\n    - c\n```"),
    ("class A:\n    def f(self):\n        pass\n\n    def g(self):\n        pass", "class A:\n    def f(self):\n        pass\n\ndef g(self):\n    pass"),
    # a list's own nesting, and a list under an indented key, still count
    ("Kroky:\n- umýt\n- krájet\n- vařit", "Kroky:\n- umýt\n  - krájet\n- vařit"),
    ("a:\n  b:\n    - x", "a:\n  b:\n- x"),
    ("steps:\n  - name: build\n  run: make", "steps:\n  - name: build\n    run: make"),
    ("Zutaten:\n- Mehl\n- Zucker", "Zutaten:\n  - Mehl\n  - Salz"),
    # a lower-case code line is not a lead-in sentence
    ("def f():\n    import numpy as np\n    return np", "def f():\nimport numpy as np\n    return np"),
    ("cosa stampa?\n    for i in x:\n        print(i)", "Cosa stampa?\n    for i in x:\n    print(i)"),
    # Makefile recipes need tabs
    ("```make\nall:\n\tcc x.c\n```", "```make\nall:\n    cc x.c\n```"),
    ("Why?\n\nall: x\n\tcc x.c", "Why?\n\nall: x\n    cc x.c"),
    # runs of spaces in quotes and inline code
    ('Length of "a  b"?', 'Length of "a b"?'),
    ('Use the prefix "Note:  " always', 'Use the prefix "Note: " always'),
    ("Explain `ls  -s`", "explain `ls -s`"),
    ("What does `sed 's/  */ /g'` do", "What does `sed 's/ */ /g'` do"),
    # case inside quotes and code
    ('Is "Password1" valid', 'Is "password1" valid'),
    ("Translate 'Sie' into English", "Translate 'sie' into English"),
    ("Is `True` valid JSON", "Is `true` valid JSON"),
    ("WHAT DOES `ls -S` DO", "WHAT DOES `ls -s` DO"),
    # acronyms, symbols and identifiers
    ("What is the molar mass of CO?", "What is the molar mass of Co?"),
    ("Write a poem about US", "Write a poem about us"),
    ("Who leads the WHO?", "Who leads the who?"),
    ("Upgrade IOS on a router", "Upgrade iOS on a router"),
    ("Explain NaN in NumPy", "Explain NAN in NumPy"),
    ("Что такое США", "Что такое сша"),
    # a shouting prompt keeps deliberate lower case
    ("WHAT IS THE MASS OF Co", "WHAT IS THE MASS OF CO"),
    # pasted JSON: repeated keys stay, numbers keep their text
    ('{"id": 1, "id": 2}', '{"id": 2, "id": 1}'),
    ('{"id": 1, "id": 2}', '{"id": 2}'),
    ('Which wins: {"a": {"p": 1, "p": 2}}', 'Which wins: {"a": {"p": 2, "p": 1}}'),
    ('Version {"v": 1.10}', 'Version {"v": 1.1}'),
    ('Run `{"a": 1, "a": 2}`', 'Run `{"a": 2, "a": 1}`'),
]


@pytest.mark.parametrize(("a", "b"), SAME_LAYOUT)
def test_layout_same(a: str, b: str) -> None:
    assert normalise_text(a) == normalise_text(b)


@pytest.mark.parametrize(("a", "b"), DIFFERENT_LAYOUT)
def test_layout_different(a: str, b: str) -> None:
    assert normalise_text(a) != normalise_text(b)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```py\nif a:\n        b()\n```", "```py\nif a:\n b()\n```"),  # one space per nesting level
        ("```make\nall:\n\tcc x.c\n```", "```make\nall:\n\t cc x.c\n```"),  # a recipe keeps its tab
        ("Fix:\nif a:\n    b()\nc()", "fix: if a:\n b()\nc()"),  # unfenced code keeps nesting
        ("Fix these\nlines of prose", "fix these lines of prose"),  # prose has none
        ('Say "Hi  There" Now', 'say "Hi  There" now'),
        ("Is CO or Co toxic", "is CO or co toxic"),
        ("WHAT IS CO OR Co", "what is co or Co"),
        ('{"b": 1, "a": 2, "b": 3}', '{"a":2,"b":1,"b":3}'),  # sorted, repeated keys in order
        ('[1.10, 2e3, -0]', "[1.10,2e3,-0]"),
    ],
)
def test_layout_output(text: str, expected: str) -> None:
    assert normalise_text(text) == expected


def test_input_cannot_forge_an_indentation_marker() -> None:
    forged = "Fix:\nif a:\n \ue0001\ue001 b()"
    assert normalise_text(forged) != normalise_text("Fix:\nif a:\n    b()")


# ------------------------------------------------ the same rules in the context


def _request(system: str, earlier: str, last: str):
    from semula.core.request.canonical import CanonicalRequest, Message

    return CanonicalRequest(
        provider="openai",
        method="POST",
        endpoint="/v1/chat/completions",
        query=(),
        headers=(),
        model="gpt-4o-mini",
        system=system,
        messages=(
            Message("user", earlier),
            Message("assistant", "ok"),
            Message("tool", "", ({"type": "tool_result", "content": earlier},)),
            Message("user", last),
        ),
        tools=(),
        params={},
        stream=False,
        body=None,
    )


@pytest.mark.parametrize(
    ("where", "a", "b", "same"),
    [
        ("system", "Style:\ndef f():\n    if x:\n        return 1", "Style:\ndef f():\n  if x:\n    return 1", True),
        ("system", "Style:\ndef f():\n    if x:\n        return 1", "Style:\ndef f():\n    if x:\n    return 1", False),
        ("system", 'Prefix answers with "A:  "', 'Prefix answers with "A: "', False),
        ("system", "You support SAP users.", "You support Sap users.", False),
        ("system", "YOU SUPPORT SAP USERS.", "You support sap users.", True),
        ("earlier", "cfg:\n  a: 1\n  b: 2", "cfg:\n  a: 1\nb: 2", False),
        ("earlier", '{"id": 1, "id": 2}', '{"id": 2, "id": 1}', False),
        ("earlier", '{"id": 1, "id": 2}', '{\n  "id": 1,\n  "id": 2\n}', True),
    ],
)
def test_context_uses_the_same_rules(where: str, a: str, b: str, same: bool) -> None:
    from semula.core.request.canonical import context_fingerprint, normalised_fingerprint

    if where == "system":
        ra, rb = _request(a, "hi", "Go"), _request(b, "hi", "Go")
    else:
        ra, rb = _request("sys", a, "Go"), _request("sys", b, "Go")
    assert (normalised_fingerprint(ra) == normalised_fingerprint(rb)) is same
    assert (context_fingerprint(ra) == context_fingerprint(rb)) is same


# ------------------------------------------------ the pair files of these rules

_DATA = Path(__file__).resolve().parents[1] / "data"


def _pair_file(name: str) -> list[dict[str, Any]]:
    path = _DATA / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


_LAYOUT_PAIRS = [
    p
    for name in ("whitespace-case-pairs.jsonl", "json-dupkeys-pairs.jsonl", "format-extra-pairs.jsonl")
    for p in _pair_file(name)
]


@pytest.mark.parametrize("pair", _LAYOUT_PAIRS, ids=lambda p: p["id"])
def test_layout_pair_files(pair: dict[str, Any]) -> None:
    from semula.core.request.canonical import normalised_fingerprint
    from semula.engine.evaluate import canonical_of

    from entries import TEST_KEY

    stored, incoming = canonical_of(pair["stored"], TEST_KEY), canonical_of(pair["incoming"], TEST_KEY)
    shared = normalised_fingerprint(stored) == normalised_fingerprint(incoming)
    assert shared is (pair["expect"] == "same"), pair["note"]
