"""Identical requests sent at once go upstream once (reliability item 2).

The in-flight key used to be registered after the decision had awaited the near-match search,
so 2, 4 or 8 simultaneous identical misses each went upstream and got different answers. The
first miss now claims the key before any await; the others wait for its recording and are
served the same answer, streams included.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, openai_client, read_call_log, uniq

pytestmark = pytest.mark.e2e

CONCURRENT = 8


def ask(proxy: ProxyHandle, text: str, stream: bool) -> str:
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    messages = [{"role": "user", "content": text}]
    if not stream:
        return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content
    chunks = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_identical_concurrent_misses_make_one_upstream_call_and_get_one_answer(
        stream: bool, proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    text = f"SLOW identical concurrent {'stream' if stream else 'plain'} {uniq('coalesce')}"
    before = fake_provider.count()
    with ThreadPoolExecutor(CONCURRENT) as pool:
        answers = list(pool.map(lambda _: ask(proxy, text, stream), range(CONCURRENT)))
    assert fake_provider.count() == before + 1, f"{fake_provider.count() - before} upstream calls: {answers}"
    assert len(set(answers)) == 1 and answers[0].startswith("fake answer #"), answers
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    assert sorted(r["decision"] for r in rows) == ["hit"] * (CONCURRENT - 1) + ["miss"], rows
