"""What a proxy leaves unloaded until it is used (`semula.proxy.run.lean`) still works through a real proxy:
mitmproxy's onboarding page at http://mitm.it, built on its first request, serves the proxy's own CA to curl,
and its index page renders from mitmproxy's templates."""

from __future__ import annotations

import subprocess

import pytest

from conftest import ProxyFactory

pytestmark = pytest.mark.e2e


def test_the_onboarding_page_serves_the_proxys_ca(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory("replay")
    pem = subprocess.run(["curl", "-sS", "--max-time", "20", "-x", proxy.proxy_url, "http://mitm.it/cert/pem"],
                         capture_output=True, text=True, timeout=30)
    assert pem.returncode == 0, (pem.stderr, proxy.describe())
    assert pem.stdout == proxy.ca_path.read_text(), proxy.describe()
    index = subprocess.run(["curl", "-sS", "--max-time", "20", "-x", proxy.proxy_url, "http://mitm.it/"],
                           capture_output=True, text=True, timeout=30)
    assert index.returncode == 0 and "mitmproxy" in index.stdout and "/cert/pem" in index.stdout, \
        (index.stdout[:500], index.stderr, proxy.describe())
    assert "Traceback" not in proxy.output() and "Addon error" not in proxy.output(), proxy.describe()
