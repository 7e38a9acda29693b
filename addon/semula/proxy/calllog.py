"""What each call leaves behind: a call-log row, one console line and the flow's comment in mitmweb.

All three say the same thing (decision, tier, score, entry, why) for the notebooks, the terminal
and the web UI.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from semula.core.decision import Decision
from semula.core.redact import redact_text
from semula.providers.base import Usage
from semula.proxy.flowstate import FlowState

COMMENT_ERROR_CHARS = 300
# Control characters (newlines forge lines, ESC drives the terminal), bidi overrides and lone
# surrogates (a raw header byte) never reach the terminal as they are.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def terminal_safe(text: str) -> str:
    """`text` with every unsafe character written as its Python escape (`\\n`, `\\x1b`, `\\udcff`)."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class TerminalSafeLog(logging.Filter):
    """Escapes semula's log messages (they can quote a project name or a path) like console lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        safe = terminal_safe(message)
        if safe != message:
            record.msg, record.args = safe, None
        return True


TERMINAL_SAFE_LOG = TerminalSafeLog()


def call_row(state: FlowState, method: str, mode: str, status: int | None, *, upstream_ms: float | None,
             usage: Usage | None, entry_id: int | None, recorded: bool) -> dict[str, Any]:
    decision = state.decision
    assert decision is not None
    canonical = state.canonical
    fast = state.fast
    if canonical is not None:
        provider, model = canonical.provider, canonical.model
    elif fast is not None:
        provider, model = fast.provider, fast.model
    else:
        provider, model = (state.adapter.name if state.adapter else None), None
    served = decision.action == "serve"
    near = state.outcome.near if state.outcome else None
    row = {
        # when the request arrived: a stream recorded at its terminal event logs when its flow ends,
        # after the repeats it already served, and the log must still read in the order calls came
        "ts": state.started_at.replace(tzinfo=UTC) if state.started_at is not None else datetime.now(UTC),
        "project": state.project,
        "provider": provider, "host": state.host, "method": method, "path": _logged_path(state.path),
        "model": model, "mode": mode,
        "decision": decision.decision, "tier": decision.tier, "score": decision.score, "entry_id": entry_id,
        "bypass_reason": decision.bypass_reason or (state.outcome.fuzzy_bypass_reason if state.outcome else None),
        "streamed": state.streamed, "status": status,
        "decision_ms": state.decision_ms, "upstream_ms": upstream_ms,
        "recorded_upstream_ms": state.served.upstream_ms if served else None,
        "recorded_prompt_tokens": state.served.usage.prompt_tokens if served else None,
        "recorded_completion_tokens": state.served.usage.completion_tokens if served else None,
        "request_fp": state.request_fp, "normalised_fp": state.normalised_fp,
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
        "recorded": recorded, "error": state.error, "fast": fast is not None,
    }
    if near is not None and near.best is not None:
        best = near.best
        row.update(candidate_tier=best.verdict.tier, candidate_score=best.verdict.score,
                   candidate_entry_id=best.entry_id, guard_reason=best.verdict.guard_reason)
    return row


@lru_cache(maxsize=1024)
def _logged_path(path: str) -> str:
    """The path with key-like strings redacted (the same few paths come again and again)."""
    return redact_text(path)


def console_line(state: FlowState, row: dict[str, Any], recorded: bool) -> str:
    decision = state.decision
    assert decision is not None
    took = f"{state.decision_ms:.1f} ms" if state.decision_ms is not None else "-"
    entry_text = f" #{row['entry_id']}" if row["entry_id"] is not None else ""
    tier = f" {decision.tier}" if decision.tier != "none" else ""
    extra = f" ({decision.bypass_reason})" if decision.bypass_reason else ""
    if recorded:
        extra += " · recorded"
    elif state.error and decision.action != "refuse":
        extra += f" · {state.error}"
    if queued := queued_text(state):
        extra += f" · {queued}"
    status = row["status"] if row["status"] is not None else ("cut" if state.cut else "no response")
    return terminal_safe(f"semula: {state.project} {row['provider']} {row['method']} {state.host}{row['path']} → "
                         f"{decision.decision}{tier}{entry_text}{extra} · {status} · {took}")


def queued_text(state: FlowState) -> str | None:
    """What says this call queued review candidates ("queued for review #7 (…)"), or None."""
    near = state.outcome.near if state.outcome else None
    if near is None or not near.queued:
        return None
    ids = ", ".join(f"#{c.candidate_id}" for c in near.queued)
    first = near.queued[0]
    return f"queued for review {ids} (`semula review show {first.candidate_id}`)"


def flow_comment(decision: Decision, entry: int | None, state: FlowState) -> str:
    """Short ASCII words first ("hit exact", "miss", "refused"): they read in mitmweb's comment column."""
    head = "refused" if decision.action == "refuse" else decision.decision
    if decision.tier != "none":
        head += f" {decision.tier}"
    parts = [head]
    if decision.score is not None:
        parts.append(f"score {decision.score:.3f}")
    if entry is not None:
        parts.append(f"entry #{entry}")
    parts.append(f"project {state.project}")
    if decision.bypass_reason:
        parts.append(f"bypass: {decision.bypass_reason}")
    if queued := queued_text(state):
        parts.append(queued)
    if state.error:
        parts.append(state.error[:COMMENT_ERROR_CHARS])
    return " · ".join(parts)


@lru_cache(maxsize=4096)
def wire_semula_headers(decision: Decision) -> tuple[tuple[bytes, bytes], ...]:
    """`semula_headers` encoded for the wire, once per distinct decision (a hit's is the same every time)."""
    return tuple((k.encode(), v.encode()) for k, v in semula_headers(decision).items())


def semula_headers(decision: Decision, entry_id: int | None = None) -> dict[str, str]:
    """The x-semula-* headers every answered call carries; score and entry only when there is one (an
    empty header reads as a value to clients that parse it)."""
    entry = decision.entry_id if decision.entry_id is not None else entry_id
    headers = {"x-semula-decision": decision.decision, "x-semula-tier": decision.tier}
    if decision.score is not None:
        headers["x-semula-score"] = f"{decision.score:.3f}"
    if entry is not None:
        headers["x-semula-entry"] = str(entry)
    return headers
