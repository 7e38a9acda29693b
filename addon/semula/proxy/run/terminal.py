"""Nothing that reaches the terminal can drive it.

Project names, paths and errors come from clients: every control character, bidi override and lone
surrogate is written as its escape, in the call lines (`proxy/call/console.py`) and in semula's log messages alike.
"""

from __future__ import annotations

import logging
import re

# Control characters (newlines forge lines, ESC drives the terminal), bidi overrides and lone
# surrogates (a raw header byte) never reach the terminal as they are.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def terminal_safe(text: str) -> str:
    """`text` with every unsafe character written as its Python escape (`\\n`, `\\x1b`, `\\udcff`)."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class TerminalSafeLog(logging.Filter):
    """Escapes semula's log messages (they can quote a project name or a path) like console lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        safe = terminal_safe(message)
        if safe != message:
            record.msg, record.args = safe, None
        return True


TERMINAL_SAFE_LOG = TerminalSafeLog()
