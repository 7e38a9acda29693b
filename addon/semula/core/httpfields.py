"""Whether a header field can be sent: checked when a recording file loads and again just before serving.

A recorded header value with CR or LF in it would give the client a header of the file's choosing
(response splitting over HTTP/1.1, a reset stream over HTTP/2), so no such field is ever sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# RFC 9110 §5.6.2: a header name is a token.
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# A field value holds no control character but HTAB (RFC 9110 §5.5).
_VALUE_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def header_problem(name: Any, value: Any) -> str | None:
    """Why (name, value) cannot be sent as an HTTP header field, or None."""
    if not isinstance(name, str) or not _TOKEN.match(name):
        return f"header name {name!r} is not an HTTP token"
    if not isinstance(value, str):
        return f"header {name} value {value!r} is not text"
    if _VALUE_CONTROL.search(value):
        return f"header {name} value holds a control character (CR, LF or NUL)"
    return None


def servable_headers(headers: Iterable[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """(the headers that can be sent, the problems of those that cannot): checked again just before serving."""
    ok, problems = [], []
    for name, value in headers:
        problem = header_problem(name, value)
        if problem is None:
            ok.append((name, value))
        else:
            problems.append(problem)
    return ok, problems
