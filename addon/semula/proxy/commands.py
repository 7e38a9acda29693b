"""The addon's commands for mitmweb and the console, and the admin operations they share with the CLI.

A plain part of `SemulaAddon`: it sits in the addon's `addons` list, where mitmproxy collects the
`semula.*` commands, and reads the shared `ProxyParts` (current mode, settings, store and fast path).
"""

from __future__ import annotations

from typing import Any

from mitmproxy import command, exceptions

from semula.engine.operations import run_operation
from semula.proxy.call.parts import ProxyParts


class SemulaCommands:
    """`semula.*` commands: each runs one admin operation on the store thread."""

    def __init__(self, proxy: ProxyParts) -> None:
        self.proxy = proxy

    def dispatch(self, method: str, params: dict[str, Any]) -> Any:
        """One admin operation (from the CLI's admin endpoint or a command), run on the store thread."""
        result = self.proxy.store.admin(lambda engine: run_operation(engine, method, params))
        if method == "memory":  # the raw-request fast path is the proxy's, not the engine's
            fast = self.proxy.fast
            result = {**result, "fast_path_entries": len(fast), "fast_path_bytes": fast.nbytes()}
        return result

    def _command(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return self.dispatch(method, params)
        except Exception as e:
            raise exceptions.CommandError(f"semula: {e}") from None

    @command.command("semula.review.list")
    def review_list(self) -> str:
        """Open review candidates: id, project, tier, score, guard reason, both texts."""
        rows = self._command("review.list", {})
        if not rows:
            return "semula: no open review candidates"
        return "\n".join(
            f"#{r['id']} {r['project']} {r['tier']} {r['score']:.3f} entry #{r['entry_id']} "
            f"guard: {r['guard_reason'] or 'pass'} | {r['request']} ⇄ {r['recorded']}" for r in rows
        )

    @command.command("semula.review.approve")
    def review_approve(self, candidate_id: int) -> str:
        """Approve a review candidate: its request is served the recorded answer (tier alias)."""
        result = self._command("review.approve", {"id": candidate_id})
        return f"semula: approved #{candidate_id}: alias to entry #{result['alias_to']}"

    @command.command("semula.review.reject")
    def review_reject(self, candidate_id: int) -> str:
        """Reject a review candidate: that pairing is never queued or served again."""
        self._command("review.reject", {"id": candidate_id})
        return f"semula: rejected #{candidate_id}"

    @command.command("semula.status")
    def status(self) -> str:
        """Mode, data dir and store state of the semula addon."""
        proxy = self.proxy
        store = "open" if proxy.store.engine else f"unavailable: {proxy.store.problem}"
        return f"mode {proxy.mode.value} · data dir {proxy.settings.data_dir} · store {store}"
