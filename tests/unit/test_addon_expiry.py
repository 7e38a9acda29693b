"""max_age on hits, through the addon's hooks (taddons, a real store): warn serves, fail refuses in replay,
re-record forwards in auto and the new answer replaces the recording. The clock is moved, not waited for."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from mitmproxy.test import tflow, tutils

from addon_harness import run_addon
from semula.core.modes import Mode
from semula.proxy.run import expiry

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "How old is this answer?"}]}


def provider_flow():
    request = tutils.treq(method=b"POST", scheme=b"https", host="api.openai.com", port=443,
                          path=b"/v1/chat/completions", authority=b"api.openai.com", content=json.dumps(BODY).encode(),
                          headers=((b"host", b"api.openai.com"), (b"content-type", b"application/json"),
                                   (b"user-agent", b"OpenAI/Python 1.99.0")))
    return tflow.tflow(req=request)


async def call(addon, answer: str | None):
    flow = provider_flow()
    addon.requestheaders(flow)
    await addon.request(flow)
    if flow.response is None and answer is not None:
        flow.response = tutils.tresp(status_code=200, headers=((b"content-type", b"application/json"),),
                                     content=json.dumps({"model": "gpt-4o-2024-08-06",
                                                         "choices": [{"message": {"content": answer}}]}).encode())
        addon.responseheaders(flow)
        await addon.response(flow)
    return flow


def text(flow) -> str:
    return json.loads(flow.response.content)["choices"][0]["message"]["content"]


class Later(datetime):
    @classmethod
    def now(cls, tz=None):  # noqa: ANN001, ANN206 - datetime's signature
        return datetime.now(tz) + timedelta(days=40)


def test_max_age_policies(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario(addon, tctx):
        engine = addon.parts.store.engine

        async def setting(key: str, value: str) -> None:
            await addon.parts.store.run("config", engine.recordings.config_set, "default", key, value, write=True)

        first = await call(addon, "first")
        assert first.response.headers["x-semula-decision"] == "miss"
        entry = await addon.parts.store.run("reading", engine.entry, int(first.response.headers["x-semula-entry"]))
        assert entry.provenance["user_agent"] == "OpenAI/Python 1.99.0"
        assert entry.provenance["answered_model"] == "gpt-4o-2024-08-06"
        await setting("max_age", "30d")
        assert text(await call(addon, None)) == "first", "not expired yet"
        monkeypatch.setattr(expiry, "datetime", Later)
        served = await call(addon, None)  # warn: served, said once
        assert served.response.headers["x-semula-decision"] == "hit" and text(served) == "first"
        await setting("max_age_policy", "re-record")
        rerecorded = await call(addon, "second")
        assert rerecorded.response.headers["x-semula-decision"] == "miss" and text(rerecorded) == "second"
        assert rerecorded.response.headers["x-semula-entry"] == first.response.headers["x-semula-entry"]
        monkeypatch.setattr(expiry, "datetime", datetime)
        assert text(await call(addon, None)) == "second", "the new answer replaced the old one"
        monkeypatch.setattr(expiry, "datetime", Later)
        await setting("max_age_policy", "fail")
        addon.parts.mode = Mode.REPLAY
        refused = await call(addon, None)
        assert refused.response.status_code == 404
        assert "recording older than max_age 30d (recorded 40d ago)" in refused.response.text

    run_addon(scenario, tmp_path)
