"""One provider call decided and answered: the fast path or the cascade, then the recording served or the refusal.

The decision is `core.cascade.cascade()` (or, for a repeat of raw bytes it already matched, the fast
path's remembered hit settled by `core.cascade.settle`); what it returns is final and carries the
recording to serve. This module only carries it out: it builds the response from the recording, or
the refusal that says why, and hands a forwarded call to the recorder (`proxy/call/recorder.py`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from mitmproxy import http

from semula.core.bypass import NO_CACHE_HEADER, no_cache_header
from semula.core.cascade import Candidate, NearSearch, Outcome, cascade, settle
from semula.core.decision import Action, Bypass, internal_error
from semula.core.errorpolicy import replayed_note
from semula.core.explain import Nearest, ignore_note, miss_message
from semula.core.fasthit import fast_outcome
from semula.core.modes import Mode
from semula.core.redact import FingerprintKey, redact_query, redact_text
from semula.core.request.canonical import CanonicalRequest
from semula.core.settings import ProjectSettings, SettingsError, validate_project
from semula.providers import adapter_for
from semula.providers.base import Adapter, AdapterError, RawRequest
from semula.providers.mcp import MCP
from semula.proxy.call import mcp
from semula.proxy.call.answer import answer_response
from semula.proxy.call.bodies import BodyTooLarge, decode_capped
from semula.proxy.call.calllog import finish, release
from semula.proxy.call.flowstate import FlowState, raw_request
from semula.proxy.call.headers import semula_headers
from semula.proxy.call.identity import keyed_project
from semula.proxy.call.lookups import ProxyAnswers, ProxyLookups
from semula.proxy.call.parts import ProxyParts
from semula.proxy.call.sidecalls import side_outcome

log = logging.getLogger("semula")

REPLAY_REFUSAL_STATUS = 404  # a 4xx that SDKs do not retry (not 408/409/429)
BIG_BODY_BYTES = 256 * 1024  # larger request bodies are parsed and fingerprinted off the event loop


class Responder:
    """Decides each intercepted call once, and answers it (served, refused) or leaves it to go upstream."""

    def __init__(self, parts: ProxyParts) -> None:
        self.parts = parts

    async def request(self, flow: http.HTTPFlow, state: FlowState) -> None:
        """Decide and answer; a call served or refused is finished (logged) here, a forwarded one is not."""
        parts, started = self.parts, time.perf_counter()
        state.started_at = datetime.now(UTC).replace(tzinfo=None)
        try:
            fast = None if state.mcp else await self._fast_served(flow, state)  # an MCP body holds its own id
            state.outcome = fast or await self._decide(flow, state)
        except Exception as e:  # a bug of ours must not take the call down with it
            log.error("semula: internal error while deciding (%s: %s); %s", type(e).__name__, e,
                      "refusing the call" if parts.mode is Mode.REPLAY else "forwarding the call",
                      exc_info=os.environ.get("SEMULA_DEBUG", "") not in ("", "0"))
            state.error = f"internal error: {type(e).__name__}: {e}"
            state.outcome = Outcome(internal_error(parts.mode, state.error))
        decision = state.outcome.decision
        if decision.action == "serve":
            self._serve(flow, state)
        elif decision.action == "refuse":
            await self._refuse(flow, state)
        state.decision_ms = (time.perf_counter() - started) * 1000
        if decision.action == "forward":
            state.upstream_started = time.perf_counter()
            if not decision.record:  # the identical requests waiting for this one look again now
                release(parts, state)
        else:
            finish(parts, flow, state)

    async def _fast_served(self, flow: http.HTTPFlow, state: FlowState) -> Outcome | None:
        """The outcome of a repeat of a raw request the certain tiers already matched, settled without
        parsing it (None: the canonical tiers decide). Notes `state.fast_key` for `_decide` to remember
        a canonical hit under."""
        parts = self.parts
        engine, fast = parts.store.engine, parts.fast
        if engine is None or (found := fast.find(engine, parts.mode, parts.settings, flow.request, state)) is None:
            return None
        outcome = await settle(parts.mode, fast_outcome(parts.mode, found.hit), found.settings,
                               ProxyAnswers(engine, parts.store))
        if outcome.decision.action in (Action.SERVE, Action.REFUSE):  # served, or refused as too old
            state.project, state.settings, state.fast = found.project, found.settings, found.hit
            fast.served += 1
            return outcome
        fast.forget(found.key)  # gone, or too old to serve: the canonical tiers decide (and log) this one
        return None

    async def _decide(self, flow: http.HTTPFlow, state: FlowState) -> Outcome:
        parts = self.parts
        mode, settings, store = parts.mode, parts.settings, parts.store
        if side := side_outcome(flow, mode, state, settings.side_paths):  # never recorded or looked up
            return side
        request = flow.request
        body, bypass = await _request_body(request, settings.max_body_mb)
        if state.mcp and (local := mcp.local_outcome(flow, mode, state, state.mcp, body)):
            return local  # a notification, the GET stream, DELETE: not calls
        raw = raw_request(request, state, body)
        adapter = state.adapter = MCP if state.mcp else adapter_for(raw.host, raw.path)
        if state.no_cache:
            bypass = no_cache_header({NO_CACHE_HEADER: "1"})
        try:
            validate_project(state.project)
        except SettingsError as e:
            bypass = bypass or Bypass("invalid_project", str(e))
        state.project = keyed_project(state.project, raw, settings.namespace_by_key)
        offload = _off_the_loop if len(raw.body) > BIG_BODY_BYTES else None  # a multi-megabyte prompt
        if mode is not Mode.PASSTHROUGH:
            await store.ensure_open()  # first: the store's salt keys the secrets in the fingerprints
        engine = store.engine
        if bypass is None and mode is not Mode.PASSTHROUGH:
            key = store.fingerprint_key
            raw = replace(raw, path=redact_text(raw.path, key))  # a key in the path: /v1/sk-…/chat
            try:
                state.canonical = (await offload(_canonicalise, adapter, raw, key) if offload
                                   else _canonicalise(adapter, raw, key))
            except AdapterError as e:
                bypass = Bypass("unparsable_body", f"cannot match this request: {e}")
        state.settings = engine.settings_for(state.project) if engine else ProjectSettings()
        lookups = (ProxyLookups(engine, store, parts.pending, after_forward=mode is Mode.AUTO)
                   if engine is not None else None)
        try:
            outcome = await cascade(mode, state.project, state.canonical, state.settings, lookups,
                                    bypass=bypass, store_problem=store.problem, offload=offload,
                                    repeats=parts.runs.repeats(settings, state.run, state.project))
        finally:
            state.pending_key = lookups.claimed if lookups is not None else None
            state.queueing = lookups.queueing if lookups is not None else None
        if engine is not None and not state.mcp:
            parts.fast.remember(engine, mode, state, outcome)
        return outcome

    def _serve(self, flow: http.HTTPFlow, state: FlowState) -> None:
        """Answer with the recording the decision carries (`Outcome.answer`)."""
        outcome, parts = state.outcome, self.parts
        engine = parts.store.engine
        assert outcome is not None and outcome.answer is not None and engine is not None
        entry = outcome.answer.entry
        if outcome.stale is not None:
            parts.life.expiry.note(entry.id, outcome.stale)
        # an answered request closes its own review candidates
        if state.normalised_fp is not None and engine.review.has_open(state.project, state.normalised_fp):
            parts.store.background("closing answered review candidates", engine.review.answered, state.project,
                                   state.normalised_fp)
        state.error = replayed_note(entry.status) or state.error  # a recorded 404 served: the log says so
        flow.response = answer_response(entry, outcome.decision)
        if state.mcp:
            mcp.served(flow, state)
        flow.marked = ":green_circle:"

    async def _refuse(self, flow: http.HTTPFlow, state: FlowState) -> None:
        decision = state.decision
        assert decision is not None and state.outcome is not None
        problem = None
        if decision.decision == "bypass":
            problem = f"{decision.bypass_reason}, and replay mode never reaches the network"
        elif decision.decision == "error":
            problem = decision.reason
        problem = problem or state.outcome.exhausted
        nearest: list[Nearest] = []
        others: list[str] = []
        recording_fp: str | None = None
        files: dict[int, str] = {}
        store = self.parts.store
        engine = store.engine
        candidate = _named_candidate(state.outcome.near)
        if engine is not None and state.canonical is not None and decision.decision == "miss":
            try:
                nearest, candidate, recording_fp, files = await asyncio.get_running_loop().run_in_executor(
                    store.executor, engine.miss_context, state.project, state.canonical, state.normalised_fp,
                    candidate)
            except Exception as e:
                log.warning("semula: could not rank the nearest recordings: %s", e)
            if state.request_fp:
                others = sorted(engine.projects_with(state.request_fp) - {state.project})
        message = redact_text(miss_message(state.project, self.parts.mode.value, nearest, others, problem, candidate,
                                           (state.normalised_fp, recording_fp), files=files,
                                           request_line=f"{flow.request.method} {state.path}",
                                           ignore=ignore_note(state.canonical, state.settings.ignore)
                                           if state.canonical is not None else None))
        adapter = state.adapter or adapter_for(state.host, state.path)
        body = adapter.error_body(REPLAY_REFUSAL_STATUS, message)
        headers = {**adapter.error_headers(REPLAY_REFUSAL_STATUS), **semula_headers(decision)}
        flow.response = http.Response.make(REPLAY_REFUSAL_STATUS, body, headers)
        if state.mcp:
            mcp.refused(flow, state, message)
        flow.marked = ":red_circle:"
        state.error = message


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


def _named_candidate(near: NearSearch | None) -> Candidate | None:
    """The candidate a miss names: the best one if it was queued, else the first queued, else the best."""
    if near is None:
        return None
    if near.best is not None and near.best.candidate_id is not None:
        return near.best
    return near.queued[0] if near.queued else near.best


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
