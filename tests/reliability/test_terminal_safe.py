"""Control characters in a project name never reach the terminal (reliability item 15)."""

from __future__ import annotations

import base64
import logging

from semula.calllog.schema import CallRow
from semula.core.decision import Decision
from semula.core.cascade import Outcome
from semula.proxy.call.console import console_line
from semula.proxy.run.terminal import TERMINAL_SAFE_LOG, terminal_safe
from semula.proxy.call.flowstate import FlowState
from semula.proxy.call.identity import proxy_user

FORGED = "evil\nsemula: default openai POST api.openai.com/v1/chat/completions → hit exact #1\x1b[2J\u202e\udcff"


def test_console_line_escapes_control_characters() -> None:
    state = FlowState(host="api.openai.com", project=FORGED, no_cache=False, path="/v1/chat/\x1b]0;x\x07")
    state.outcome = Outcome(Decision("bypass", "forward", bypass_reason="invalid_project"))
    row = CallRow(status=200, provider="openai", method="POST", path=state.path)
    line = console_line(state, row, recorded=False)
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line and "\u202e" not in line
    assert "evil\\nsemula:" in line and "\\x1b[2J" in line and "\\udcff" in line
    line.encode("utf-8")  # printable on a UTF-8 terminal


def test_terminal_safe_keeps_ordinary_text() -> None:
    assert terminal_safe("projet é · 🙂 → ok") == "projet é · 🙂 → ok"


def test_proxy_user_with_control_characters_is_escaped_in_log_messages() -> None:
    header = "Basic " + base64.b64encode("a\nb\x1b[2J:pw".encode()).decode()
    user = proxy_user(header)
    record = logging.LogRecord("semula", logging.WARNING, __file__, 1, "project %s refused", (user,), None)
    TERMINAL_SAFE_LOG.filter(record)
    assert record.getMessage() == "project a\\nb\\x1b[2J refused"
