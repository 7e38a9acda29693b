"""admin/client: the kept-alive client the pytest plugin uses, against a real in-process admin server."""

from __future__ import annotations

import select
import socket
from pathlib import Path

import pytest

from semula.admin import server as admin_server
from semula.admin.client import AdminClient, call
from semula.admin.protocol import AdminError, NoProxy
from semula.admin.server import AdminServer


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(admin_server, "IDLE_SECONDS", 0.2)  # the server closes an idle connection quickly
    calls: list[str] = []

    def dispatch(method: str, params: dict) -> dict:
        calls.append(method)
        if method == "boom":
            raise ValueError("no such thing")
        return {"method": method, "params": params}

    started = AdminServer(tmp_path, dispatch, {})
    started.calls = calls  # type: ignore[attr-defined]
    yield started
    started.close()


def test_one_connection_serves_many_calls_and_errors_are_named(server: AdminServer, tmp_path: Path) -> None:
    client = AdminClient(tmp_path, server.info)
    for n in range(20):
        assert client.call("tests.enter", {"n": n}) == {"method": "tests.enter", "params": {"n": n}}
    first = client._connection
    assert first is not None and client.call("x") and client._connection is first  # kept, not reopened
    with pytest.raises(AdminError, match="no such thing"):
        client.call("boom")
    assert call(tmp_path, "x", info=server.info) == {"method": "x", "params": {}}  # the one-shot call still works
    client.close()


def test_a_connection_the_proxy_closed_while_idle_is_reopened_once(server: AdminServer, tmp_path: Path) -> None:
    client = AdminClient(tmp_path, server.info)
    client.call("a")
    first = client._connection
    assert first is not None
    readable, _, _ = select.select([first.sock], [], [], 10)  # the server's idle timeout (0.2 s) closes it
    assert readable and first.sock.recv(1, socket.MSG_PEEK) == b""
    assert client.call("b") == {"method": "b", "params": {}} and client._connection is not first
    assert server.calls.count("b") == 1  # type: ignore[attr-defined]
    client.close()


def test_a_wrong_token_or_a_gone_proxy_is_a_clear_error(server: AdminServer, tmp_path: Path) -> None:
    with pytest.raises(AdminError, match="bad admin token"):
        AdminClient(tmp_path, {**server.info, "token": "wrong"}).call("a")
    port = server.port
    server.close()
    with pytest.raises(NoProxy, match="not answering"):
        AdminClient(tmp_path, {"port": port, "token": "t"}).call("a")
