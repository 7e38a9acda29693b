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
import sys
import time
from dataclasses import replace
from functools import lru_cache
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mitmproxy import ctx, http

from semula.core.bypass import NO_CACHE_HEADER, no_cache_header
from semula.core.request.canonical import CanonicalRequest
from semula.core.cascade import Candidate, NearSearch, Outcome, cascade
from semula.core.decision import Action, Bypass, Decision, Kind, decide
from semula.core.errorpolicy import replayed_note, unrecordable_answer
from semula.core.explain import miss_message
from semula.core.fasthit import fast_outcome
from semula.core.modes import Mode
from semula.core.redact import FingerprintKey, redact_query, redact_text
from semula.core.settings import AddonSettings, ProjectSettings, SettingsError, validate_project
from semula.core.provenance import provenance_of
from semula.recordings.entry import Answer, recording_of, semula_version
from semula.providers import DEFAULT_PROVIDER_HOSTS, adapter_for, host_matches, stream_frames, stream_framer
from semula.providers.base import Adapter, AdapterError, RawRequest, Usage
from semula.proxy import options
from semula.proxy.bodies import BodyTooLarge, decode_capped, decode_partial
from semula.proxy.answer import answer_response
from semula.proxy.calllog import call_row
from semula.proxy.caller import caller_of
from semula.proxy.console import CallLines, console_line
from semula.proxy.headers import flow_comment, semula_headers
from semula.proxy.commands import SemulaCommands
from semula.proxy.fastpath import FastPath
from semula.proxy.flowstate import FlowState, raw_request
from semula.proxy.identity import keyed_project, proxy_credentials
from semula.proxy.lifecycle import Lifecycle
from semula.proxy.malloc import limit_arenas, start_trimming
from semula.proxy.refusals import tag_of
from semula.proxy.runs import RunCounters
from semula.proxy.sidecalls import side_outcome
from semula.proxy.lookups import ProxyLookups
from semula.proxy.realtime import Realtime, is_upgrade as is_realtime_upgrade

log = logging.getLogger("semula")

REPLAY_REFUSAL_STATUS = 404  # a 4xx that SDKs do not retry (not 408/409/429)
BIG_BODY_BYTES = 256 * 1024  # larger request bodies are parsed and fingerprinted off the event loop
# How long a thread holds the GIL while another waits for it (Python's default: 5 ms). The event loop,
# the store thread, the near-search readers and the embedder take turns; at 5 ms an embedding beside one
# busy thread took 23 ms instead of 12 (1 ms: 16; benchmark/results/embedding.md).
GIL_SWITCH_SECONDS = 0.001


class SemulaAddon:
    """One addon holding its parts: `life` (store thread, logs, admin endpoint), `commands` (semula.*)."""

    def __init__(self) -> None:
        self.mode, self.settings = Mode.AUTO, AddonSettings(hosts=DEFAULT_PROVIDER_HOSTS)
        self.commands = SemulaCommands(self)
        self.addons = [self.commands, Realtime(self)]  # mitmproxy collects semula.* commands and Realtime hooks
        self.life = life = Lifecycle(self.commands.dispatch)
        self.store, self.refusals, self.tests, self.run_id = life.store, life.refusals, life.tests, life.run_id
        self._admin_call, self._admin_dispatch = life.admin_call, self.commands.dispatch  # in-process callers
        self.conn_projects: dict[str, str] = {}
        self.conn_tags: dict[str, str] = {}
        self.flows: dict[str, FlowState] = {}
        # Recordings in flight, by (project, normalised or exact fp): a streamed answer reaches
        # the client before it is stored, so a repeat sent at once must wait for it.
        self.pending: dict[tuple[str, str], asyncio.Event] = {}
        self.runs = RunCounters()  # semula_repeats=sequence: occurrences of each request per run
        self.fast = FastPath()  # raw request → the certain-tier hit it had (`core.fasthit`)
        self.lines = CallLines()  # the console line per call, written once per loop turn

    def load(self, loader: Any) -> None:
        limit_arenas()  # before the store's threads start
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
        start_trimming()
        options.declare(loader)

    def configure(self, updated: set[str]) -> None:
        if not any(name.startswith("semula_") or name in options.MITMPROXY_OPTIONS for name in updated):
            return
        old_dir = self.settings.data_dir
        self.mode, self.settings = options.read(ctx.options)
        if self.life.is_running and self.settings.data_dir != old_dir:
            log.warning("semula: data dir changed to %s; restart the proxy to move the store and logs",
                        self.settings.data_dir)

    async def running(self) -> None:
        await self.life.running(self.mode, self.settings)

    def done(self) -> None:
        self.lines.flush()
        self.life.done()

    calls = property(lambda self: self.life.calls)  # the call log, once running
    embedder = property(lambda self: self.life.embedder, lambda self, e: setattr(self.life, "embedder", e))

    # --- hooks -----------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        # Only the CONNECT carries Proxy-Authorization; its user name names the project of
        # every flow on this client connection. mitmproxy's proxyauth stays off (it would 407).
        user, password = proxy_credentials(flow.request.headers.get("proxy-authorization"))
        if user:
            self.conn_projects[flow.client_conn.id] = user
        if tag := tag_of(password):
            self.conn_tags[flow.client_conn.id] = tag

    def client_disconnected(self, client: Any) -> None:
        self.conn_projects.pop(client.id, None)
        self.conn_tags.pop(client.id, None)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        # The host the client asked for, noted before map_remote rewrites the URL.
        host = flow.request.pretty_host.lower()
        if not _intercepted(host, self.settings.hosts) or is_realtime_upgrade(flow.request):
            return
        caller = caller_of(flow, self.conn_projects, self.conn_tags, self.tests, self.settings.default_project)
        test = caller.test
        self.flows[flow.id] = FlowState(host=host, project=caller.project, no_cache=caller.no_cache,
                                        path=flow.request.path.split("?", 1)[0], run=test.run, tag=caller.tag,
                                        test=test.test)

    async def request(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or flow.response is not None:
            self.flows.pop(flow.id, None)  # answered before us (another addon): nothing to log
            return
        started = time.perf_counter()
        state.started_at = datetime.now(UTC).replace(tzinfo=None)
        try:
            state.outcome = await self._fast_served(flow, state) or await self._decide(flow, state)
        except Exception as e:  # a bug of ours must not take the call down with it
            log.error("semula: internal error while deciding (%s: %s); %s", type(e).__name__, e,
                      "refusing the call" if self.mode is Mode.REPLAY else "forwarding the call",
                      exc_info=os.environ.get("SEMULA_DEBUG", "") not in ("", "0"))
            state.error = f"internal error: {type(e).__name__}: {e}"
            state.outcome = replace(state.outcome or _no_outcome(), decision=Decision(
                "error", "refuse" if self.mode is Mode.REPLAY else "forward", reason=state.error))
        decision = state.decision
        assert decision is not None and state.outcome is not None
        if decision.action == "serve" and state.fast is None and not await self._serve(flow, state, decision):
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

    async def _fast_served(self, flow: http.HTTPFlow, state: FlowState) -> Outcome | None:
        """Serve a repeat of a raw request the certain tiers already matched, without parsing it (None: the
        canonical tiers decide). Notes `state.fast_key` for `_decide` to remember a canonical hit under."""
        engine = self.store.engine
        found = self.fast.find(engine, self.mode, self.settings, flow.request, state) if engine else None
        if found is None:
            return None
        named = state.project  # `_decide` adds the key hash itself
        state.project, state.settings, state.fast = found.project, found.settings, found.hit
        state.outcome = fast_outcome(self.mode, found.hit)
        if await self._serve(flow, state, state.outcome.decision):
            self.fast.served += 1
            return state.outcome
        self.fast.forget(found.key)  # the entry is gone: the canonical tiers decide (and log) this one
        state.project, state.fast, state.outcome = named, None, None
        return None

    async def _decide(self, flow: http.HTTPFlow, state: FlowState) -> Outcome:
        if side := side_outcome(flow, self.mode, state, self.settings.side_paths):  # never recorded or looked up
            return side
        request = flow.request
        body, bypass = await _request_body(request, self.settings.max_body_mb)
        raw = raw_request(request, state, body)
        adapter = state.adapter = adapter_for(raw.host, raw.path)
        if state.no_cache:
            bypass = no_cache_header({NO_CACHE_HEADER: "1"})
        try:
            validate_project(state.project)
        except SettingsError as e:
            bypass = bypass or Bypass("invalid_project", str(e))
        state.project = keyed_project(state.project, raw, self.settings.namespace_by_key)
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
        lookups = (ProxyLookups(engine, self.store, self.pending, after_forward=self.mode is Mode.AUTO)
                   if engine is not None else None)
        try:
            outcome = await cascade(self.mode, state.project, state.canonical, state.settings, lookups,
                                    bypass=bypass, store_problem=self.store.problem, offload=offload,
                                    repeats=self.runs.repeats(self.settings, state.run, state.project))
        finally:
            state.pending_key = lookups.claimed if lookups is not None else None
            state.queueing = lookups.queueing if lookups is not None else None
        if engine is not None:
            self.fast.remember(engine, self.mode, state, outcome)
        return outcome

    async def _serve(self, flow: http.HTTPFlow, state: FlowState, decision: Decision) -> bool:
        engine = self.store.engine
        assert engine is not None and decision.entry_id is not None and state.outcome is not None
        entry = engine.cached_entry(decision.entry_id) or await self.store.run("reading a recording", engine.entry,
                                                                                decision.entry_id)
        if (not_served := self.life.expiry.not_served(entry, state, self.mode)) is not None:  # gone, or too old
            return not_served  # True: refused (max_age fail); False: gone, or forwarded and recorded anew
        if state.normalised_fp is None:
            state.outcome = replace(state.outcome, normalised_fp=entry.normalised_fp)
        if engine.review.has_open(state.project, state.normalised_fp):  # an answered request closes its own
            self.store.background("closing answered review candidates", engine.review.answered, state.project,
                                  state.normalised_fp)
        state.served.upstream_ms = entry.upstream_ms
        state.served.usage = Usage(entry.prompt_tokens, entry.completion_tokens)
        state.streamed = entry.streamed
        state.error = replayed_note(entry.status) or state.error  # a recorded 404 served: the log says so
        flow.response = answer_response(entry, decision)
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
        nearest, others, recording_fp, files = [], [], None, {}
        engine = self.store.engine
        candidate = _named_candidate(state.outcome.near)
        if engine is not None and state.canonical is not None and decision.decision == "miss":
            try:
                nearest, candidate, recording_fp, files = await asyncio.get_running_loop().run_in_executor(
                    self.store.executor, engine.miss_context, state.project, state.canonical, state.normalised_fp,
                    candidate)
            except Exception as e:
                log.warning("semula: could not rank the nearest recordings: %s", e)
            if state.request_fp:
                others = sorted(engine.projects_with(state.request_fp) - {state.project})
        message = redact_text(miss_message(state.project, self.mode.value, nearest, others, problem, candidate,
                                           (state.normalised_fp, recording_fp), files=files,
                                           request_line=f"{flow.request.method} {state.path}"))
        adapter = state.adapter or adapter_for(state.host, state.path)
        body = adapter.error_body(REPLAY_REFUSAL_STATUS, message)
        headers = {**adapter.error_headers(REPLAY_REFUSAL_STATUS), **semula_headers(decision)}
        flow.response = http.Response.make(REPLAY_REFUSAL_STATUS, body, headers)
        flow.marked = ":red_circle:"
        state.error = message

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or state.decision is None or flow.response is None or state.decision.action == "serve":
            return
        # Headers set in `response` no longer reach a streamed client: set them here.
        flow.response.headers.update(semula_headers(state.decision))
        if stream_framer(flow.response.headers.get("content-type", "")) is not None:  # SSE, AWS event-stream
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
            # The client hung up before its request was whole (or decided): forget the flow.
            self.flows.pop(flow.id, None)
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
        if flow.response is None and state.decision.action == "forward":
            # mitmproxy answers the client itself (its HTML 502) right after this hook: an addon
            # cannot replace that answer (README, "When the provider is unreachable").
            state.error = f"upstream {_target(flow, state.host)} unreachable: {message} (mitmproxy answered 502)"
        self._finish(flow, state, upstream_ms=_upstream_ms(state))

    async def _complete(self, flow: http.HTTPFlow, state: FlowState, client_gone: str | None = None) -> None:
        """Record (if wanted) and log a forwarded call whose answer arrived.

        `client_gone` is set when the client hung up before the body ended: only a stream whose
        captured frames already end with the provider's terminal event is then complete.
        """
        self.flows.pop(flow.id, None)
        response = flow.response
        assert response is not None and state.decision is not None
        upstream_ms = _upstream_ms(state)
        if state.streamed:
            body = decode_partial(b"".join(state.chunks), response.headers.get("content-encoding", "identity"))
        else:
            body = response.get_content(strict=False) or b""
        adapter = state.adapter or adapter_for(state.host, state.path)
        frames = stream_frames(response.headers.get("content-type", ""), body) if state.streamed else []
        usage = adapter.usage_from_frames(frames) if state.streamed else adapter.usage_from_body(body)
        entry_id = None
        if client_gone and not (state.streamed and adapter.stream_complete(frames)):
            state.error, state.cut = client_gone, True
        elif state.decision.record and state.canonical is not None:
            why_not = self._unrecordable(adapter, response.status_code, state.streamed, frames, body)
            if why_not:
                state.error = why_not
            else:
                entry_id = await self._record(state, response, body, usage, upstream_ms, flow.request.headers)
                if entry_id is not None and not state.streamed:  # a streamed answer's headers are gone
                    response.headers["x-semula-entry"] = str(entry_id)
        await self._queued(state)
        self._finish(flow, state, upstream_ms=upstream_ms, usage=usage, entry_id=entry_id,
                     recorded=entry_id is not None)

    @staticmethod
    async def _queued(state: FlowState) -> None:
        """The review candidates a forwarded miss queued meanwhile, for its comment and console line."""
        queueing, state.queueing = state.queueing, None
        near = await queueing if queueing is not None else None
        if near is not None and state.outcome is not None:
            state.outcome = replace(state.outcome, near=near)

    def _unrecordable(self, adapter: Adapter, status: int, streamed: bool, frames: list[bytes],
                      body: bytes) -> str | None:
        return unrecordable_answer(status, self.settings.record_errors, body, streamed,
                                   lambda: adapter.stream_complete(frames))

    async def _record(self, state: FlowState, response: http.Response, body: bytes, usage: Usage,
                      upstream_ms: float | None, request_headers: http.Headers) -> int | None:
        assert state.canonical is not None and state.request_fp is not None
        engine = self.store.engine
        if engine is None:
            state.error = f"not recorded: store unavailable ({self.store.problem})"
            return None
        made_by = provenance_of(request_headers.get("user-agent"), body, state.streamed, semula_version())
        answer = Answer(host=state.host, body=body, status=response.status_code, headers=response.headers.items(),
                        streamed=state.streamed, usage=usage, upstream_ms=upstream_ms, provenance=made_by)
        new = recording_of(state.project, state.canonical, state.settings, answer,
                           fingerprints=(state.request_fp, state.normalised_fp))
        entry_id = await self.store.run("recording", engine.record, new, state.started_at, write=True)
        if entry_id is None:
            state.error = f"not recorded: {self.store.write_problem or self.store.problem}"
        else:
            self.fast.recorded(engine, self.mode, state, entry_id)
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
            self.calls.append(row.as_dict(run_id=self.run_id))
        flow.comment = flow_comment(decision, entry, state)
        if decision.action == "refuse":
            self.refusals.add(state.tag, state.project, state.error or decision.reason or "refused", state.test)
        if self.settings.console_calls:
            self.lines.write(console_line(state, row, recorded))


@lru_cache(maxsize=1024)
def _intercepted(host: str, hosts: tuple[str, ...]) -> bool:
    return host_matches(host, hosts)


async def _off_the_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """Parse and fingerprint a large body on a worker thread: it must not stall the other flows."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def _request_body(request: http.Request, max_body_mb: float) -> tuple[bytes, Bypass | None]:
    """The decoded body, inflated off the loop and at most `semula_max_body_mb` (a gzip bomb is
    not matched: forwarded untouched, refused in replay)."""
    raw = request.raw_content or b""
    encoding = request.headers.get("content-encoding", "")
    cap = int(max_body_mb * 2**20)
    if not encoding.strip() and len(raw) <= cap:
        return raw, None
    try:
        return await _off_the_loop(decode_capped, raw, encoding, cap), None
    except BodyTooLarge as e:
        return b"", Bypass("body_too_large", str(e))
    except ValueError:
        return raw, None  # as before: an undecodable body is matched as sent


def _upstream_ms(state: FlowState) -> float | None:
    return (time.perf_counter() - state.upstream_started) * 1000 if state.upstream_started else None


def _target(flow: http.HTTPFlow, host: str) -> str:
    """The host the client asked for, and where the call really went when map_remote moved it."""
    actual = f"{flow.request.host}:{flow.request.port}"
    return host if actual.split(":")[0] == host else f"{host} (sent to {actual})"


def _named_candidate(near: NearSearch | None) -> Candidate | None:
    """The candidate a miss names: the best one if it was queued, else the first queued, else the best."""
    if near is None:
        return None
    if near.best is not None and near.best.candidate_id is not None:
        return near.best
    return near.queued[0] if near.queued else near.best


def _no_outcome() -> Outcome:
    return Outcome(Decision(Kind.ERROR, Action.FORWARD))


def _canonicalise(adapter: Adapter, raw: RawRequest, key: FingerprintKey) -> CanonicalRequest:
    if not raw.body and raw.method in ("GET", "HEAD", "DELETE"):
        # e.g. GET /v1/models: replayable by the exact tier, nothing to normalise
        return CanonicalRequest(
            provider=adapter.name, method=raw.method, endpoint=raw.path,
            query=tuple(sorted(redact_query(raw.query, key))),
            headers=(), model=None, system=None, messages=(), tools=(), params={},
            stream=False, body=None, parsed=False,
        )
    return adapter.canonicalise(raw, key)
