"""More hosts without replacing the list, and OpenAI's format on another provider's host, end to end.

One auto proxy started with `--extra-host` for a CDN (mapped to the fake provider, which serves a
binary image there) records: the image by exact match, an OpenAI chat call (the defaults are still
intercepted) and a tool-call conversation on Gemini's OpenAI-compatible path. A replay proxy with
the provider gone then answers all three, the image byte for byte, and the Gemini call although its
tool-call id (`pyd_ai_<uuid hex>`, new on every run) differs: the OpenAI reader scrubs it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, openai_client, sdk_http_client, semula_meta, ssl_context, uniq
from fakeprovider import media_bytes

pytestmark = pytest.mark.e2e

CDN = "media.semula-test-cdn.example"
IMAGE = f"https://{CDN}/media/cat-{uuid.uuid4().hex[:8]}.png"
GEMINI_OPENAI = "https://generativelanguage.googleapis.com/v1beta/openai/"


def cdn_args(upstream_port: int, recordings: Path) -> tuple[str, ...]:
    return ("--extra-host", CDN, "--set", f"map_remote=|//{CDN}/|//127.0.0.1:{upstream_port}/",
            "--recordings", str(recordings))


def get_image(proxy: ProxyHandle) -> httpx.Response:
    with httpx.Client(proxy=proxy.proxy_url, verify=ssl_context(proxy.ca_path), trust_env=False, timeout=30) as c:
        return c.get(IMAGE)


def ask_gemini_with_a_tool_result(proxy: ProxyHandle, prompt: str) -> Any:
    call_id = f"pyd_ai_{uuid.uuid4().hex}"  # pydantic-ai's tool-call ids: new on every run
    client = openai.OpenAI(api_key="AIza-test-not-a-real-key-000000000000", base_url=GEMINI_OPENAI, max_retries=0,
                           http_client=sdk_http_client(proxy.proxy_url, proxy.ca_path, openai))
    raw = client.chat.completions.with_raw_response.create(model="gemini-2.0-flash", messages=[
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "sunny"},
    ])
    return raw


def test_an_extra_host_is_recorded_and_replayed_offline_with_the_defaults_kept(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path) -> None:
    recordings = tmp_path / "recordings"
    prompt = uniq("extra hosts")
    auto = proxy_factory("auto", extra_args=cdn_args(fake_provider.port, recordings))

    image = get_image(auto)
    assert image.status_code == 200 and image.content == media_bytes(IMAGE.rsplit("/", 1)[1])
    assert semula_meta(image.headers)["x-semula-decision"] == "miss"
    chat = openai_client(auto.proxy_url, auto.ca_path).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    assert chat.headers["x-semula-decision"] == "miss", "the default hosts are still intercepted"
    gemini = ask_gemini_with_a_tool_result(auto, prompt)
    assert gemini.headers["x-semula-decision"] == "miss"
    line = "gemini-openai POST generativelanguage.googleapis.com/v1beta/openai/chat/completions"
    assert auto.pump.wait_for(lambda s: line in s, 20), auto.describe()  # the console line may trail the answer
    auto.stop()
    assert (recordings / "default" / "gemini-openai").is_dir(), sorted(p.name for p in recordings.glob("*/*"))

    count = fake_provider.count()
    replay = proxy_factory("replay", upstream="gone", extra_args=cdn_args(1, recordings))
    again = get_image(replay)
    assert again.status_code == 200 and again.content == image.content  # bytes, byte for byte
    assert semula_meta(again.headers)["x-semula-decision"] == "hit"
    assert again.headers["content-type"] == "image/png"
    replayed_chat = openai_client(replay.proxy_url, replay.ca_path).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    assert replayed_chat.parse().choices[0].message.content == chat.parse().choices[0].message.content
    replayed = ask_gemini_with_a_tool_result(replay, prompt)  # another tool-call id
    assert replayed.headers["x-semula-decision"] == "hit" and replayed.headers["x-semula-tier"] == "normalised"
    assert replayed.parse().choices[0].message.content == gemini.parse().choices[0].message.content
    assert fake_provider.count() == count, "replay never reached the provider"
