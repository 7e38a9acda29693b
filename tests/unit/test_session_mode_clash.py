"""Asking for another mode than the proxy already running on the data dir: the message reads as English
("a proxy in auto mode", not "a auto proxy") and names the running proxy."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from semula.admin.protocol import ADMIN_FILE
from semula.session.run import SessionError, open_session


def test_a_running_proxy_in_another_mode_is_named_in_plain_words(tmp_path: Path) -> None:
    admin = tmp_path / ADMIN_FILE
    admin.write_text(json.dumps({"pid": os.getpid(), "mode": "auto", "proxy": "http://127.0.0.1:1",
                                 "admin": "http://127.0.0.1:2", "token": "t"}))
    admin.chmod(0o600)
    with pytest.raises(SessionError) as raised:
        open_session("replay", "127.0.0.1", 0, tmp_path, "default", (), 5.0, lambda line: None)
    message = str(raised.value)
    assert f"a proxy in auto mode (pid {os.getpid()}" in message, message
    assert "a auto" not in message
