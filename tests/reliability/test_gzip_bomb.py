"""A compressed request body that inflates without bound is not matched (reliability item 9).

`request.get_content()` used to inflate a 971 KB gzip of 1 GB of zeros on the event loop: hits
stalled for seconds and the proxy's memory went to gigabytes. The body is now inflated off the
loop, at most `semula_max_body_mb` (32 MB by default): a bigger one is forwarded untouched in
auto mode and refused with the clear error in replay, and nothing else slows down.
"""

from __future__ import annotations

import json
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from conftest import ProxyFactory
from e2e_helpers import ProxyHandle, openai_client, read_call_log, ssl_context, uniq

pytestmark = pytest.mark.e2e

URL = "https://api.openai.com/v1/chat/completions"
INFLATED_MB = 200
TOO_LARGE = "the request body inflates to over 32 MB (semula_max_body_mb)"


def gzip_of_zeros(megabytes: int) -> bytes:
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"\0" * 2**20
    return b"".join(z.compress(chunk) for _ in range(megabytes)) + z.flush()


def send_bomb(proxy: ProxyHandle, bomb: bytes) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    with httpx.Client(proxy=proxy.proxy_url, verify=ssl_context(proxy.ca_path), trust_env=False, timeout=60) as c:
        response = c.post(URL, content=bomb, headers={
            "content-type": "application/json", "content-encoding": "gzip",
            "authorization": "Bearer sk-test-not-a-real-key"})
    return response, time.monotonic() - started


def ask(proxy: ProxyHandle, text: str) -> tuple[str, float]:
    started = time.monotonic()
    answer = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}]).choices[0].message.content
    return answer, time.monotonic() - started


def peak_rss_mb(proxy: ProxyHandle) -> float:
    status = open(f"/proc/{proxy.proc.pid}/status").read()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def test_a_gzip_bomb_is_not_inflated_and_does_not_stall_hits(proxy_factory: ProxyFactory) -> None:
    bomb = gzip_of_zeros(INFLATED_MB)
    text = f"a normal question {uniq('bomb')}"
    proxy = proxy_factory("auto")
    recorded, _ = ask(proxy, text)
    with ThreadPoolExecutor(2) as pool:
        bombed = pool.submit(send_bomb, proxy, bomb)
        time.sleep(0.05)
        hits = [ask(proxy, text) for _ in range(5)]
        response, took = bombed.result()
    assert all(answer == recorded for answer, _ in hits), hits
    assert max(ms for _, ms in hits) < 1.0, f"hits stalled during the bomb: {hits}"
    assert took < 10, f"the bomb took {took:.1f} s"
    assert peak_rss_mb(proxy) < 1024, f"the proxy's memory peaked at {peak_rss_mb(proxy):.0f} MB"
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    bomb_rows = [r for r in rows if r["decision"] == "bypass"]
    assert [(r["bypass_reason"], r["recorded"]) for r in bomb_rows] == [(TOO_LARGE, False)], rows
    assert bomb_rows[0]["status"] == response.status_code, "auto mode forwards the bomb untouched"

    replay = proxy_factory("replay", proxy.data_dir, upstream="gone")
    response, took = send_bomb(replay, bomb)
    assert response.status_code == 404 and took < 10, (response.status_code, took)
    assert TOO_LARGE in json.dumps(response.json()), response.text
    assert ask(replay, text)[0] == recorded
    assert peak_rss_mb(replay) < 1024
