"""`semula drift` end to end: send each selected recording again, compare, and (`--update`) re-record in place.

MCP recordings go their own way (`mcpcheck`: only to a server the user registered, in a session of
their own); their rows and re-recordings are made here like the others'.

A re-recording goes through the proxy's own path (`recording_of`: redaction, cleaned headers; the
error policy and a stream's terminal event decide whether it may be recorded) and is written to the
same file, so a pull request's diff shows exactly what the provider changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from semula.core.request.canonical import CanonicalRequest
from semula.core.errorpolicy import unrecordable_answer
from semula.core.provenance import provenance_of
from semula.core.redact import FingerprintKey, redact_text
from semula.core.settings import ProjectSettings
from semula.drift import compare
from semula.drift.mcpcheck import Checked, McpOptions, check_mcp
from semula.drift.select import Selected
from semula.drift.send import Live, NoKey, NotSent, auth_header, send, target_of
from semula.providers import adapter_for
from semula.providers.mcp import MCP
from semula.providers.sse import split_frames
from semula.recordings.entry import Answer, recording_of, semula_version
from semula.recordings.files import UnsafePath, contained, max_file_bytes, write_atomically
from semula.recordings.folder import LOAD_ERRORS, entry_from_file, recording_from_entry
from semula.recordings.format import answer_text, dumps
from semula.recordings.importers.write import folder_key
from semula.store.types import Entry


@dataclass
class Row:
    rel: str
    provider: str
    outcome: str  # same, drifted, updated, skipped, error
    reason: str = ""
    drift: compare.Drift | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.rel, "provider": self.provider, "outcome": self.outcome, "reason": self.reason,
                **({"drift": compare.to_json(self.drift)} if self.drift else {})}


@dataclass(frozen=True)
class DriftOptions:
    base_url: str | None = None
    allow_hosts: frozenset[str] = frozenset()  # --allow-host: generic recordings' hosts the user vouches for
    extra_headers: tuple[tuple[str, str], ...] = ()
    max_tokens: int | None = None
    min_similarity: float = compare.TEXT_DRIFT_BELOW
    update: bool = False
    mcp: McpOptions = McpOptions()  # where MCP recordings may go (--mcp-server) and their credentials


def answer_of(status: int, body: bytes, streamed: bool, adapter: Any) -> compare.Answer:
    frames = split_frames(body) if streamed else []
    usage = adapter.usage_from_frames(frames) if streamed else adapter.usage_from_body(body)
    text = answer_text(body, [f.decode("utf-8", "replace") for f in frames] if streamed else None)
    return compare.Answer(status=status, body=body, streamed=streamed, frames=tuple(frames), text=redact_text(text),
                          prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)


def check_all(root: Path, items: list[Selected], client: httpx.Client, options: DriftOptions, now: datetime,
              environ: Mapping[str, str], progress: Callable[[Row], None] = lambda row: None) -> list[Row]:
    rows: list[Row] = []
    used = 0
    mcp = _check_mcp(root, [i for i in items if i.recording.provider == MCP.name], client, options)
    for item in items:
        recording = item.recording
        if item.rel in mcp:  # no tokens: MCP calls are not counted against --max-tokens
            row = _mcp_row(root, item, mcp[item.rel], options.update, now)
        elif options.max_tokens is not None and used >= options.max_tokens:
            row = Row(item.rel, recording.provider, "skipped", f"over --max-tokens ({used} used)")
        else:
            row = _check_one(root, item, client, options, now, environ)
            if row.drift is not None:
                used += sum(n or 0 for n in row.drift.usage[1])
        rows.append(row)
        progress(row)
    return rows


def _check_one(root: Path, item: Selected, client: httpx.Client, options: DriftOptions, now: datetime,
               environ: Mapping[str, str]) -> Row:
    recording = item.recording
    try:
        target = target_of(recording, options.allow_hosts)
        auth = auth_header(recording.provider, environ) if target.keyed else None
    except (NotSent, NoKey) as e:
        return Row(item.rel, recording.provider, "skipped", str(e))
    try:
        live = send(client, recording, target, auth, options.base_url, list(options.extra_headers))
    except ValueError as e:
        return Row(item.rel, recording.provider, "skipped", str(e))
    except httpx.HTTPError as e:
        return Row(item.rel, recording.provider, "error", redact_text(f"{type(e).__name__}: {e}")[:200])
    adapter = adapter_for(recording.host, recording.endpoint)
    live_streamed = dict((k.lower(), v) for k, v in live.headers).get("content-type", "").startswith(
        "text/event-stream")
    drift = compare.compare(answer_of(recording.status, recording.body, recording.streamed, adapter),
                            answer_of(live.status, live.body, live_streamed, adapter), options.min_similarity)
    row = Row(item.rel, recording.provider, "drifted" if drift.drifted else "same", drift=drift)
    if drift.drifted and options.update:
        row.outcome, row.reason = _rerecord(root, item, live, live_streamed, adapter, now)
    return row


def _check_mcp(root: Path, items: list[Selected], client: httpx.Client, options: DriftOptions) -> dict[str, Checked]:
    if not items:
        return {}
    try:
        key: FingerprintKey | None = folder_key(root, create=False)  # the live answer's secrets tag as recorded
    except UnsafePath:
        key = None
    return check_mcp(items, client, options.mcp, key, max_file_bytes(), options.min_similarity)


def _mcp_row(root: Path, item: Selected, checked: Checked, update: bool, now: datetime) -> Row:
    row = Row(item.rel, MCP.name, checked.outcome, redact_text(checked.reason), checked.drift)
    if row.outcome == "drifted" and update and checked.live is not None:
        live = checked.live
        streamed = dict((k.lower(), v) for k, v in live.headers).get("content-type", "").startswith(
            "text/event-stream")
        row.outcome, why = _rerecord(root, item, live, streamed, MCP, now)
        row.reason = "; ".join(r for r in (row.reason, why) if r)
    return row


def _rerecord(root: Path, item: Selected, live: Live, streamed: bool, adapter: Any, now: datetime) -> tuple[str, str]:
    """Write the live answer over the recording's file; (outcome, reason)."""
    recording = item.recording
    frames = split_frames(live.body) if streamed else []
    location = next((v for k, v in live.headers if k.lower() == "location"), None)
    if why_not := unrecordable_answer(live.status, False, live.body, streamed,
                                      lambda: adapter.stream_complete(frames), location):
        return "drifted", why_not.replace("--set semula_record_errors=true", "re-record by hand")
    usage = adapter.usage_from_frames(frames) if streamed else adapter.usage_from_body(live.body)
    provenance = provenance_of((recording.provenance or {}).get("user_agent"), live.body, streamed, semula_version())
    answer = Answer(host=recording.host, body=live.body, status=live.status, headers=live.headers, streamed=streamed,
                    usage=usage, upstream_ms=round(live.upstream_ms, 1), provenance=provenance)
    try:
        key = folder_key(root, create=False)  # the folder's salt: the answer's secrets tag as its requests' do
        new = recording_of(recording.project, CanonicalRequest.from_json(recording.request), ProjectSettings(),
                           answer, key=key, occurrence=recording.occurrence)
        text = dumps(recording_from_entry(Entry.of(new, created_at=now)))
        entry_from_file(text.encode(), lambda _project: ProjectSettings(), FingerprintKey.generate())
        write_atomically(contained(root, item.rel), text)
    except LOAD_ERRORS as e:
        return "drifted", f"not updated: {e}"
    return "updated", "re-recorded in place"
