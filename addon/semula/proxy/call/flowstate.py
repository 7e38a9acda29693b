"""What the addon knows about one intercepted provider call, between mitmproxy's hooks.

Written by: the hooks (who is calling, at `requestheaders`), the call (`proxy/call/call.py`: the decision
and what it learnt on the way), the fast path (`fast_key`) and the recorder (`proxy/call/recorder.py`: the
streamed answer, why it was not whole or not recorded). A served recording is read from
`outcome.answer`, not copied here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime

from mitmproxy import http

from semula.core.request.canonical import CanonicalRequest
from semula.core.cascade import NearSearch, Outcome
from semula.core.decision import Decision
from semula.core.fasthit import FastHit, FastKey
from semula.core.settings import ProjectSettings
from semula.providers.base import Adapter, RawRequest
from semula.providers.mcp import McpServer


@dataclass
class FlowState:
    host: str
    project: str
    no_cache: bool
    path: str = ""
    started_at: datetime | None = None
    adapter: Adapter | None = None
    canonical: CanonicalRequest | None = None
    settings: ProjectSettings = field(default_factory=ProjectSettings)
    outcome: Outcome | None = None  # the cascade's decision and fingerprints
    decision_ms: float | None = None
    upstream_started: float | None = None
    streamed: bool = False
    chunks: list[bytes] = field(default_factory=list)
    error: str | None = None
    cut: bool = False  # the answer broke off: the client did not get it whole
    pending_key: tuple[str, str] | None = None
    run: str = ""  # the x-semula-run header: the run whose repeats are counted (sequence mode)
    tag: str = ""  # the proxy password's run tag (proxy/run/refusals.py)
    test: str = ""  # the test current for the tag, or the x-semula-scope header (proxy/run/scopes.py)
    fast_key: FastKey | None = None  # set when the raw-request fast path may serve this request
    fast: FastHit | None = None  # set when it did (then `canonical` is None: nothing was parsed)
    # what the call log names when no request is parsed (a Realtime conversation: `proxy/realtime/hooks.py`)
    provider: str | None = None
    model: str | None = None
    # auto mode: the review queue's write for this miss, left to run while the call is forwarded
    queueing: asyncio.Future[NearSearch | None] | None = None
    mcp: McpServer | None = None  # the MCP server it goes to (semula_mcp_servers; proxy/call/mcp.py)

    @property
    def decision(self) -> Decision | None:
        return self.outcome.decision if self.outcome else None

    @property
    def request_fp(self) -> str | None:
        return self.outcome.request_fp if self.outcome else None

    @property
    def normalised_fp(self) -> str | None:
        return self.outcome.normalised_fp if self.outcome else None


def raw_request(request: http.Request, state: FlowState, body: bytes) -> RawRequest:
    """The request as the adapters read it: the host the client asked for, the path without its query."""
    return RawRequest(
        method=request.method.upper(), host=state.host, path=state.path,
        query=tuple((k, v) for k, v in request.query.fields),
        headers=header_dict(request.headers), body=body,
    )


def header_dict(headers: http.Headers) -> dict[str, str]:
    """`{k.lower(): v for k, v in headers.items()}` in one pass over the raw fields (`items()` looks each
    name up again): repeated names folded with ", " as mitmproxy folds them."""
    folded: dict[bytes, tuple[bytes, list[bytes]]] = {}
    for name, value in headers.fields:
        key = name.lower()
        if key in folded:
            folded[key][1].append(value)
        else:
            folded[key] = (name, [value])
    return {name.decode("utf-8", "surrogateescape").lower(): b", ".join(values).decode("utf-8", "surrogateescape")
            for name, values in folded.values()}
