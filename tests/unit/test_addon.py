"""The addon's hooks with mitmproxy's own test helpers (taddons/tflow): no network, a real store."""

from __future__ import annotations

import asyncio
import base64
import json
import threading

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons, tflow, tutils

from semula.proxy.addon import SemulaAddon
from addon_harness import run_addon
from semula.proxy.call.identity import proxy_user
from semula.core.modes import Mode

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello there"}]}

async def _started(addon: SemulaAddon) -> None:
    """`running`, then the store it opens in the background (the tests use the engine at once)."""
    await addon.running()
    await addon.life.store_opened()



def provider_flow(body: dict | bytes = BODY, host: str = "api.openai.com", headers: dict | None = None):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = tutils.treq(
        method=b"POST", scheme=b"https", host=host, port=443, path=b"/v1/chat/completions",
        authority=host.encode(), content=content,
        headers=((b"host", host.encode()), (b"content-type", b"application/json"),
                 *((k.encode(), v.encode()) for k, v in (headers or {}).items())),
    )
    return tflow.tflow(req=request)


def upstream_answer(flow, text: str = "answer") -> None:
    flow.response = tutils.tresp(
        status_code=200, content=json.dumps({"choices": [{"message": {"content": text}}]}).encode(),
        headers=((b"content-type", b"application/json"),),
    )


async def call(addon: SemulaAddon, flow, answer: str | None = "answer"):
    addon.requestheaders(flow)
    await addon.request(flow)
    if flow.response is None and answer is not None:
        upstream_answer(flow, answer)
        addon.responseheaders(flow)
        await addon.response(flow)
    return flow


def run(scenario, tmp_path, **options):
    return run_addon(scenario, tmp_path, **options)


def test_miss_is_recorded_then_served_exact_and_normalised(tmp_path):
    async def scenario(addon, tctx):
        first = await call(addon, provider_flow())
        assert first.response.headers["x-semula-decision"] == "miss"
        second = await call(addon, provider_flow(), answer=None)
        assert second.response.headers["x-semula-decision"] == "hit"
        assert second.response.headers["x-semula-tier"] == "exact"
        assert json.loads(second.response.content)["choices"][0]["message"]["content"] == "answer"
        assert second.comment.startswith("hit exact") and second.marked
        variant = {"model": "gpt-4o", "messages": [{"role": "user", "content": "  HELLO   THERE. "}]}
        third = await call(addon, provider_flow(variant), answer=None)
        assert third.response.headers["x-semula-tier"] == "normalised"

    run(scenario, tmp_path)


def test_other_hosts_are_untouched(tmp_path):
    async def scenario(addon, tctx):
        flow = await call(addon, provider_flow(host="example.com"), answer=None)
        assert flow.response is None and flow.id not in addon.flows
        evil = await call(addon, provider_flow(host="api.openai.com.evil.net"), answer=None)
        assert evil.response is None

    run(scenario, tmp_path)


def test_replay_miss_is_a_clear_provider_error(tmp_path):
    async def scenario(addon, tctx):
        flow = await call(addon, provider_flow(), answer=None)
        assert flow.response.status_code == 404
        message = json.loads(flow.response.content)["error"]["message"]
        assert "no recording matches" in message and "project 'default'" in message and "mode replay" in message

    run(scenario, tmp_path, semula_mode="replay")


def test_project_header_is_stripped_and_isolates(tmp_path):
    async def scenario(addon, tctx):
        await call(addon, provider_flow(headers={"x-semula-project": "alpha"}))
        other = provider_flow(headers={"x-semula-project": "beta"})
        await call(addon, other, answer="beta answer")
        assert other.response.headers["x-semula-decision"] == "miss"
        assert "x-semula-project" not in other.request.headers

    run(scenario, tmp_path)


def test_unparsable_body_is_forwarded_as_bypass(tmp_path):
    async def scenario(addon, tctx):
        flow = await call(addon, provider_flow(b'{"messages": "\\ud800"}'))  # JSON, but not text: cannot be matched
        assert flow.response.headers["x-semula-decision"] == "bypass"
        # Bytes labelled JSON that are not JSON are matched by their bytes (google-genai's file-search upload).
        labelled = await call(addon, provider_flow(b"\x00\xffnot json"))
        assert labelled.response.headers["x-semula-decision"] == "miss"

    run(scenario, tmp_path)


def test_proxy_user_parsing():
    token = base64.b64encode(b"team-a:").decode()
    assert proxy_user(f"Basic {token}") == "team-a"
    assert proxy_user("Basic !!!") is None
    assert proxy_user(None) is None


def test_review_commands_for_mitmweb(tmp_path):
    async def scenario(addon, tctx):
        original = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Please list three quiet hotels near the harbour"}]}
        paraphrase = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Please list three calm hotels near the harbour"}]}
        await call(addon, provider_flow(original))
        # replay: auto mode would record the paraphrase, which closes its own candidates (issue 21)
        addon.parts.mode = Mode.REPLAY
        refused = await call(addon, provider_flow(paraphrase), answer=None)
        assert refused.response.status_code == 404
        listing = tctx.master.commands.execute("semula.review.list")
        assert listing.startswith("#1 default lexical"), listing
        assert "approved #1" in tctx.master.commands.execute("semula.review.approve 1")
        served = await call(addon, provider_flow(paraphrase), answer=None)
        assert served.response.headers["x-semula-tier"] == "alias"
        with pytest.raises(exceptions.CommandError, match="no review candidate #9"):
            tctx.master.commands.execute("semula.review.reject 9")

    run(scenario, tmp_path)


def test_an_auto_near_miss_is_forwarded_without_waiting_for_its_review_queue_write(tmp_path):
    """The queue write cannot change an auto-mode miss's decision: the call goes upstream while the store
    thread is busy, and its comment still names the candidate it queued once the answer is in."""
    async def scenario(addon, tctx):
        original = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Please list three quiet hotels near the harbour"}]}
        paraphrase = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Please list three calm hotels near the harbour"}]}
        await call(addon, provider_flow(original))
        release, timed_out = threading.Event(), []
        addon.parts.store.background("a long write", lambda: timed_out.append(not release.wait(30)))
        flow = provider_flow(paraphrase)
        addon.requestheaders(flow)
        await addon.request(flow)  # decided while the store thread is still busy
        release.set()
        state = addon.flows[flow.id]
        assert flow.response is None and state.decision.decision == "miss" and state.queueing is not None
        upstream_answer(flow, "calm hotels")
        addon.responseheaders(flow)
        await addon.response(flow)
        assert timed_out == [False], "the decision waited for the store thread"
        assert "queued for review #1" in flow.comment, flow.comment  # (then closed: its own answer is recorded)

    run(scenario, tmp_path)


def test_record_mode_rerecords_and_keeps_the_normalised_tier(tmp_path):
    async def scenario(addon, tctx):
        await call(addon, provider_flow(), answer="first")
        again = await call(addon, provider_flow(), answer="second")
        assert again.response.headers["x-semula-decision"] == "miss"
        addon.parts.mode = Mode.AUTO
        variant = {"model": "gpt-4o", "messages": [{"role": "user", "content": "HELLO THERE"}]}
        served = await call(addon, provider_flow(variant), answer=None)
        assert served.response.headers["x-semula-tier"] == "normalised"
        assert json.loads(served.response.content)["choices"][0]["message"]["content"] == "second"
        assert served.response.headers["x-semula-entry"] == "1", "re-recording keeps the entry's id"

    run(scenario, tmp_path, semula_mode="record")


class ExplodingEmbedder:
    name = "exploding-model"

    def embed(self, texts):
        raise RuntimeError("the model fell over")

    def truncate(self, text):
        return text


def test_an_embedder_that_raises_leaves_the_proxy_serving(tmp_path):
    async def scenario(addon, tctx):
        assert addon.parts.store.engine.embeddings is not None
        first = await call(addon, provider_flow())
        paraphrase = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello there, friend"}]}
        second = await call(addon, provider_flow(paraphrase), answer="fresh")
        assert first.response.headers["x-semula-decision"] == second.response.headers["x-semula-decision"] == "miss"
        third = await call(addon, provider_flow(), answer=None)
        assert third.response.headers["x-semula-tier"] == "exact"

    async def main():
        addon = SemulaAddon()
        addon.life.embedder = ExplodingEmbedder()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, semula_data_dir=str(tmp_path / "data"), semula_admin=False,
                           confdir=str(tmp_path / "conf"))
            await addon.running()
            await addon.life.store_opened()
            try:
                await scenario(addon, tctx)
            finally:
                addon.done()

    asyncio.run(main())


@pytest.mark.slow
def test_a_2mb_prompt_is_recorded_and_replayed(tmp_path):
    async def scenario(addon, tctx):
        big = {"model": "gpt-4o", "messages": [{"role": "user", "content": "lorem ipsum dolor " * 120_000}]}
        first = await call(addon, provider_flow(big), answer="big answer")
        assert first.response.headers["x-semula-decision"] == "miss"
        again = await call(addon, provider_flow(big), answer=None)
        assert again.response.headers["x-semula-tier"] == "exact"

    run(scenario, tmp_path)


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd"])
def test_compressed_request_bodies_match_their_plain_recording(tmp_path, encoding):
    from mitmproxy.net.encoding import encode

    async def scenario(addon, tctx):
        await call(addon, provider_flow())
        flow = provider_flow(encode(json.dumps(BODY).encode(), encoding), headers={"content-encoding": encoding})
        served = await call(addon, flow, answer=None)
        assert served.response.headers["x-semula-tier"] == "exact"

    run(scenario, tmp_path)


def test_decode_partial_keeps_what_arrived_of_a_compressed_stream_cut_before_its_trailer() -> None:
    import zlib

    from semula.proxy.call.bodies import decode_partial

    compressor = zlib.compressobj(wbits=31)
    frames = b'data: {"a": 1}\n\ndata: [DONE]\n\n'
    flushed = compressor.compress(frames) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert decode_partial(flushed, "gzip") == frames  # no Z_FINISH trailer: the client hung up first
    assert decode_partial(flushed + compressor.flush(zlib.Z_FINISH), "gzip") == frames
    assert decode_partial(b"plain", "identity") == b"plain"
    assert decode_partial(b"not gzip", "gzip") == b"not gzip"
    # A text codec named as the coding is no compression: the answer's bytes stay bytes (mypy found it).
    assert decode_partial(b"plain", "utf-8") == b"plain"


def test_a_recorded_miss_names_its_new_entry_in_the_headers(tmp_path) -> None:
    addon = SemulaAddon()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, semula_data_dir=str(tmp_path))
        asyncio.run(_started(addon))
        try:
            first = asyncio.run(call(addon, provider_flow({"model": "gpt-4o", "messages": [
                {"role": "user", "content": "name the entry"}]})))
            assert first.response.headers["x-semula-decision"] == "miss"
            assert first.response.headers["x-semula-entry"].isdigit()
        finally:
            addon.done()
