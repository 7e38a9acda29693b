"""A prompt built to make normalisation quadratic is answered, and so is a normal request beside it (issue 34).

Normalising "[1,[1,[1,..." or " 'a 'a 'a..." used to cost a scan from nearly every character to the
end: a 2 MB body of them held the proxy for hours, and every other request with it (the work holds
the GIL). Normalisation is now linear in the text, with a bounded search for pasted JSON.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, openai_client, uniq

pytestmark = pytest.mark.e2e

MB = 1024 * 1024
# Each half alone stalled the proxy: nested arrays (a JSON decode attempt at every "[", each
# scanning far) and single quotes that never close (a regex scan from every quote to the end).
HOSTILE = ("[1," * (MB // 3)) + (" 'a" * (MB // 3))


def ask(proxy: ProxyHandle, text: str) -> str:
    client = openai_client(proxy.proxy_url, proxy.ca_path).with_options(timeout=240, max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": text}])
    return reply.choices[0].message.content or ""


@pytest.mark.timeout(600)
def test_a_hostile_prompt_is_answered_and_does_not_stall_a_normal_request(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    with ThreadPoolExecutor(2) as pool:
        hostile = pool.submit(ask, proxy, f"{uniq('hostile')} {HOSTILE}")
        normal = pool.submit(ask, proxy, f"a normal question {uniq('beside')}")
        assert normal.result().startswith("fake answer #")
        assert hostile.result().startswith("fake answer #")
