"""A recorded answer as the mitmproxy response a hit sends.

What does not change between hits (the encoded headers, the content length) is prepared once per
loaded entry (`Entry.wire_headers`); a hit adds its `x-semula-*` headers, encoded once per distinct
decision, and builds the response without re-encoding or re-measuring the body.
"""

from __future__ import annotations

import time

from mitmproxy import http
from mitmproxy.net.http.status_codes import RESPONSES

from semula.core.decision import Decision
from semula.proxy.call.headers import wire_semula_headers
from semula.store.types import Entry


def answer_response(entry: Entry, decision: Decision) -> http.Response:
    """What `Response.make(entry.status, entry.body, headers)` builds, without its per-call work."""
    semula = wire_semula_headers(decision)
    prepared = entry.wire_headers
    if prepared is None:  # the body's framing is mitmproxy's business: let it encode and measure
        headers = [(k.encode(), v.encode()) for k, v in entry.sendable_headers]
        return http.Response.make(entry.status, entry.body, http.Headers((*headers, *semula)))
    now = time.time()
    return http.Response(b"HTTP/1.1", entry.status, RESPONSES.get(entry.status, "").encode(),
                         http.Headers((*prepared, *semula)), entry.body, None, now, now)
