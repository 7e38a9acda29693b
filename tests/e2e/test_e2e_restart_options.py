"""Options a running proxy cannot take: changing the store, the recordings folder or the embedding tier
(and the data dir, read-only switch and admin endpoint, all opened at start-up) through mitmproxy's own
option mechanism is refused with a clear error, the option keeps its value and the proxy goes on
recording where it started; every other option is applied at once.

Driven through mitmweb's options API (`PUT /options`, what its options page sends), the one way a
running `semula proxy` takes a new option value.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import ProxyFactory
from e2e_helpers import ProxyHandle, free_port, openai_client, semula_meta, uniq

pytestmark = pytest.mark.e2e

XSRF = "semula-test-xsrf"  # tornado compares the cookie with the header; any value will do


class Web:
    """mitmweb's API of one running proxy."""

    def __init__(self, port: int, token: str) -> None:
        self.base, self.token = f"http://127.0.0.1:{port}", token

    def _send(self, method: str, path: str, body: Any = None) -> tuple[int, str]:
        request = urllib.request.Request(
            self.base + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                     "Cookie": f"_mitmproxy_xsrf={XSRF}", "X-XSRFToken": XSRF})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def set(self, **options: Any) -> tuple[int, str]:
        return self._send("PUT", "/options", options)

    def value(self, name: str) -> Any:
        status, text = self._send("GET", "/options")
        assert status == 200, text
        return json.loads(text)[name]["value"]


def web_proxy(proxy_factory: ProxyFactory, recordings: Path, *extra: str) -> tuple[ProxyHandle, Web]:
    token = secrets.token_hex(16)
    port = free_port()
    proxy = proxy_factory("auto", extra_args=(
        "--web", "--recordings", str(recordings), "--set", "web_open_browser=false", "--set", f"web_port={port}",
        "--set", f"web_password={token}", *extra))
    return proxy, Web(port, token)


def ask(proxy: ProxyHandle, text: str) -> dict[str, str | None]:
    raw = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}])
    return semula_meta(raw.headers)


@pytest.mark.parametrize("option, value", [
    ("semula_store", "postgresql://semula@127.0.0.1:1/elsewhere"),
    ("semula_recordings", "off"),
    ("semula_embeddings", True),
    ("semula_data_dir", "/tmp/semula-elsewhere"),
])
def test_a_running_proxy_refuses_an_option_read_at_start_up_and_keeps_recording_where_it_started(
        proxy_factory: ProxyFactory, tmp_path: Path, option: str, value: Any) -> None:
    recordings = tmp_path / "recordings"
    proxy, web = web_proxy(proxy_factory, recordings)
    before = web.value(option)
    status, text = web.set(**{option: value})
    assert status == 400, text
    assert f"semula: {option} cannot change on a running proxy" in text and "restart the proxy" in text, text
    assert web.value(option) == before, "the refused option keeps its value"
    prompt = uniq("restart") + ": say something short"
    assert ask(proxy, prompt)["x-semula-decision"] == "miss"
    assert ask(proxy, prompt)["x-semula-decision"] == "hit", proxy.describe()
    recorded = [path for path in recordings.rglob("*.json") if not path.name.startswith("_")]  # not the manifest
    assert len(recorded) == 1, f"recorded into the folder it started with: {recorded}"
    assert proxy.proc.poll() is None, proxy.describe()


def test_a_running_proxy_applies_an_option_read_on_each_call(proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    proxy, web = web_proxy(proxy_factory, tmp_path / "recordings")
    status, text = web.set(semula_mode="replay")
    assert status == 200, text
    unrecorded = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.with_raw_response
    with pytest.raises(Exception) as refused:
        unrecorded.create(model="gpt-4o-mini", messages=[{"role": "user", "content": uniq("applied")}])
    assert getattr(refused.value, "status_code", None) == 404, refused.value
