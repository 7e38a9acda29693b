"""The raw-request fast path in the addon (taddons, a real store): it never serves what the canonical tiers
would refuse, and a fast hit leaves the same headers, comment and call-log row as a canonical one."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st
from mitmproxy.http import Headers
from test_addon import call, provider_flow, run

from semula.proxy.addon import SemulaAddon
from semula.proxy.call.flowstate import header_dict

VOLATILE = {"ts", "decision_ms", "fast"}


def logged(addon: SemulaAddon) -> list[dict]:
    """Capture the call-log rows the addon writes from now on (they still reach the Parquet log)."""
    rows: list[dict] = []
    append = addon.parts.calls.append
    addon.parts.calls.append = lambda row: (rows.append(row), append(row))[1]
    return rows


def semula_headers(flow) -> dict[str, str]:
    return {k: v for k, v in flow.response.headers.items() if k.startswith("x-semula-")}


async def record_then_replay(addon, tctx, **flow_args):
    """Record one call in auto mode, then switch to replay (the fast map keeps what it learnt)."""
    first = await call(addon, provider_flow(**flow_args))
    assert first.response.headers["x-semula-decision"] == "miss"
    tctx.configure(addon, semula_mode="replay")


def test_a_fast_hit_leaves_what_a_canonical_hit_leaves(tmp_path):
    async def scenario(addon, tctx):
        await record_then_replay(addon, tctx)
        rows = logged(addon)
        addon.parts.fast = type(addon.parts.fast)()  # forget the recording: the next hit takes the canonical tiers
        canonical = await call(addon, provider_flow(), answer=None)
        fast = await call(addon, provider_flow(), answer=None)
        assert [r["fast"] for r in rows] == [False, True] and addon.parts.fast.served == 1
        assert semula_headers(fast) == semula_headers(canonical) == {
            "x-semula-decision": "hit", "x-semula-tier": "exact", "x-semula-score": "1.000",
            "x-semula-entry": canonical.response.headers["x-semula-entry"]}
        assert fast.response.content == canonical.response.content and fast.response.status_code == 200
        assert fast.response.headers.fields == canonical.response.headers.fields
        assert fast.comment == canonical.comment and fast.marked == canonical.marked
        assert {k: v for k, v in rows[1].items() if k not in VOLATILE} == {
            k: v for k, v in rows[0].items() if k not in VOLATILE}
        assert rows[1]["provider"] == "openai" and rows[1]["model"] == "gpt-4o" and rows[1]["request_fp"]

    run(scenario, tmp_path)


def test_a_recorded_request_is_served_fast_at_once_and_normalised_hits_too(tmp_path):
    variant = {"model": "gpt-4o", "messages": [{"role": "user", "content": "  HELLO   THERE. "}]}

    async def scenario(addon, tctx):
        await record_then_replay(addon, tctx)
        rows = logged(addon)
        await call(addon, provider_flow(), answer=None)
        first = await call(addon, provider_flow(variant), answer=None)
        again = await call(addon, provider_flow(variant), answer=None)
        assert [(r["tier"], r["fast"]) for r in rows] == [("exact", True), ("normalised", False), ("normalised", True)]
        assert again.comment == first.comment and semula_headers(again) == semula_headers(first)
        assert rows[2]["normalised_fp"] == rows[1]["normalised_fp"] is not None

    run(scenario, tmp_path)


def test_a_behaviour_header_the_recording_lacks_is_refused(tmp_path):
    async def scenario(addon, tctx):
        await record_then_replay(addon, tctx)
        beta = await call(addon, provider_flow(headers={"openai-beta": "assistants=v2"}), answer=None)
        assert beta.response.status_code == 404 and beta.response.headers["x-semula-decision"] == "miss"
        plain = await call(addon, provider_flow(headers={"x-request-id": "42"}), answer=None)  # one that does not matter
        assert plain.response.headers["x-semula-decision"] == "hit" and addon.parts.fast.served == 1

    run(scenario, tmp_path)


def test_another_project_is_refused(tmp_path):
    async def scenario(addon, tctx):
        await record_then_replay(addon, tctx)
        other = await call(addon, provider_flow(headers={"x-semula-project": "beta"}), answer=None)
        assert other.response.status_code == 404 and addon.parts.fast.served == 0

    run(scenario, tmp_path)


def test_the_bypass_header_is_never_served(tmp_path):
    async def scenario(addon, tctx):
        await record_then_replay(addon, tctx)
        bypassed = await call(addon, provider_flow(headers={"x-semula-no-cache": "1"}), answer=None)
        assert bypassed.response.headers["x-semula-decision"] == "bypass" and addon.parts.fast.served == 0

    run(scenario, tmp_path)


def test_another_api_key_with_namespace_by_key_is_refused(tmp_path):
    async def scenario(addon, tctx):
        await record_then_replay(addon, tctx, headers={"authorization": "Bearer sk-team-a-0000000000000000"})
        same = await call(addon, provider_flow(headers={"authorization": "Bearer sk-team-a-0000000000000000"}),
                          answer=None)
        assert same.response.headers["x-semula-decision"] == "hit" and addon.parts.fast.served == 1
        other = await call(addon, provider_flow(headers={"authorization": "Bearer sk-team-b-1111111111111111"}),
                           answer=None)
        assert other.response.status_code == 404 and addon.parts.fast.served == 1

    run(scenario, tmp_path, semula_namespace_by_key=True)


def test_ordered_repeats_never_use_the_fast_path(tmp_path):
    async def scenario(addon, tctx):
        for answer in ("first", "second"):
            await call(addon, provider_flow(headers={"x-semula-run": "r1"}), answer=answer)
        tctx.configure(addon, semula_mode="replay", semula_repeats_exhausted="refuse")
        texts = []
        for _ in range(3):
            flow = await call(addon, provider_flow(headers={"x-semula-run": "r2"}), answer=None)
            texts.append(json.loads(flow.response.content).get("choices", [{}])[0].get("message", {}).get("content"))
        assert texts == ["first", "second", None] and len(addon.parts.fast) == 0 and addon.parts.fast.served == 0

    run(scenario, tmp_path, semula_repeats="sequence")


def test_a_deleted_entry_is_not_served(tmp_path):
    async def scenario(addon, tctx):
        await record_then_replay(addon, tctx)
        served = await call(addon, provider_flow(), answer=None)
        addon.commands.dispatch("entries.delete", {"id": int(served.response.headers["x-semula-entry"])})
        gone = await call(addon, provider_flow(), answer=None)
        assert gone.response.status_code == 404 and addon.parts.fast.served == 1 and addon.parts.fast.stale == 1

    run(scenario, tmp_path)


def test_a_settings_change_takes_the_canonical_tiers_again(tmp_path):
    variant = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello there 12345"}]}

    async def scenario(addon, tctx):
        await call(addon, provider_flow({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello there 1"}]}))
        addon.commands.dispatch("config.set", {"project": "default", "key": "scrub_patterns", "value": [r"\d+"]})
        tctx.configure(addon, semula_mode="replay")
        for _ in range(2):
            hit = await call(addon, provider_flow(variant), answer=None)
            assert hit.response.headers["x-semula-tier"] == "normalised"
        assert addon.parts.fast.served == 1
        addon.commands.dispatch("config.set", {"project": "default", "key": "scrub_patterns", "value": []})
        refused = await call(addon, provider_flow(variant), answer=None)
        assert refused.response.status_code == 404 and addon.parts.fast.served == 1

    run(scenario, tmp_path)


def test_a_new_exact_recording_shadows_a_remembered_normalised_hit(tmp_path):
    variant = {"model": "gpt-4o", "messages": [{"role": "user", "content": "  HELLO   THERE. "}]}

    async def scenario(addon, tctx):
        await call(addon, provider_flow())
        for _ in range(2):
            normalised = await call(addon, provider_flow(variant), answer=None)
            assert normalised.response.headers["x-semula-tier"] == "normalised"
        assert addon.parts.fast.served == 1
        tctx.configure(addon, semula_mode="record")
        await call(addon, provider_flow(variant), answer="its own answer")
        tctx.configure(addon, semula_mode="replay")
        exact = await call(addon, provider_flow(variant), answer=None)
        assert exact.response.headers["x-semula-tier"] == "exact" and addon.parts.fast.stale == 1
        assert json.loads(exact.response.content)["choices"][0]["message"]["content"] == "its own answer"

    run(scenario, tmp_path)


names = st.sampled_from([b"Content-Type", b"content-type", b"OpenAI-Beta", b"openai-beta", b"X-Api-Key", b"\xc3\x84-x",
                         b"\xc3\xa4-x", b"Authorization"])


@given(st.lists(st.tuples(names, st.binary(max_size=12)), max_size=8))
def test_the_one_pass_header_dict_is_the_one_items_gives(fields):
    headers = Headers(fields)
    assert header_dict(headers) == {k.lower(): v for k, v in headers.items()}


def test_the_per_call_console_line_can_be_silenced(tmp_path, capsys):
    async def scenario(addon, tctx):
        rows = logged(addon)
        await call(addon, provider_flow())
        tctx.configure(addon, semula_console_calls=False)
        await call(addon, provider_flow(), answer=None)
        assert [r["decision"] for r in rows] == ["miss", "hit"]

    run(scenario, tmp_path)
    lines = [line for line in capsys.readouterr().out.splitlines() if "→" in line]
    assert len(lines) == 1 and "→ miss" in lines[0]


def test_the_map_is_bounded_least_recently_used_out_and_belongs_to_one_store():
    from semula.core.decision import Match
    from semula.core.fasthit import FastHit
    from semula.proxy.call.fastpath import FastPath

    fast, store, reopened = FastPath(max_entries=2), object(), object()
    hit = FastHit(Match("exact", 1), "fp2:a", None, (), "openai", None)
    for key in ("a", "b"):
        fast.put(store, ("p", key.encode()), hit)
    assert fast.get(store, ("p", b"a")) is hit  # now the most recently used
    fast.put(store, ("p", b"c"), hit)
    assert len(fast) == 2 and fast.get(store, ("p", b"b")) is None and fast.get(store, ("p", b"a")) is hit
    assert fast.get(reopened, ("p", b"a")) is None  # another store's salt: nothing carries over
    fast.put(reopened, ("p", b"d"), hit)
    assert len(fast) == 1
