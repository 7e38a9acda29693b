"""Which provider answers are recorded: successes, and the errors the request itself caused.

A 400 (an unsupported role, temperature -1), a 404 (an unknown model) or a 422 is a property of
the request: sent again, it gets the same answer, and a test that checks the provider's error must
see it offline too. So these are recorded by default and replay as they came. A 401 or 403 is a
property of the key, a 408 or 429 of the moment and a 5xx of the provider's health: recording one
would replay an outage forever, so they are recorded only under `semula_record_errors=true`, which
records every answer. Other statuses (405, 409, 413, …) are not errors a request reliably gets again
either: they too wait for `semula_record_errors`.

Redirects: a 301, 302, 303, 307 or 308 with a `Location` is an answer the request itself gets (a media
host sending a download to its CDN, an API moved to a new path), and the client follows it; so it is
recorded by default and replays as it came, and the request the client then sends to the `Location` is
a call of its own (recorded too when its host is intercepted). Replayed, the recorded `Location` comes
back unchanged, so the follow-up matches its own recording even when the live server hands out a new
signed URL each time. A presigned `Location` is recorded without its secrets (`core/redact.py redact_url`: the
signature, credential and token parameters become `[REDACTED]`, the userinfo goes), so the follow-up replays from
its own recording when its host is intercepted (an extra host), and fails at the live host otherwise: name the
download host with `--extra-host` to record it. Without a `Location` there is nothing to follow: not recorded by default. A 304
Not Modified is never recorded by default: it answers the client's cache validators (`If-None-Match`,
`If-Modified-Since`), which are not part of what a recording is keyed by, so served to a client without
that cache it would leave it with no body at all. 300 (a list of choices) and the obsolete 305/306
are not recorded by default either.

One exception: Gemini answers a bad API key with a 400 (`API_KEY_INVALID`), and the key is never part
of the fingerprint, so a 400 or 404 whose body says the key is wrong is treated like a 401: recorded,
it would keep failing after the key is fixed.

An error is judged by its status, whatever its content type: Gemini answers a 400 or 404 to
`streamGenerateContent` with `content-type: text/event-stream` and a plain JSON body, which has no
stream terminal event to look for. Only a success is judged as a stream (complete or cut).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["DETERMINISTIC_ERRORS", "REDIRECTS", "replayed_note", "unrecordable_answer", "unrecordable_status"]

DETERMINISTIC_ERRORS: frozenset[int] = frozenset({400, 404, 422})
REDIRECTS: frozenset[int] = frozenset({301, 302, 303, 307, 308})  # recorded when they say where to (a Location)
# What an error body says when the key, not the request, is at fault (Gemini: 400 API_KEY_INVALID).
_KEY_ERRORS = re.compile(rb"API_KEY_INVALID|API key not valid|\binvalid_api_key\b|\bauthentication_error\b"
                         rb"|Incorrect API key|API key expired")
_SCANNED_BYTES = 64 * 1024  # an error body is small; a big one is not read through


def unrecordable_status(status: int, record_errors: bool, body: bytes = b"", location: str | None = None) -> str | None:
    """Why an answer with this status (and body, and `Location` header) is not recorded, or None when it is."""
    if 200 <= status < 300 or record_errors or (status in REDIRECTS and location):
        return None
    if status in REDIRECTS:
        return (f"not recorded: upstream answered {status} without a Location to follow (a redirect with one is "
                "recorded; --set semula_record_errors=true records every answer)")
    if status == 304:
        return ("not recorded: upstream answered 304 Not Modified, an answer to the client's cache validators "
                "(--set semula_record_errors=true records every answer)")
    if status in DETERMINISTIC_ERRORS:
        if not _KEY_ERRORS.search(body[:_SCANNED_BYTES]):
            return None
        return (f"not recorded: upstream answered {status} about the API key (a property of the key, like a "
                "401; --set semula_record_errors=true records every answer)")
    return (f"not recorded: upstream answered {status} (recorded by default: 2xx, redirects with a Location, and "
            "400/404/422 errors; --set semula_record_errors=true records every answer)")


def unrecordable_answer(status: int, record_errors: bool, body: bytes, streamed: bool,
                        stream_complete: Callable[[], bool], location: str | None = None) -> str | None:
    """Why this answer is not recorded, or None: the status policy, then, for a streamed success only,
    whether the stream reached its terminal event (`stream_complete`, asked only then)."""
    if why_not := unrecordable_status(status, record_errors, body, location):
        return why_not
    if streamed and 200 <= status < 300 and not stream_complete():
        return "not recorded: the stream ended without its terminal event"
    return None


def replayed_note(status: int) -> str | None:
    """What the call log and the console say when a served recording is an error answer."""
    return f"replayed a recorded {status} answer" if status >= 400 else None
