"""The replay refusals of this proxy, numbered, for the pytest plugin to fail the test that made them.

A refusal is noted in the `request` hook, before mitmproxy sends the 404: once a client has its
answer, asking `refusals.since` for the numbers after the last one seen finds it — no race with the
call log's writer. Each refusal keeps the calls' tag (a proxy password `semula-…`), so pytest-xdist
workers sharing one proxy each find their own. In memory only, the newest few hundred.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

KEEP = 500
TAG_PREFIX = "semula-"


def tag_of(password: str | None) -> str:
    """The run tag a proxy password carries (`semula-gw0` → `gw0`); any other password tags nothing."""
    return password[len(TAG_PREFIX):] if password and password.startswith(TAG_PREFIX) else ""


class Refusals:
    # The admin endpoint's method: {"after": number or None, "tag": str or None, "untagged": bool}. A tag
    # also finds its workers' (`<tag>.gw0`); `untagged` adds the calls that carried no tag.
    METHOD = "refusals.since"

    def __init__(self, keep: int = KEEP) -> None:
        self._lock = threading.Lock()
        self._last = 0
        self._recent: deque[dict[str, Any]] = deque(maxlen=keep)

    def add(self, tag: str, project: str, message: str, test: str = "") -> None:
        """`test`: the test current for the tag when the call came (proxy/run/scopes.py); "" for none."""
        with self._lock:
            self._last += 1
            self._recent.append({"seq": self._last, "tag": tag, "project": project, "message": message,
                                 "test": test or None})

    def since(self, after: int | None, tag: str | None = None, untagged: bool = False) -> dict[str, Any]:
        """The refusals numbered after `after` (None: none, only the last number), of one tag (and its
        workers') if given."""
        def wanted(r: dict[str, Any]) -> bool:
            return (tag is None or r["tag"] == tag or r["tag"].startswith(f"{tag}.")
                    or (untagged and not r["tag"]))

        with self._lock:
            found = [] if after is None else [r for r in self._recent if r["seq"] > after and wanted(r)]
            return {"last": self._last, "refusals": found}

    def answer(self, params: dict[str, Any]) -> dict[str, Any]:
        after = params.get("after")
        return self.since(None if after is None else int(after), params.get("tag") or None,
                          bool(params.get("untagged")))
