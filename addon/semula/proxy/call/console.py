"""The console: one line per call, made safe for the terminal (`proxy/run/terminal.py`), written once per loop turn."""

from __future__ import annotations

import asyncio
import sys

from semula.calllog.schema import CallRow
from semula.providers.mcp import call_label
from semula.proxy.call.flowstate import FlowState
from semula.proxy.call.headers import queued_text
from semula.proxy.run.terminal import terminal_safe


def console_line(state: FlowState, row: CallRow, recorded: bool) -> str:
    """The call's console line, from its call-log row: project, provider, request → decision · status · time."""
    decision = state.decision
    assert decision is not None
    took = f"{state.decision_ms:.1f} ms" if state.decision_ms is not None else "-"
    entry_text = f" #{row.entry_id}" if row.entry_id is not None else ""
    tier = f" {decision.tier_label}" if decision.tier is not None else ""
    extra = f" ({decision.bypass_reason})" if decision.bypass_reason else ""
    if recorded:
        extra += " · recorded"
    elif state.error and decision.action != "refuse":
        extra += f" · {state.error}"
    if recorded and state.outcome is not None and state.outcome.near is not None and state.outcome.near.queued:
        # Recording the answer closed the candidates this call queued (`Recordings.record`): naming them
        # as queued would send the reader to `semula review show` for a closed one.
        ids = ", ".join(f"#{c.candidate_id}" for c in state.outcome.near.queued)
        extra += f" · review candidate(s) {ids} closed: this call's recording answers the request"
    elif queued := queued_text(state):
        extra += f" · {queued}"
    status = row.status if row.status is not None else ("cut" if state.cut else "no response")
    called = call_label(state.canonical.body) if state.mcp is not None and state.canonical is not None else None
    target = f"{state.host}{row.path}" + (f" {called}" if called else "")  # an MCP call names its method and tool
    return terminal_safe(f"semula: {state.project} {row.provider} {row.method} {target} → "
                         f"{decision.decision}{tier}{entry_text}{extra} · {status} · {took}")


class CallLines:
    """The call lines, written together once per turn of the event loop.

    A flushed write is a system call, and one per call was the largest cost of a hit after the response
    itself: lines that end in the same turn go out in one write, in order, before the loop waits again.
    """

    def __init__(self) -> None:
        self._pending: list[str] = []

    def write(self, line: str) -> None:
        self._pending.append(line)
        if len(self._pending) == 1:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop (a test calling a hook directly): at once
                self.flush()

    def flush(self) -> None:
        lines, self._pending = self._pending, []
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
