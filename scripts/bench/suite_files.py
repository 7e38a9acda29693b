"""The generated pytest suite that scripts/bench/suite.py runs four ways.

N tests in files of 100, each making one or two `openai` SDK chat calls: plain, streamed, async,
async streamed, or a two-turn conversation. The same files serve every variant: the base URL comes
from BENCH_BASE_URL (unset: api.openai.com, which semula intercepts), and every module carries
pytest-recording's `vcr` marker, inert when the variant runs with `-p no:recording`.
"""

from __future__ import annotations

import random
from pathlib import Path

TESTS_PER_FILE = 100
# i % 10 picks the kind: half plain chats, the rest streams, async calls and two-turn tests.
KINDS = ("chat", "chat", "chat", "chat", "chat", "stream", "stream", "async_chat", "two_turns", "async_stream")
CALLS = {"chat": 1, "stream": 1, "async_chat": 1, "async_stream": 1, "two_turns": 2}
WORDS = ("suite replay cassette fixture stream token answer model prompt latency budget provider recording "
         "deterministic offline network request response summary invoice customer ticket release schedule").split()

PYTEST_INI = """[pytest]
addopts = -p no:cacheprovider
"""

CONFTEST = '''"""Session fixtures of the generated benchmark suite."""

import pytest

from benchhelpers import sync_client


def pytest_configure(config):
    config.addinivalue_line("markers", "vcr: pytest-recording cassette (inert with -p no:recording)")


@pytest.fixture(scope="module")
def vcr_config():
    # As semula does: the body is part of the match, and the key never reaches a cassette.
    return {"match_on": ["method", "scheme", "host", "port", "path", "query", "body"],
            "filter_headers": ["authorization"]}


@pytest.fixture(scope="session")
def client():
    return sync_client()
'''

HELPERS = '''"""The calls the generated tests make, through the official openai SDK."""

import asyncio
import os

import openai

BASE_URL = os.environ.get("BENCH_BASE_URL") or None
MODEL = "gpt-4o-mini"


def sync_client():
    return openai.OpenAI(base_url=BASE_URL, max_retries=0)


def messages(prompt, history=()):
    return [{"role": "system", "content": "You are a terse test assistant."}, *history,
            {"role": "user", "content": prompt}]


def chat(client, prompt, history=()):
    answer = client.chat.completions.create(model=MODEL, temperature=0, messages=messages(prompt, history))
    assert answer.choices[0].message.content
    return answer.choices[0].message.content


def stream(client, prompt):
    chunks = client.chat.completions.create(model=MODEL, temperature=0, messages=messages(prompt), stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    return text


def two_turns(client, prompt):
    first = chat(client, prompt)
    history = [{"role": "user", "content": prompt}, {"role": "assistant", "content": first}]
    return chat(client, "And in one word?", history)


def async_chat(prompt):
    async def go():
        async with openai.AsyncOpenAI(base_url=BASE_URL, max_retries=0) as client:
            answer = await client.chat.completions.create(model=MODEL, temperature=0, messages=messages(prompt))
            return answer.choices[0].message.content

    text = asyncio.run(go())
    assert text
    return text


def async_stream(prompt):
    async def go():
        async with openai.AsyncOpenAI(base_url=BASE_URL, max_retries=0) as client:
            chunks = await client.chat.completions.create(model=MODEL, temperature=0, messages=messages(prompt),
                                                          stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])

    text = asyncio.run(go())
    assert text
    return text
'''


def prompt(i: int) -> str:
    rng = random.Random(i)
    return f"Test {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30))) + "?"


def test_source(i: int) -> str:
    kind = KINDS[i % len(KINDS)]
    call = f"{kind}({prompt(i)!r})" if kind.startswith("async") else f"{kind}(client, {prompt(i)!r})"
    fixture = "" if kind.startswith("async") else "client"
    return f"def test_{kind}_{i:05d}({fixture}):\n    {call}\n\n\n"


def write_suite(root: Path, tests: int) -> dict[str, int]:
    """Write the suite into `root`; return how many tests of each kind and how many calls they make."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text(PYTEST_INI)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "benchhelpers.py").write_text(HELPERS)
    header = ("import pytest\n\nfrom benchhelpers import async_chat, async_stream, chat, stream, two_turns\n\n"
              "pytestmark = pytest.mark.vcr\n\n\n")
    for start in range(0, tests, TESTS_PER_FILE):
        body = "".join(test_source(i) for i in range(start, min(tests, start + TESTS_PER_FILE)))
        (root / f"test_part_{start // TESTS_PER_FILE:03d}.py").write_text(header + body)
    counts: dict[str, int] = {}
    for i in range(tests):
        counts[KINDS[i % len(KINDS)]] = counts.get(KINDS[i % len(KINDS)], 0) + 1
    counts["calls"] = sum(CALLS[k] * n for k, n in list(counts.items()))
    return counts
