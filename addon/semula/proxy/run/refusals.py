"""The replay refusals of this proxy, numbered, for the pytest plugin to fail the test that made them.

A refusal is noted in the `request` hook, before mitmproxy sends the 404: once a client has its
answer, asking `refusals.since` for the numbers after the last one seen finds it — no race with the
call log's writer. Each refusal keeps the calls' tag (a proxy password `semula-…`), so pytest-xdist
workers sharing one proxy each find their own. In memory only, the newest few hundred.

The number of the last one is also kept in a file beside admin.json (`publish`), rewritten in place
before the 404 goes out: after each test's call the plugin reads it (no round trip) and asks only when
it changed. The question at each test's end is always asked, so a refusal the file missed still fails
its test.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

log = logging.getLogger("semula")

KEEP = 500
TAG_PREFIX = "semula-"
SEQ_FILE = "refusals.seq"  # beside admin.json: the last refusal's number, in SEQ_DIGITS digits
SEQ_DIGITS = 20


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
        self._seq: tuple[int, Path] | None = None  # the published file: its descriptor and path

    def publish(self, directory: Path) -> dict[str, str]:
        """Keep the last refusal's number in `directory`/refusals.seq; what admin.json says of it ({}: not kept,
        and the plugin asks after every test)."""
        path = directory / SEQ_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            log.warning("semula: cannot keep %s (%s); the pytest plugin asks for refusals after every test", path, e)
            return {}
        with self._lock:
            self._seq = (fd, path)
            self._write_seq()
        return {"refusals_file": str(path)} if self._seq is not None else {}

    def _write_seq(self) -> None:
        """(Under the lock.) A failed write removes the file: a plugin that cannot read it asks every time."""
        assert self._seq is not None
        fd, path = self._seq
        try:
            os.pwrite(fd, str(self._last).zfill(SEQ_DIGITS).encode(), 0)
        except OSError as e:
            log.warning("semula: cannot update %s (%s); the pytest plugin asks for refusals after every test",
                        path, e)
            self._close_seq()

    def _close_seq(self) -> None:
        if self._seq is not None:
            fd, path = self._seq
            self._seq = None
            try:
                path.unlink()
            except OSError:
                pass
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            self._close_seq()

    def add(self, tag: str, project: str, message: str, test: str = "") -> None:
        """`test`: the test current for the tag when the call came (proxy/run/scopes.py); "" for none."""
        with self._lock:
            self._last += 1
            self._recent.append({"seq": self._last, "tag": tag, "project": project, "message": message,
                                 "test": test or None})
            if self._seq is not None:
                self._write_seq()

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
