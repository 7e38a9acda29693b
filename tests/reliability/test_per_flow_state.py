"""What the proxy keeps per flow is gone when the flow ends (the soak's RSS, issue 12's
done-when "RSS flat after warm-up"): after N mixed requests — misses, hits, bypasses, identical
requests at once, upstream errors, clients that hang up before or after the decision — the
per-flow maps are empty and the per-connection map holds only live connections. Counts, never time.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path

from mitmproxy import http
from mitmproxy.test import tflow

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from test_addon import call, provider_flow, run, upstream_answer  # noqa: E402

ROUNDS = 40


def _connect(addon, project: str):
    """A CONNECT naming a project, as a client with a proxy user sends it."""
    flow = tflow.tflow()
    token = base64.b64encode(f"{project}:".encode()).decode()
    flow.request.headers["proxy-authorization"] = f"Basic {token}"
    addon.http_connect(flow)
    return flow.client_conn


async def _hang_up_before_the_decision(addon) -> None:
    flow = provider_flow({"model": "gpt-4o", "messages": [{"role": "user", "content": "gone early"}]})
    addon.requestheaders(flow)
    flow.error = tflow.terr("client disconnected")
    await addon.error(flow)


async def _hang_up_after_the_decision(addon, text: str) -> None:
    flow = provider_flow({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]})
    addon.requestheaders(flow)
    await addon.request(flow)
    flow.error = tflow.terr("client disconnected")
    await addon.error(flow)


async def _upstream_error(addon, text: str) -> None:
    flow = provider_flow({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]})
    addon.requestheaders(flow)
    await addon.request(flow)
    flow.response = http.Response.make(500, b'{"error": {"message": "boom"}}', {"content-type": "application/json"})
    addon.responseheaders(flow)
    await addon.response(flow)


async def _identical_at_once(addon, text: str, n: int) -> None:
    flows = [provider_flow({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}) for _ in range(n)]

    async def one(flow):
        addon.requestheaders(flow)
        await addon.request(flow)
        if flow.response is None:
            await asyncio.sleep(0)  # the others claim or wait meanwhile
            upstream_answer(flow, text)
            addon.responseheaders(flow)
            await addon.response(flow)

    await asyncio.gather(*(one(f) for f in flows))
    assert sum(f.response.headers["x-semula-decision"] == "miss" for f in flows) == 1


def test_per_flow_state_is_released_after_every_kind_of_request(tmp_path):
    async def scenario(addon, tctx):
        for i in range(ROUNDS):
            client = _connect(addon, f"team-{i % 4}")
            text = f"question number {i}"
            await call(addon, provider_flow({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}))
            await call(addon, provider_flow({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}),
                       answer=None)  # a hit
            await call(addon, provider_flow(b"\x00\xffnot json"))  # a bypass
            await _identical_at_once(addon, f"burst {i}", 4)
            await _upstream_error(addon, f"failing {i}")
            await _hang_up_before_the_decision(addon)
            await _hang_up_after_the_decision(addon, f"impatient {i}")
            addon.client_disconnected(client)
        return (len(addon.flows), len(addon.parts.pending), len(addon.parts.conn_projects), len(addon.parts.runs._seen),
                len(addon.parts.store.engine.lexical._fresh))

    flows, pending, connections, run_counters, _ = run(scenario, tmp_path)
    assert (flows, pending, connections, run_counters) == (0, 0, 0, 0)


def test_recorded_answers_are_cached_once_each(tmp_path):
    """The answer cache and the index hold one item per recording, never one per request."""
    async def scenario(addon, tctx):
        for _ in range(3):
            for i in range(ROUNDS):
                body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"again {i}"}]}
                await call(addon, provider_flow(body))
        engine = addon.parts.store.engine
        return len(engine.answers._entries), len(engine.index)

    assert run(scenario, tmp_path) == (ROUNDS, ROUNDS)
