"""The page `semula review web` hands the browser: a private file that redirects to the tokened URL.

A command line is readable by every local user (`ps`), and the URL holds the token, so the browser is
started with this file's path instead. The file lives in a private folder (0700, mkdtemp) whose name
carries the server's pid: the folder goes once the page has reached the server with the token (the
browser has it in its tab), when the server stops, or, if the server was killed, at the next start
(`sweep`: folders of this user whose pid is gone).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from semula.admin.protocol import pid_alive

PREFIX = "semula-review-"
_OWNED = re.compile(rf"{re.escape(PREFIX)}(\d+)-[^/]+")


class LaunchPage:
    """`page` redirects to the URL; `remove` (idempotent, any thread) deletes it and its folder."""

    def __init__(self, url: str, temp_dir: str | None = None) -> None:
        sweep(temp_dir)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=temp_dir))
        self.page = self.folder / "open.html"
        self.page.touch(mode=0o600)
        script = json.dumps(url).replace("<", "\\u003c")  # no `</script>` inside the script, whatever the URL
        self.page.write_text('<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
                             f"<title>semula review</title><script>location.replace({script})</script>"
                             f'<p><a href="{html.escape(url)}">open semula review</a></p>\n', encoding="utf-8")
        self._lock = threading.Lock()

    def remove(self) -> None:
        with self._lock:
            shutil.rmtree(self.folder, ignore_errors=True)


def sweep(temp_dir: str | None = None) -> list[Path]:
    """Remove the launch folders this user's killed servers left behind; the removed ones."""
    root = Path(temp_dir or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        owned = _OWNED.fullmatch(entry.name)
        if owned is None or int(owned[1]) == os.getpid() or pid_alive(int(owned[1])):
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        if st.st_uid == os.getuid() and stat.S_ISDIR(st.st_mode):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
