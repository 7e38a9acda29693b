"""The addon under mitmproxy's own test helpers (taddons): one configured SemulaAddon with a real store, no network."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mitmproxy.test import taddons

from semula.proxy.addon import SemulaAddon


def run_addon(scenario: Callable[[SemulaAddon, Any], Awaitable[Any]], tmp_path: Path, **options: Any) -> Any:
    """Run `scenario(addon, tctx)` on a running addon whose data dir is under `tmp_path`; the addon is done after."""

    async def main() -> Any:
        addon = SemulaAddon()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, semula_data_dir=str(tmp_path / "data"), semula_admin=False,
                           confdir=str(tmp_path / "conf"), **options)
            await addon.running()
            await addon.life.store_opened()  # it opens beside the ready line; the scenarios need it
            try:
                return await scenario(addon, tctx)
            finally:
                addon.done()

    return asyncio.run(main())
