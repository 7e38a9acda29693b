"""The callers' side of the admin endpoint: one call on a fresh connection (`call`, the CLI), or many on
one kept-alive connection (`AdminClient`, the pytest plugin)."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from semula.admin.protocol import AdminError, NoProxy, dumps, read_admin_info, result_of


def call(data_dir: Path | str, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0,
         info: dict[str, Any] | None = None) -> Any:
    """Run one admin method; `info`: the admin.json already read (a caller that asks often)."""
    info = info or read_admin_info(data_dir)
    if info is None:
        raise NoProxy(str(data_dir))
    request = urllib.request.Request(
        f"http://127.0.0.1:{info['port']}/rpc",
        data=dumps({"method": method, "params": params or {}}),
        headers={"authorization": f"Bearer {info['token']}", "content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
    except urllib.error.HTTPError as e:
        raise AdminError(f"the proxy's admin endpoint refused the call: HTTP {e.code}") from e
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        raise NoProxy(f"{data_dir}: admin endpoint not answering ({e})") from e
    return result_of(payload)


class AdminClient:
    """One kept-alive connection to a proxy's admin endpoint, for a caller that asks often.

    Only for idempotent methods (which test runs, refusals since N): a call on a reused connection
    that the proxy closed while idle is sent once more on a fresh one."""

    def __init__(self, data_dir: Path | str, info: dict[str, Any], timeout: float = 10.0) -> None:
        self.data_dir, self.info, self.timeout = data_dir, info, timeout
        self._connection: http.client.HTTPConnection | None = None

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        body = dumps({"method": method, "params": params or {}})
        headers = {"authorization": f"Bearer {self.info['token']}", "content-type": "application/json"}
        for attempt in (1, 2):
            reused = self._connection is not None
            connection = self._connection or http.client.HTTPConnection("127.0.0.1", self.info["port"],
                                                                          timeout=self.timeout)
            try:
                connection.request("POST", "/rpc", body, headers)
                response = connection.getresponse()
                payload, status = json.loads(response.read()), response.status
            except (OSError, http.client.HTTPException, ValueError) as e:
                connection.close()
                self._connection = None
                if reused and attempt == 1 and not isinstance(e, TimeoutError):
                    continue  # closed while idle: once more, on a new connection
                raise NoProxy(f"{self.data_dir}: admin endpoint not answering ({e})") from e
            self._connection = connection
            if status != 200 and not isinstance(payload, dict):
                raise AdminError(f"the proxy's admin endpoint refused the call: HTTP {status}")
            return result_of(payload)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
