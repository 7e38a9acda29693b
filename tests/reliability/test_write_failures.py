"""A failed write (a full disk) does not stop hits (reliability item 5).

After the first failed write the store thread used to drop the engine, so recorded requests
were no longer served. A failed write now loses only that recording: the index in memory keeps
serving hits, and the call log says why the new one was not recorded.
"""

from __future__ import annotations

import duckdb

from unit.test_addon import BODY, call, provider_flow, run


def test_hits_are_still_served_after_a_failed_write(tmp_path, monkeypatch, capsys) -> None:
    async def scenario(addon, tctx):
        first = await call(addon, provider_flow())
        assert first.response.headers["x-semula-decision"] == "miss"
        engine = addon.parts.store.engine

        def disk_full(*args, **kwargs):
            raise duckdb.IOException("IO Error: No space left on device")

        monkeypatch.setattr(engine.recordings, "record", disk_full)
        other = {**BODY, "messages": [{"role": "user", "content": "another question"}]}
        failed = await call(addon, provider_flow(other))
        assert failed.response.headers["x-semula-decision"] == "miss"
        assert addon.parts.store.engine is engine, "a failed write must not drop the store"
        hit = await call(addon, provider_flow(), answer=None)
        assert hit.response.headers["x-semula-decision"] == "hit", "recorded requests must still be served"

    run(scenario, tmp_path)
    assert "not recorded: IO Error: No space left on device" in capsys.readouterr().out
