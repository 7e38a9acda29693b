"""The mitmproxy addon: the thin edge between mitmproxy's hooks and semula's core.

Hooks run in mitmproxy's asyncio loop. The decision is `core.cascade.cascade()`, the same
function `semula eval` runs; hits are dictionary lookups on the loop, everything that touches
the store runs on the store thread (`StoreThread`), and the call log is written by a
background thread. Whatever goes wrong with the store, the addon fails open.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import replace
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mitmproxy import command, ctx, exceptions, http

from semula.core.bypass import NO_CACHE_HEADER, no_cache_header
from semula.core.canonical import CanonicalRequest
from semula.core.cascade import Outcome, cascade
from semula.core.decision import Bypass, Decision, decide
from semula.core.explain import miss_message
from semula.core.modes import Mode
from semula.core.redact import FingerprintKey, clean_query, redact_text
from semula.core.settings import AddonSettings, ProjectSettings, SettingsError, validate_project
from semula.engine.operations import run_operation
from semula.recordings.entry import recording_of
from semula.providers import DEFAULT_PROVIDER_HOSTS, adapter_for, host_matches
from semula.providers.base import Adapter, AdapterError, RawRequest, Usage
from semula.providers.sse import split_frames
from semula.proxy import options
from semula.proxy.bodies import BodyTooLarge, decode_capped, decode_partial
from semula.proxy.calllog import call_row, console_line, flow_comment, semula_headers
from semula.proxy.flowstate import FlowState
from semula.proxy.identity import api_key_hash, proxy_user
from semula.proxy.lifecycle import Lifecycle
from semula.proxy.runs import RUN_HEADER, RunCounters
from semula.proxy.storethread import ProxyLookups

log = logging.getLogger("semula")

PROJECT_HEADER = "x-semula-project"
REPLAY_REFUSAL_STATUS = 404  # a 4xx that SDKs do not retry (not 408/409/429)
BIG_BODY_BYTES = 256 * 1024  # larger request bodies are parsed and fingerprinted off the event loop


class SemulaAddon(Lifecycle):
    def __init__(self) -> None:
        super().__init__(AddonSettings(hosts=DEFAULT_PROVIDER_HOSTS))
        self.conn_projects: dict[str, str] = {}
        self.flows: dict[str, FlowState] = {}
        # Recordings in flight, by (project, normalised or exact fp): a streamed answer reaches
        # the client before it is stored, so a repeat sent at once must wait for it.
        self.pending: dict[tuple[str, str], asyncio.Event] = {}
        self.runs = RunCounters()  # semula_repeats=sequence: occurrences of each request per run

    def load(self, loader: Any) -> None:
        options.declare(loader)

    def configure(self, updated: set[str]) -> None:
        if not any(name.startswith("semula_") for name in updated):
            return
        old_dir = self.settings.data_dir
        self.mode, self.settings = options.read(ctx.options)
        if self.is_running and self.settings.data_dir != old_dir:
            log.warning("semula: data dir changed to %s; restart the proxy to move the store and logs",
                        self.settings.data_dir)

    # --- hooks -----------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        # Only the CONNECT carries Proxy-Authorization; its user name names the project of
        # every flow on this client connection. mitmproxy's proxyauth stays off (it would 407).
        if user := proxy_user(flow.request.headers.get("proxy-authorization")):
            self.conn_projects[flow.client_conn.id] = user

    def client_disconnected(self, client: Any) -> None:
        self.conn_projects.pop(client.id, None)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        # The host the client asked for, noted before map_remote rewrites the URL.
        host = flow.request.pretty_host.lower()
        if not host_matches(host, self.settings.hosts):
            return
        headers = flow.request.headers
        user = proxy_user(headers.get("proxy-authorization"))  # plain-HTTP proxying sends it per request
        header_project = headers.get(PROJECT_HEADER)
        no_cache = NO_CACHE_HEADER in headers
        run = headers.get(RUN_HEADER, "")
        for name in ("proxy-authorization", PROJECT_HEADER, NO_CACHE_HEADER, RUN_HEADER):
            if name in headers:
                del headers[name]
        project = self.conn_projects.get(flow.client_conn.id) or user or header_project or self.settings.default_project
        self.flows[flow.id] = FlowState(host=host, project=project, no_cache=no_cache,
                                        path=flow.request.path.split("?", 1)[0], run=run)

    async def request(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or flow.response is not None:
            return
        started = time.perf_counter()
        state.started_at = datetime.now(UTC).replace(tzinfo=None)
        try:
            state.outcome = await self._decide(flow, state)
        except Exception as e:  # a bug of ours must not take the call down with it
            log.error("semula: internal error while deciding (%s: %s); %s", type(e).__name__, e,
                      "refusing the call" if self.mode is Mode.REPLAY else "forwarding the call",
                      exc_info=os.environ.get("SEMULA_DEBUG", "") not in ("", "0"))
            state.error = f"internal error: {type(e).__name__}: {e}"
            state.outcome = replace(state.outcome or _no_outcome(), decision=Decision(
                "error", "refuse" if self.mode is Mode.REPLAY else "forward", reason=state.error))
        decision = state.decision
        assert decision is not None and state.outcome is not None
        if decision.action == "serve" and not await self._serve(flow, state, decision):
            engine = self.store.engine
            state.outcome = replace(state.outcome, decision=decide(
                self.mode, None, None, self.store.problem if engine is None else None))
        if state.decision.action == "refuse":
            await self._refuse(flow, state)
        state.decision_ms = (time.perf_counter() - started) * 1000
        if state.decision.action == "forward":
            state.upstream_started = time.perf_counter()
            if not state.decision.record:  # the identical requests waiting for this one look again now
                self._release(state)
        else:
            self._finish(flow, state)

    async def _decide(self, flow: http.HTTPFlow, state: FlowState) -> Outcome:
        request = flow.request
        body, bypass = await self._request_body(request)
        raw = RawRequest(
            method=request.method.upper(), host=state.host, path=state.path,
            query=tuple((k, v) for k, v in request.query.fields),
            headers={k.lower(): v for k, v in request.headers.items()}, body=body,
        )
        adapter = state.adapter = adapter_for(raw.host, raw.path)
        if state.no_cache:
            bypass = no_cache_header({NO_CACHE_HEADER: "1"})
        try:
            validate_project(state.project)
        except SettingsError as e:
            bypass = bypass or Bypass("invalid_project", str(e))
        if self.settings.namespace_by_key and (key_hash := api_key_hash(raw)):
            state.project = f"{state.project}.k{key_hash}"
        offload = _off_the_loop if len(raw.body) > BIG_BODY_BYTES else None  # a multi-megabyte prompt
        if self.mode is not Mode.PASSTHROUGH:
            await self.store.ensure_open()  # first: the store's salt keys the secrets in the fingerprints
        engine = self.store.engine
        if bypass is None and self.mode is not Mode.PASSTHROUGH:
            key = self.store.fingerprint_key
            raw = replace(raw, path=redact_text(raw.path, key))  # a key in the path: /v1/sk-…/chat
            try:
                state.canonical = (await offload(_canonicalise, adapter, raw, key) if offload
                                   else _canonicalise(adapter, raw, key))
            except AdapterError as e:
                bypass = Bypass("unparsable_body", f"cannot match this request: {e}")
        state.settings = engine.settings_for(state.project) if engine else ProjectSettings()
        lookups = (ProxyLookups(engine, self.store, self.pending, defer_embedding=self.mode is Mode.AUTO)
                   if engine is not None else None)
        try:
            return await cascade(self.mode, state.project, state.canonical, state.settings, lookups,
                                 bypass=bypass, store_problem=self.store.problem, offload=offload,
                                 repeats=self.runs.repeats(self.settings, state.run, state.project))
        finally:
            state.pending_key = lookups.claimed if lookups is not None else None

    async def _request_body(self, request: http.Request) -> tuple[bytes, Bypass | None]:
        """The decoded body, inflated off the loop and at most `semula_max_body_mb` (a gzip bomb is
        not matched: forwarded untouched, refused in replay)."""
        raw = request.raw_content or b""
        encoding = request.headers.get("content-encoding", "")
        cap = int(self.settings.max_body_mb * 2**20)
        if not encoding.strip() and len(raw) <= cap:
            return raw, None
        try:
            return await _off_the_loop(decode_capped, raw, encoding, cap), None
        except BodyTooLarge as e:
            return b"", Bypass("body_too_large", str(e))
        except ValueError:
            return raw, None  # as before: an undecodable body is matched as sent

    async def _serve(self, flow: http.HTTPFlow, state: FlowState, decision: Decision) -> bool:
        engine = self.store.engine
        assert engine is not None and decision.entry_id is not None and state.outcome is not None
        entry = engine.cached_entry(decision.entry_id) or await self.store.run("reading a recording", engine.entry,
                                                                                decision.entry_id)
        if entry is None:
            return False
        if state.normalised_fp is None:
            state.outcome = replace(state.outcome, normalised_fp=entry.normalised_fp)
        if engine.review.has_open(state.project, state.normalised_fp):  # an answered request closes its own
            self.store.background("closing answered review candidates", engine.review.answered, state.project,
                                  state.normalised_fp)
        state.served.upstream_ms = entry.upstream_ms
        state.served.usage = Usage(entry.prompt_tokens, entry.completion_tokens)
        state.streamed = entry.streamed
        headers = [(k.encode(), v.encode()) for k, v in entry.headers]
        headers += [(k.encode(), v.encode()) for k, v in semula_headers(decision).items()]
        flow.response = http.Response.make(entry.status, entry.body, http.Headers(headers))
        flow.marked = ":green_circle:"
        return True

    async def _refuse(self, flow: http.HTTPFlow, state: FlowState) -> None:
        decision = state.decision
        assert decision is not None and state.outcome is not None
        problem = None
        if decision.decision == "bypass":
            problem = f"{decision.bypass_reason}, and replay mode never reaches the network"
        elif decision.decision == "error":
            problem = decision.reason
        problem = problem or state.outcome.exhausted
        nearest, others = [], []
        engine = self.store.engine
        if engine is not None and state.canonical is not None and decision.decision == "miss":
            try:
                nearest = await asyncio.get_running_loop().run_in_executor(
                    self.store.executor, engine.nearest, state.project, state.canonical)
            except Exception as e:
                log.warning("semula: could not rank the nearest recordings: %s", e)
            if state.request_fp:
                others = sorted(engine.projects_with(state.request_fp) - {state.project})
        near = state.outcome.near
        candidate = near.best if near and near.best else None
        message = redact_text(miss_message(state.project, self.mode.value, nearest, others, problem, candidate))
        adapter = state.adapter or adapter_for(state.host, state.path)
        body = adapter.error_body(REPLAY_REFUSAL_STATUS, message)
        headers = {"content-type": "application/json", **semula_headers(decision)}
        flow.response = http.Response.make(REPLAY_REFUSAL_STATUS, body, headers)
        flow.marked = ":red_circle:"
        state.error = message

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or state.decision is None or flow.response is None:
            return
        # Headers set in `response` no longer reach a streamed client: set them here.
        flow.response.headers.update(semula_headers(state.decision))
        if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            state.streamed = True
            chunks = state.chunks

            def capture(chunk: bytes) -> bytes:
                if chunk:
                    chunks.append(chunk)
                return chunk

            flow.response.stream = capture

    async def response(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or state.decision is None or state.decision.action != "forward" or flow.response is None:
            return
        await self._complete(flow, state)

    async def error(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or state.decision is None:
            return
        message = redact_text(str(flow.error)) if flow.error else "connection error"
        if state.streamed and flow.response is not None and state.decision.action == "forward":
            # The sync openai SDK closes the response at `data: [DONE]`, before the body's last
            # chunk: a stream that delivered its terminal event is still a complete answer.
            await self._complete(flow, state, client_gone=message)
            return
        self.flows.pop(flow.id, None)
        state.error = message
        state.cut = flow.response is not None
        self._finish(flow, state, upstream_ms=self._upstream_ms(state))

    async def _complete(self, flow: http.HTTPFlow, state: FlowState, client_gone: str | None = None) -> None:
        """Record (if wanted) and log a forwarded call whose answer arrived.

        `client_gone` is set when the client hung up before the body ended: only a stream whose
        captured frames already end with the provider's terminal event is then complete.
        """
        self.flows.pop(flow.id, None)
        response = flow.response
        assert response is not None and state.decision is not None
        upstream_ms = self._upstream_ms(state)
        if state.streamed:
            body = decode_partial(b"".join(state.chunks), response.headers.get("content-encoding", "identity"))
        else:
            body = response.get_content(strict=False) or b""
        adapter = state.adapter or adapter_for(state.host, state.path)
        frames = split_frames(body) if state.streamed else []
        usage = adapter.usage_from_frames(frames) if state.streamed else adapter.usage_from_body(body)
        entry_id = None
        if client_gone and not (state.streamed and adapter.stream_complete(frames)):
            state.error, state.cut = client_gone, True
        elif state.decision.record and state.canonical is not None:
            why_not = self._unrecordable(adapter, response.status_code, state.streamed, frames)
            if why_not:
                state.error = why_not
            else:
                entry_id = await self._record(state, response, body, usage, upstream_ms)
                if entry_id is not None and not state.streamed:  # a streamed answer's headers are gone
                    response.headers["x-semula-entry"] = str(entry_id)
        self._finish(flow, state, upstream_ms=upstream_ms, usage=usage, entry_id=entry_id,
                     recorded=entry_id is not None)

    @staticmethod
    def _upstream_ms(state: FlowState) -> float | None:
        return (time.perf_counter() - state.upstream_started) * 1000 if state.upstream_started else None

    def _unrecordable(self, adapter: Adapter, status: int, streamed: bool, frames: list[bytes]) -> str | None:
        if not (200 <= status < 300) and not self.settings.record_errors:
            return f"not recorded: upstream answered {status} (only complete 2xx answers are recorded)"
        if streamed and not adapter.stream_complete(frames):
            return "not recorded: the stream ended without its terminal event"
        return None

    async def _record(self, state: FlowState, response: http.Response, body: bytes, usage: Usage,
                      upstream_ms: float | None) -> int | None:
        assert state.canonical is not None and state.request_fp is not None
        engine = self.store.engine
        if engine is None:
            state.error = f"not recorded: store unavailable ({self.store.problem})"
            return None
        new = recording_of(state.project, state.canonical, state.settings, host=state.host, body=body,
                           status=response.status_code, headers=response.headers.items(), streamed=state.streamed,
                           usage=usage, upstream_ms=upstream_ms, request_fp=state.request_fp,
                           normalised_fp=state.normalised_fp)
        entry_id = await self.store.run("recording", engine.record, new, state.started_at, write=True)
        if entry_id is None:
            state.error = f"not recorded: {self.store.write_problem or self.store.problem}"
        return entry_id

    def _release(self, state: FlowState) -> None:
        """Wake the identical requests waiting for this one (its recording is stored, or never will be)."""
        if state.pending_key is not None and (event := self.pending.pop(state.pending_key, None)):
            event.set()
        state.pending_key = None

    # --- the call log ----------------------------------------------------------------------

    def _finish(self, flow: http.HTTPFlow, state: FlowState, upstream_ms: float | None = None,
                usage: Usage | None = None, entry_id: int | None = None, recorded: bool = False) -> None:
        self.flows.pop(flow.id, None)
        self._release(state)
        decision = state.decision
        assert decision is not None
        entry = decision.entry_id if decision.entry_id is not None else entry_id
        status = flow.response.status_code if flow.response is not None and not state.cut else None
        row = call_row(state, flow.request.method, self.mode.value, status, upstream_ms=upstream_ms, usage=usage,
                       entry_id=entry, recorded=recorded)
        if self.calls is not None:
            self.calls.append({**row, "run_id": self.run_id})
        flow.comment = flow_comment(decision, entry, state)
        print(console_line(state, row, recorded), flush=True)

    # --- commands (mitmweb / console) ------------------------------------------------------

    def _admin_dispatch(self, method: str, params: dict[str, Any]) -> Any:
        return self.store.admin(lambda engine: run_operation(engine, method, params))

    def _command(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return self._admin_dispatch(method, params)
        except Exception as e:
            raise exceptions.CommandError(f"semula: {e}") from None

    @command.command("semula.review.list")
    def review_list(self) -> str:
        """Open review candidates: id, project, tier, score, guard reason, both texts."""
        rows = self._command("review.list", {})
        if not rows:
            return "semula: no open review candidates"
        return "\n".join(
            f"#{r['id']} {r['project']} {r['tier']} {r['score']:.3f} entry #{r['entry_id']} "
            f"guard: {r['guard_reason'] or 'pass'} | {r['request']} ⇄ {r['recorded']}" for r in rows
        )

    @command.command("semula.review.approve")
    def review_approve(self, candidate_id: int) -> str:
        """Approve a review candidate: its request is served the recorded answer (tier alias)."""
        result = self._command("review.approve", {"id": candidate_id})
        return f"semula: approved #{candidate_id}: alias to entry #{result['alias_to']}"

    @command.command("semula.review.reject")
    def review_reject(self, candidate_id: int) -> str:
        """Reject a review candidate: that pairing is never queued or served again."""
        self._command("review.reject", {"id": candidate_id})
        return f"semula: rejected #{candidate_id}"

    @command.command("semula.status")
    def status(self) -> str:
        """Mode, data dir and store state of the semula addon."""
        store = "open" if self.store.engine else f"unavailable: {self.store.problem}"
        return f"mode {self.mode.value} · data dir {self.settings.data_dir} · store {store}"


async def _off_the_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """Parse and fingerprint a large body on a worker thread: it must not stall the other flows."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _no_outcome() -> Outcome:
    return Outcome(Decision("error", "forward"))


def _canonicalise(adapter: Adapter, raw: RawRequest, key: FingerprintKey) -> CanonicalRequest:
    if not raw.body and raw.method in ("GET", "HEAD", "DELETE"):
        # e.g. GET /v1/models: replayable by the exact tier, nothing to normalise
        return CanonicalRequest(
            provider=adapter.name, method=raw.method, endpoint=raw.path,
            query=tuple(sorted(clean_query(raw.query))),
            headers=(), model=None, system=None, messages=(), tools=(), params={},
            stream=False, body=None, parsed=False,
        )
    return adapter.canonicalise(raw, key)
