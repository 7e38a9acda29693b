"""Streams whose client hangs up at the terminal event are recorded (issue 12, item 1).

The fake provider sends a stream's terminal event, pauses, then ends the body, as real
servers can. The sync openai SDK closes the response at `data: [DONE]`, inside that pause,
so mitmproxy sees "client disconnected" before the body ends. The frames had delivered the
terminal event: the answer is complete and must be recorded, then replayed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from conftest import ProxyFactory
from e2e_helpers import (
    FakeProvider,
    ProxyHandle,
    anthropic_client,
    async_openai_client,
    openai_client,
    read_call_log,
    uniq,
)

pytestmark = pytest.mark.e2e

RUN = uniq("hangup")


def sync_openai(proxy: ProxyHandle, text: str) -> str:
    stream = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}], stream=True)
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def async_openai(proxy: ProxyHandle, text: str) -> str:
    async def run() -> str:
        client = async_openai_client(proxy.proxy_url, proxy.ca_path)
        try:
            stream = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": text}], stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        finally:
            await client.close()

    return asyncio.run(run())


def anthropic_helper(proxy: ProxyHandle, text: str) -> str:
    client = anthropic_client(proxy.proxy_url, proxy.ca_path)
    with client.messages.stream(model="claude-haiku-5-5", max_tokens=64,
                                messages=[{"role": "user", "content": text}]) as stream:
        return "".join(stream.text_stream)


CLIENTS: dict[str, Callable[[ProxyHandle, str], str]] = {
    "sync-openai": sync_openai,
    "sync-openai-gzip": sync_openai,
    "async-openai": async_openai,
    "anthropic-stream-helper": anthropic_helper,
}


@pytest.mark.parametrize("name", CLIENTS)
def test_a_stream_the_client_closed_at_its_terminal_event_is_recorded_and_replays(
        name: str, proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    text = f"{name} {'GZIP ' if 'gzip' in name else ''}stream {RUN}"
    ask = CLIENTS[name]
    before = fake_provider.count()
    first = ask(proxy, text)
    assert first.startswith("fake answer #"), first
    second = ask(proxy, text)
    assert second == first, "the repeat must be served the recorded stream"
    assert fake_provider.count() == before + 1, "the stream was not recorded: the repeat went upstream"
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    assert [(r["decision"], r["recorded"]) for r in rows] == [("miss", True), ("hit", False)], rows
    assert rows[0]["error"] is None, rows[0]

    replay = proxy_factory("replay", proxy.data_dir, upstream="gone")
    assert ask(replay, text) == first, "a replay with the provider gone must serve the recording"
