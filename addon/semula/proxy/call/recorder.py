"""A forwarded call's answer: captured as it streams, recorded when it is whole, and the call finished.

mitmproxy's seams for an answer are `responseheaders` (a stream's chunks pass through `capture`),
`response` (the body is whole) and `error` (it broke off); the hooks call in here for each.
"""

from __future__ import annotations

import time
from dataclasses import replace

from mitmproxy import http

from semula.core.errorpolicy import unrecordable_answer
from semula.core.provenance import provenance_of
from semula.providers import adapter_for, stream_frames, stream_framer
from semula.providers.base import Adapter, Usage
from semula.proxy.call.bodies import decode_partial
from semula.proxy.call.calllog import finish
from semula.proxy.call.flowstate import FlowState
from semula.proxy.call.headers import semula_headers
from semula.proxy.call.parts import ProxyParts
from semula.recordings.entry import Answer, recording_of, semula_version


class Recorder:
    """Records forwarded answers the decision asked to record, and finishes every forwarded call."""

    def __init__(self, parts: ProxyParts) -> None:
        self.parts = parts

    @staticmethod
    def responseheaders(flow: http.HTTPFlow, state: FlowState) -> None:
        response = flow.response
        assert response is not None and state.decision is not None
        # Headers set in `response` no longer reach a streamed client: set them here.
        response.headers.update(semula_headers(state.decision))
        if stream_framer(response.headers.get("content-type", "")) is not None:  # SSE, AWS event-stream
            state.streamed = True
            chunks = state.chunks

            def capture(chunk: bytes) -> bytes:
                if chunk:
                    chunks.append(chunk)
                return chunk

            response.stream = capture

    async def complete(self, flow: http.HTTPFlow, state: FlowState, client_gone: str | None = None) -> None:
        """Record (if wanted) and log a forwarded call whose answer arrived.

        `client_gone` is set when the client hung up before the body ended: only a stream whose
        captured frames already end with the provider's terminal event is then complete.
        """
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
            why_not = self._unrecordable(adapter, response, state.streamed, frames, body)
            if why_not:
                state.error = why_not
            else:
                entry_id = await self._record(state, response, body, usage, upstream_ms, flow.request.headers)
                if entry_id is not None and not state.streamed:  # a streamed answer's headers are gone
                    response.headers["x-semula-entry"] = str(entry_id)
        await _queued(state)
        finish(self.parts, flow, state, upstream_ms=upstream_ms, usage=usage, entry_id=entry_id,
               recorded=entry_id is not None)

    def failed(self, flow: http.HTTPFlow, state: FlowState, message: str) -> None:
        """A call that broke off (the client hung up, the provider is unreachable): logged, not recorded."""
        state.error = message
        state.cut = flow.response is not None
        if flow.response is None and state.decision is not None and state.decision.action == "forward":
            # mitmproxy answers the client itself (its HTML 502) right after this hook: an addon
            # cannot replace that answer (README, "When the provider is unreachable").
            state.error = f"upstream {_target(flow, state.host)} unreachable: {message} (mitmproxy answered 502)"
        finish(self.parts, flow, state, upstream_ms=_upstream_ms(state))

    def _unrecordable(self, adapter: Adapter, response: http.Response, streamed: bool, frames: list[bytes],
                      body: bytes) -> str | None:
        return unrecordable_answer(response.status_code, self.parts.settings.record_errors, body, streamed,
                                   lambda: adapter.stream_complete(frames), response.headers.get("location"))

    async def _record(self, state: FlowState, response: http.Response, body: bytes, usage: Usage,
                      upstream_ms: float | None, request_headers: http.Headers) -> int | None:
        assert state.canonical is not None and state.request_fp is not None
        parts = self.parts
        store = parts.store
        engine = store.engine
        if engine is None:
            state.error = f"not recorded: store unavailable ({store.problem})"
            return None
        made_by = provenance_of(request_headers.get("user-agent"), body, state.streamed, semula_version())
        answer = Answer(host=state.host, body=body, status=response.status_code, headers=response.headers.items(),
                        streamed=state.streamed, usage=usage, upstream_ms=upstream_ms, provenance=made_by)
        new = recording_of(state.project, state.canonical, state.settings, answer, key=engine.fingerprint_key,
                           fingerprints=(state.request_fp, state.normalised_fp))
        if state.queueing is not None:  # this call's review candidates first: its recording closes them
            await state.queueing
        entry_id = await store.record(engine, new)
        if entry_id is None:
            state.error = f"not recorded: {store.write_problem or store.problem}"
        else:
            parts.fast.recorded(engine, parts.mode, state, entry_id)
        return entry_id


async def _queued(state: FlowState) -> None:
    """The review candidates a forwarded miss queued meanwhile, for its comment and console line."""
    queueing, state.queueing = state.queueing, None
    near = await queueing if queueing is not None else None
    if near is not None and state.outcome is not None:
        state.outcome = replace(state.outcome, near=near)


def _upstream_ms(state: FlowState) -> float | None:
    return (time.perf_counter() - state.upstream_started) * 1000 if state.upstream_started else None


def _target(flow: http.HTTPFlow, host: str) -> str:
    """The host the client asked for, and where the call really went when map_remote moved it."""
    actual = f"{flow.request.host}:{flow.request.port}"
    return host if actual.split(":")[0] == host else f"{host} (sent to {actual})"


__all__ = ["Recorder"]
