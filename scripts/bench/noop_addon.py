"""A no-op replay addon for mitmdump: the ceiling for an addon that answers from memory.

Used by scripts/bench/replay.py. It loads a pickle (path in $SEMULA_BENCH_ANSWERS) mapping
request body bytes -> (status, [(header, value), ...], body bytes) and, in the `request`
hook, answers each request with the stored response: one dict lookup and one
`Response.make`. No parsing, no fingerprinting, no logging. A body it does not know gets a
404 from the proxy itself (nothing ever goes upstream).

    SEMULA_BENCH_ANSWERS=answers.pickle mitmdump -s scripts/bench/noop_addon.py ...
"""

from __future__ import annotations

import os
import pickle

from mitmproxy import http


class NoopReplay:
    def __init__(self) -> None:
        with open(os.environ["SEMULA_BENCH_ANSWERS"], "rb") as f:
            raw: dict[bytes, tuple[int, list[tuple[str, str]], bytes]] = pickle.load(f)
        self.answers = {
            body: (status, content, tuple((k.encode(), v.encode()) for k, v in headers))
            for body, (status, headers, content) in raw.items()
        }

    def request(self, flow: http.HTTPFlow) -> None:
        answer = self.answers.get(flow.request.get_content(strict=False) or b"")
        if answer is None:
            flow.response = http.Response.make(404, b"not in the no-op answer table")
            return
        status, content, headers = answer
        flow.response = http.Response.make(status, content, http.Headers(list(headers)))


addons = [NoopReplay()]
