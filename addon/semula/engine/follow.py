"""Applying other proxies' writes to this engine's memory (a shared store that `follow`s changes).

A recording made through another proxy is added to the fingerprint index (so it is a hit here
within a second); a changed alias set reloads the aliases; a review decision reloads the open
review keys; a deleted recording, a settings change (which may re-fingerprint) or a lost stretch
of the log reloads everything. Our own writes come back too: applying them again is harmless.
The work runs where the engine's owner says (`dispatch`: the proxy's store thread).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

Engine = Any  # the engine (engine.py imports this module: no import back)

log = logging.getLogger("semula")

RELOAD_KINDS = {"entry_deleted", "settings", "reload"}
ENTRY_BATCH = 500


def start_following(engine: Engine) -> bool:
    """Follow the store's change log if it has one (Postgres); from the position before the first load."""
    if not engine.store.follows:
        return False
    position = engine.store.change_position()  # type: ignore[attr-defined]
    engine.store.follow(position, lambda changes: engine.dispatch(lambda: apply_changes(engine, changes)))
    return True


def apply_changes(engine: Engine, changes: list[Any]) -> None:
    kinds = {c.kind for c in changes}
    if kinds & RELOAD_KINDS:
        engine.recordings.reload()
        return
    entry_ids = sorted({c.ref for c in changes if c.kind == "entry" and c.ref is not None})
    for start in range(0, len(entry_ids), ENTRY_BATCH):
        # the answers too: the hit is served from memory, even if the server goes down later
        for entry in engine.store.entries_by_ids(entry_ids[start:start + ENTRY_BATCH]):  # type: ignore[attr-defined]
            engine.index.add(entry.id, entry.project, entry.request_fp, entry.normalised_fp)
            engine.answers.put(entry)
    if "alias" in kinds:
        engine.index.replace_aliases(engine.store.alias_rows())
    if "candidate" in kinds:
        engine.review.reload()


def run_here(fn: Callable[[], None]) -> None:
    fn()
