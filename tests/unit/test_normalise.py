from __future__ import annotations

import re
import unicodedata

import pytest

from semula.core.normalise import (
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
        ("Hello", "HELLO"),
        ("What are APIs?", "what are apis"),
        ("Straße", "STRASSE"),
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
        ("Pok\u00e9mon", unicodedata.normalize("NFD", "POK\u00c9MON")),
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
        # inline code whitespace
        ("Explain `ls  -s`", "explain `ls -s`"),
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
        ("x\n```Python\n    def F():\n        pass\n```\nThen?", "x ```python\ndef F():\n    pass\n``` then"),
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
