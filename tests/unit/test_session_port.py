"""exec and the plugin with no port given: the proxy binds port 0 and its ready line names the port."""

from __future__ import annotations

import pytest

from semula.session.run import ready_port


@pytest.mark.parametrize(("line", "port"), [
    ("semula ready: http://127.0.0.1:52183 · mode replay · data dir /tmp/d · CA /c/mitmproxy-ca-cert.pem", 52183),
    ("semula ready: http://[::1]:8081 · mode record · data dir /tmp/d", 8081),
    ("semula ready: http://0.0.0.0:9 · mode auto", 9),
    ("semula ready: http://127.0.0.1 · mode auto", None),
    ("semula ready: http://127.0.0.1:99999999 · mode auto", None),
    ("semula ready", None),
    ("semula: recordings /tmp/r: 0 loaded", None),
])
def test_the_port_comes_from_the_ready_line(line: str, port: int | None) -> None:
    assert ready_port(line) == port
