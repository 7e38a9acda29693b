"""Applying other proxies' writes to this engine's memory (a shared store that `follow`s changes).

A recording made through another proxy is added to the fingerprint index (so it is a hit here
within a second); a changed alias set reloads the aliases; a review decision reloads the open
review keys; a deleted recording, a settings change (which may re-fingerprint) or a lost stretch
of the log reloads everything (`Engine.apply_changes`). Our own writes come back too: applying
them again is harmless. The work runs where the engine's owner says (`dispatch`: the proxy's
store thread).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from semula.store.base import ChangeLog, RecordingStore

RELOAD_KINDS = {"entry_deleted", "settings", "reload"}
ENTRY_BATCH = 500


class StoreChange(Protocol):
    """One row of the store's change log, as far as the engine reads it."""

    kind: str  # entry | entry_deleted | alias | candidate | settings | reload
    ref: int | None  # the entry id, for kind "entry"


class Follower(Protocol):
    """What following asks of the engine (engine.py imports this module: no import back)."""

    store: RecordingStore
    dispatch: Callable[[Callable[[], None]], Any]

    def apply_changes(self, changes: list[StoreChange]) -> None: ...


def start_following(engine: Follower) -> bool:
    """Follow the store's change log if it has one (Postgres); from the position before the first load."""
    if not engine.store.follows_changes:
        return False
    log = cast(ChangeLog, engine.store)  # declared by `follows_changes`
    log.follow(log.change_position(), lambda changes: engine.dispatch(lambda: engine.apply_changes(changes)))
    return True


def run_here(fn: Callable[[], None]) -> None:
    fn()
