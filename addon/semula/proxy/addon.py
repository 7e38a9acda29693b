"""The mitmproxy addon: the thin edge between mitmproxy's hooks and semula's core.

Hooks only. Hooks run in mitmproxy's asyncio loop. Each call is decided once by
`core.cascade.cascade()` (the same function `semula eval` runs) and answered in `proxy/call/call.py`;
a forwarded answer is recorded in `proxy/call/recorder.py`; the parts they share (mode, settings, store
thread, fast path, logs) are one `ProxyParts`, which the commands and Realtime read too. Hits are
dictionary lookups on the loop, everything that touches the store runs on the store thread
(`StoreThread`), and the call log is written by a background thread. Whatever goes wrong with the
store, the addon fails open.
"""

from __future__ import annotations

import logging
import sys
from functools import lru_cache
from typing import Any

from mitmproxy import ctx, http
from mitmproxy.net.http import url

from semula.core.redact import redact_text
from semula.providers import host_matches
from semula.providers.mcp import mcp_server_for
from semula.proxy.run import options
from semula.proxy.call.call import Responder
from semula.proxy.call.caller import caller_of
from semula.proxy.commands import SemulaCommands
from semula.proxy.call.flowstate import FlowState
from semula.proxy.call.identity import proxy_credentials
from semula.proxy.run.lifecycle import Lifecycle
from semula.proxy.run.malloc import limit_arenas, start_trimming
from semula.proxy.call.parts import ProxyParts
from semula.proxy.realtime.hooks import Realtime, is_upgrade as is_realtime_upgrade
from semula.proxy.call.recorder import Recorder
from semula.proxy.run.refusals import tag_of

log = logging.getLogger("semula")

# How long a thread holds the GIL while another waits for it (Python's default: 5 ms). The event loop,
# the store thread, the near-search readers and the embedder take turns; at 5 ms an embedding beside one
# busy thread took 23 ms instead of 12 (1 ms: 16; benchmark/results/embedding.md).
GIL_SWITCH_SECONDS = 0.001


class SemulaAddon:
    """mitmproxy's hooks for provider calls; the work is in its parts: `responder` decides and answers,
    `recorder` records, `realtime` relays WebSocket conversations, all over `parts`; `commands` (semula.*) is
    an addon of its own. Realtime's hooks are called from here, and only for its own flows: as a child addon,
    mitmproxy dispatched four of its hooks on every flow (a hit cost ~0.1 ms more CPU, the replay benchmark)."""

    def __init__(self) -> None:
        # The lifecycle's admin endpoint runs the commands' operations; the commands read the parts.
        life = Lifecycle(lambda method, params: self.commands.dispatch(method, params))
        self.parts = parts = ProxyParts(life)
        self.commands = SemulaCommands(parts)
        self.responder, self.recorder = Responder(parts), Recorder(parts)
        self.realtime = Realtime(parts)
        self.addons = [self.commands]  # mitmproxy collects the semula.* commands
        self.life = life
        self.flows: dict[str, FlowState] = {}  # the calls between their hooks, by flow id

    def load(self, loader: Any) -> None:
        limit_arenas()  # before the store's threads start
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
        start_trimming()
        options.declare(loader)

    def configure(self, updated: set[str]) -> None:
        if not any(name.startswith("semula_") or name in options.MITMPROXY_OPTIONS for name in updated):
            return
        mode, settings = options.read(ctx.options)
        if self.life.started is not None:  # running: what it opened at start-up stays (`RESTART_OPTIONS`)
            options.refuse_restart_changes(self.life.started, settings)
            self.life.store.load_wait = settings.load_timeout
        self.parts.mode, self.parts.settings = mode, settings

    async def running(self) -> None:
        await self.life.running(self.parts.mode, self.parts.settings)

    def done(self) -> None:
        self.parts.lines.flush()
        self.life.done()
        self.realtime.done()

    # --- hooks -----------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        # Only the CONNECT carries Proxy-Authorization; its user name names the project of
        # every flow on this client connection. mitmproxy's proxyauth stays off (it would 407).
        user, password = proxy_credentials(flow.request.headers.get("proxy-authorization"))
        if user:
            self.parts.conn_projects[flow.client_conn.id] = user
        if tag := tag_of(password):
            self.parts.conn_tags[flow.client_conn.id] = tag

    def client_disconnected(self, client: Any) -> None:
        self.parts.conn_projects.pop(client.id, None)
        self.parts.conn_tags.pop(client.id, None)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        # The host the client asked for, noted before map_remote rewrites the URL.
        host = _host_of(flow.request)
        parts = self.parts
        if not _intercepted(host, parts.settings.hosts):
            _pass_through(flow)
            return
        if is_realtime_upgrade(flow.request):
            self.realtime.requestheaders(flow)
            return
        caller = caller_of(flow, parts.conn_projects, parts.conn_tags, parts.tests,
                           parts.settings.default_project)
        test = caller.test
        self.flows[flow.id] = FlowState(host=host, project=caller.project, no_cache=caller.no_cache,
                                        path=flow.request.path.split("?", 1)[0], run=test.run, tag=caller.tag,
                                        test=test.test,
                                        mcp=mcp_server_for(parts.settings.mcp_servers, host, flow.request.port,
                                                           flow.request.path.split("?", 1)[0]))

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.id in self.realtime.live:
            await self.realtime.request(flow)
            return
        state = self.flows.get(flow.id)
        if state is None or flow.response is not None:
            self.flows.pop(flow.id, None)  # answered before us (another addon): nothing to log
            return
        await self.responder.request(flow, state)
        if state.decision is None or state.decision.action != "forward":
            self.flows.pop(flow.id, None)  # served or refused: finished and logged

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get(PASSING):
            if flow.response is not None and flow.response.status_code != 101:  # a WebSocket's own layer relays it
                flow.response.stream = True
            return
        state = self.flows.get(flow.id)
        if state is None or state.decision is None or flow.response is None or state.decision.action == "serve":
            return
        self.recorder.responseheaders(flow, state)

    async def response(self, flow: http.HTTPFlow) -> None:
        if flow.id in self.realtime.live:
            self.realtime.response(flow)
            return
        state = self.flows.get(flow.id)
        if state is None or state.decision is None or state.decision.action != "forward" or flow.response is None:
            return
        self.flows.pop(flow.id, None)
        await self.recorder.complete(flow, state)

    async def error(self, flow: http.HTTPFlow) -> None:
        if flow.id in self.realtime.live:
            self.realtime.error(flow)
            return
        state = self.flows.pop(flow.id, None)
        if state is None or state.decision is None:
            return  # the client hung up before its request was whole (or decided): forget the flow
        message = redact_text(str(flow.error)) if flow.error else "connection error"
        if state.streamed and flow.response is not None and state.decision.action == "forward":
            # The sync openai SDK closes the response at `data: [DONE]`, before the body's last
            # chunk: a stream that delivered its terminal event is still a complete answer.
            await self.recorder.complete(flow, state, client_gone=message)
        else:
            self.recorder.failed(flow, state, message)

    # A WebSocket's messages: only Realtime's conversations are semula's (the others are relayed as they come).

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        self.realtime.websocket_start(flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        self.realtime.websocket_message(flow)

    async def websocket_end(self, flow: http.HTTPFlow) -> None:
        await self.realtime.websocket_end(flow)


PASSING = "semula: not intercepted"  # a flow's metadata: a host semula does not intercept, relayed as it comes
BIG_UPLOAD_BYTES = 1024 * 1024


def _pass_through(flow: http.HTTPFlow) -> None:
    """A host semula does not intercept (plain HTTP, or any HTTPS host with semula_intercept_all): its answer,
    and an upload over 1 MB, are streamed, never held whole in the proxy's memory."""
    flow.metadata[PASSING] = True
    headers = flow.request.headers
    length = headers.get("content-length", "")
    if "chunked" in headers.get("transfer-encoding", "").lower() or (
            length.isdigit() and int(length) > BIG_UPLOAD_BYTES):
        flow.request.stream = True


def _host_of(request: http.Request) -> str:
    """`request.pretty_host`, lower-cased: its authority parsed once per distinct value (mitmproxy decodes
    IDNA each time: ~1.4 % of a replayed hit's CPU)."""
    authority = request.host_header
    return _authority_host(authority) if authority else request.host.lower()


@lru_cache(maxsize=1024)
def _authority_host(authority: str) -> str:
    return url.parse_authority(authority, check=False)[0].lower()


@lru_cache(maxsize=1024)
def _intercepted(host: str, hosts: tuple[str, ...]) -> bool:
    return host_matches(host, hosts)
