"""Which project each client's call lands in: the proxy URL forms, `--project` and the header.

The documented form is `http://P:semula@host:port` (what `semula env --project P` writes): every
client that sends proxy credentials sends it. The user-only form `http://P@host:port` is pinned here
as docs/recordings.md describes it: some clients send it (curl, httpx), `requests` drops a user name without a
password, so its calls land in the proxy's default project. A client that sends no credentials at all
(the JVM) reaches a project through the `x-semula-project` header or a proxy started with `--project P`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from conftest import ProxyFactory
from e2e_helpers import ProxyHandle, clean_env, curl, read_call_log, uniq, wait_for_rows

pytestmark = pytest.mark.e2e

CHAT_URL = "https://api.openai.com/v1/chat/completions"
PY_CLIENT = """
import json, sys, {lib}
r = {lib}.post({url!r}, timeout=30, headers={{"authorization": "Bearer sk-test-project", **json.loads(sys.argv[2])}},
               json={{"model": "gpt-4o-mini", "messages": [{{"role": "user", "content": sys.argv[1]}}]}})
print(r.status_code, r.headers.get("x-semula-decision"))
"""


def body(prompt: str) -> dict[str, object]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}


def call_with(client: str, proxy: ProxyHandle, proxy_url: str, prompt: str, headers: dict[str, str]) -> None:
    """One chat call by `client`, which finds the proxy in HTTPS_PROXY like it would in a shell."""
    if client == "curl":
        res = curl(CHAT_URL, proxy_url=proxy_url, ca_path=proxy.ca_path, data=body(prompt),
                   headers=[f"{k}: {v}" for k, v in headers.items()] + ["authorization: Bearer sk-test-project"])
        assert res.status == 200, res
        return
    env = clean_env(HTTPS_PROXY=proxy_url, SSL_CERT_FILE=str(proxy.ca_path), REQUESTS_CA_BUNDLE=str(proxy.ca_path))
    run = subprocess.run([sys.executable, "-c", PY_CLIENT.format(lib=client, url=CHAT_URL), prompt,
                          json.dumps(headers)], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("200 "), run.stderr


def landed_in(proxy: ProxyHandle, call: Callable[[], None]) -> str:
    """The project of the one call `call` makes (the call log's newest row)."""
    before = len(read_call_log(proxy.data_dir))
    call()
    rows = wait_for_rows(proxy.data_dir, lambda r: True, at_least=before + 1)
    assert len(rows) == before + 1, rows
    return rows[-1]["project"]


@pytest.fixture(scope="module")
def auto(module_proxy_factory: ProxyFactory) -> ProxyHandle:
    return module_proxy_factory("auto", module_proxy_factory.new_data_dir("project-url"))


@pytest.mark.parametrize("client", ["curl", "requests", "httpx"])
def test_user_and_password_form_reaches_the_project_from_every_client(auto: ProxyHandle, client: str) -> None:
    url = f"http://alpha:semula@127.0.0.1:{auto.port}"
    assert landed_in(auto, lambda: call_with(client, auto, url, uniq(client), {})) == "alpha"


@pytest.mark.parametrize(("client", "project"), [("curl", "alpha"), ("httpx", "alpha"), ("requests", "default")])
def test_user_only_form_is_dropped_by_some_clients(auto: ProxyHandle, client: str, project: str) -> None:
    """As docs/recordings.md says: `http://P@host` is not enough for requests (and Node's undici)."""
    url = f"http://alpha@127.0.0.1:{auto.port}"
    assert landed_in(auto, lambda: call_with(client, auto, url, uniq(client), {})) == project


@pytest.mark.parametrize("client", ["curl", "requests"])
def test_the_header_reaches_the_project_without_proxy_credentials(auto: ProxyHandle, client: str) -> None:
    call = lambda: call_with(client, auto, auto.proxy_url, uniq(client), {"x-semula-project": "beta"})  # noqa: E731
    assert landed_in(auto, call) == "beta"


def test_a_proxy_started_with_project_is_that_projects_proxy(proxy_factory: ProxyFactory) -> None:
    """One proxy per project, for clients that can send neither credentials nor a header."""
    proxy = proxy_factory("auto", project="gamma")
    assert landed_in(proxy, lambda: call_with("curl", proxy, proxy.proxy_url, uniq("per-project"), {})) == "gamma"
    url = f"http://alpha:semula@127.0.0.1:{proxy.port}"
    assert landed_in(proxy, lambda: call_with("curl", proxy, url, uniq("user wins"), {})) == "alpha"
