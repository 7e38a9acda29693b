"""The human review queue: near-matches a person approves (an alias) or rejects (forever).

It keeps the ADR's rules: only same-speaker conversations of the same shape (provider,
endpoint, stream mode, model) are candidates (the verdict's `review`), at most 3 per missed
request, never the same (request, entry) pairing twice, a rejection is kept forever (that
pairing is never queued or served again), approval writes an alias and closes the request's
other open candidates, an answered request (served, or recorded by auto/record, even by the
call that queued them) closes its own. Approval never deletes a recording: a request with a
recording of its own is refused (see `approve`).
Depends on the store and the fingerprint index only. Runs on the store thread; `has_open`
is safe from any thread.
"""

from __future__ import annotations

import builtins
import difflib
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from semula.core.calibration import counts_for_calibration
from semula.core.request.canonical import CanonicalRequest
from semula.core.cascade import Candidate
from semula.core.checks import Shape, shapes_differ
from semula.core.nearmatch import Verdict
from semula.core.tiers import Tier
from semula.engine.calibrated import verdict_stratum
from semula.engine.index import FingerprintIndex
from semula.recordings import shared
from semula.recordings.folder import RecordingsFolder, relpath_of
from semula.recordings.format import body_fields
from semula.store.base import ReviewStore
from semula.calllog.schema import ReviewEvent
from semula.store.types import AliasRequest, Entry, NewCandidate, ReviewCandidate

MAX_CANDIDATES = 3


def shorten(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def word_diff(old: str, new: str) -> str:
    """A word-level diff: [-recorded-] {+incoming+}."""
    a, b = old.split(), new.split()
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.extend(a[i1:i2])
            continue
        if i2 > i1:
            out.append("[-" + " ".join(a[i1:i2]) + "-]")
        if j2 > j1:
            out.append("{+" + " ".join(b[j1:j2]) + "+}")
    return " ".join(out)


def shape_json(shape: Shape) -> dict[str, Any]:
    return {"provider": shape.provider, "method": shape.method, "endpoint": shape.endpoint,
            "model": shape.model, "stream": shape.stream}


def answer_of(entry: Entry | None) -> tuple[str, str]:
    """(the recorded answer as a person reads it, "text" | "body"): a stream's assembled text, a JSON
    answer's text; the body itself when it holds no text (a tool call, an embedding, an error)."""
    if entry is None:
        return "(the recording was deleted)", "body"
    text = body_fields(entry.body, entry.streamed).get("answer_text")
    if text:
        return text, "text"
    return entry.body.decode("utf-8", errors="replace"), "body"


class ReviewQueue:
    def __init__(self, store: ReviewStore, index: FingerprintIndex,
                 log: Callable[[ReviewEvent], None] | None = None, folder: RecordingsFolder | None = None):
        self.store = store  # only its review rows, aliases and recordings by id
        self.folder = folder  # approvals and rejections are written there too, for teammates and CI
        self.index = index
        self.log = log
        self.on_verdict: Callable[[str], None] | None = None  # approve/reject in a project (calibrated mode relearns)
        self._lock = threading.Lock()
        self._open: set[tuple[str, str]] = set()

    def _event(self, event: str, candidate: ReviewCandidate, recorded: Entry | None = None) -> None:
        """Log `event`; with the `recorded` entry (a verdict's), the pair's stratum too, as calibration counts it."""
        if self.log is None:
            return
        stratum = (verdict_stratum(CanonicalRequest.from_json(recorded.canonical).last_user_text(),
                                   candidate.request_text) if recorded is not None else None)
        self.log(ReviewEvent(
            event=event, candidate_id=candidate.id, project=candidate.project, tier=candidate.tier,
            score=candidate.score, guard_reason=candidate.guard_reason, request_fp=candidate.request_normalised_fp,
            entry_id=candidate.entry_id, stratum=stratum,
            calibrates=counts_for_calibration(candidate.reason, candidate.guard_reason),
        ))

    def has_open(self, project: str, normalised_fp: str) -> bool:
        with self._lock:
            return (project, normalised_fp) in self._open

    def reload(self) -> None:
        keys = self.store.open_request_keys()
        with self._lock:
            self._open = keys

    def _set_open(self, project: str, normalised_fp: str, is_open: bool) -> None:
        with self._lock:
            (self._open.add if is_open else self._open.discard)((project, normalised_fp))

    def queue(self, project: str, request: CanonicalRequest, request_fp: str, normalised_fp: str,
              candidates: list[Candidate], paired: dict[int, str]) -> list[Candidate]:
        """Queue the best reviewable candidates (they come sorted, best first); return them with their ids."""
        chosen: list[Candidate] = []
        for candidate in candidates:
            if sum(1 for s in paired.values() if s == "open") >= MAX_CANDIDATES:
                break
            if not candidate.verdict.review or candidate.entry_id in paired:
                continue
            paired = {**paired, candidate.entry_id: "open"}
            chosen.append(candidate)
        if not chosen:
            return []
        rows = self.store.add_candidates(project, request_fp, normalised_fp, request.to_json(),
                                         request.last_user_text(), [
            NewCandidate(c.verdict.tier, c.verdict.score, c.verdict.guard_reason, c.verdict.reason, c.entry_id)
            for c in chosen
        ])
        queued = []
        for candidate, row in zip(chosen, rows):
            self._event("queued", row)
            queued.append(Candidate(candidate.entry_id, candidate.verdict, row.id))
        self._set_open(project, normalised_fp, True)
        return queued

    def answered(self, project: str, normalised_fp: str, created_before: datetime | None = None) -> int:
        """A request got an answer (served, or recorded by a later call): close its open candidates."""
        return self.answered_many([(project, normalised_fp)], created_before)

    def answered_many(self, requests: builtins.list[tuple[str, str]], created_before: datetime | None = None) -> int:
        """`answered` for several requests (project, normalised fp): their candidates closed in one write."""
        requests = [key for key in dict.fromkeys(requests) if self.has_open(*key)]
        rows = [row for project, fp in requests for row in self.store.open_candidates_for(project, fp, created_before)]
        self._close(rows)
        for project, fp in requests:
            if not self.store.open_candidates_for(project, fp):
                self._set_open(project, fp, False)
        return len(rows)

    def open_candidate(self, project: str, normalised_fp: str) -> Candidate | None:
        """The request's best open candidate (queued by an earlier call), for a miss to name."""
        if not self.has_open(project, normalised_fp):
            return None
        rows = sorted(self.store.open_candidates_for(project, normalised_fp), key=lambda r: (-r.score, r.id))
        if not rows:
            return None
        row = rows[0]
        verdict = Verdict(Tier(row.tier), row.score, serve=False, review=True, reason=row.reason,
                          guard_reason=row.guard_reason)
        return Candidate(row.entry_id, verdict, row.id)

    def recording_deleted(self, entry_id: int) -> None:
        """Before a recording is deleted: close its open candidates, with a `closed` event in the log
        (the store would close them silently, and the report would count them open forever)."""
        rows = self.store.candidates(None, "open", limit=100_000, entry_id=entry_id)
        self.store.set_candidate_status([r.id for r in rows], "closed")
        for row in rows:
            self._event("closed", row)
            if not self.store.open_candidates_for(row.project, row.request_normalised_fp):
                self._set_open(row.project, row.request_normalised_fp, False)

    # --- the human's side --------------------------------------------------------------------

    def list(self, project: str | None = None, status: str | None = "open") -> list[dict[str, Any]]:
        rows = self.store.candidates(project, status)
        entries = self.store.canonicals_by_ids([r.entry_id for r in rows])
        out = []
        for row in rows:
            recorded = entries.get(row.entry_id)
            canonical = CanonicalRequest.from_json(recorded) if recorded else None
            recorded_text = canonical.last_user_text() if canonical else "(deleted)"
            out.append({
                "id": row.id, "project": row.project, "tier": row.tier, "score": round(row.score, 3),
                "model": canonical.model if canonical else None,  # an MCP tool call: the tool and its server
                "guard_reason": row.guard_reason, "reason": row.reason, "status": row.status,
                "entry_id": row.entry_id, "request": shorten(row.request_text),
                "recorded": shorten(recorded_text),
            })
        return out

    def show(self, candidate_id: int) -> dict[str, Any]:
        row = self._get(candidate_id)
        entry = self.store.get_entry(row.entry_id)
        recorded = CanonicalRequest.from_json(entry.canonical) if entry else None
        incoming = CanonicalRequest.from_json(row.request_canonical)
        recorded_text = recorded.last_user_text() if recorded else ""
        answer, answer_format = answer_of(entry)
        own = self._own_recordings(row)
        return {
            **{k: getattr(row, k)
               for k in ("id", "project", "tier", "score", "guard_reason", "reason", "status", "entry_id")},
            "request_shape": shape_json(Shape.of(incoming)),
            "recorded_shape": shape_json(Shape.of(recorded)) if recorded else None,
            "shape_differs": shapes_differ(Shape.of(incoming), Shape.of(recorded)) if recorded else None,
            "own_recordings": own,
            # for `semula review web`'s field diff, and this request's own answer when it has one
            "request_system": incoming.system, "recorded_system": recorded.system if recorded else None,
            "request_params": dict(incoming.params), "recorded_params": dict(recorded.params) if recorded else None,
            "own_answer": answer_of(self.store.get_entry(own[0]))[0] if own else None,
            "diff": word_diff(recorded_text, incoming.last_user_text()),
            "request_text": incoming.last_user_text(),
            "recorded_text": recorded_text,
            "answer": answer,
            "answer_format": answer_format,
        }

    def _own_recordings(self, row: ReviewCandidate) -> builtins.list[int]:  # `list` is a method here
        """The recordings the candidate's request has of its own (auto or record mode stored its answer)."""
        own = self.store.entries_with_normalised_fp(row.project, row.request_normalised_fp)
        return [e for e in own if e != row.entry_id]

    def approve(self, candidate_id: int) -> dict[str, Any]:
        """Serve the candidate's recording for its request from now on (an alias).

        Refused, and the candidate closed, when it pairs requests of different shapes (an older
        version queued it). Refused, and the request's candidates closed, when the request has a
        recording of its own:
        the exact and normalised tiers answer before the alias, so the alias would never be served,
        and deleting that recording (as approval once did) throws away the request's own correct
        answer. Never deletes a recording.
        """
        row = self._get(candidate_id, must_be_open=True)
        project, fp = row.project, row.request_normalised_fp
        if (entry := self.store.get_entry(row.entry_id)) is None:
            raise ValueError(f"candidate #{candidate_id}: its recording #{row.entry_id} was deleted")
        crossed = shapes_differ(Shape.of(CanonicalRequest.from_json(row.request_canonical)),
                                Shape.of(CanonicalRequest.from_json(entry.canonical)))
        if crossed is not None:  # queued by an older version (or another proxy of one on a shared store)
            closed = self._close([row])
            if not self.store.open_candidates_for(project, fp):
                self._set_open(project, fp, False)
            raise ValueError(f"not approved: candidate #{candidate_id} pairs requests of different shapes "
                             f"({crossed}): its answer would break the client. Closed #{closed[0]}")
        if own := self._own_recordings(row):
            closed = self._close(self.store.open_candidates_for(project, fp))
            self._set_open(project, fp, False)
            mine = self.store.get_entry(own[0])
            where = f" ({relpath_of(mine)})" if mine is not None and self.folder is not None else ""
            raise ValueError(
                f"not approved: the request of candidate #{candidate_id} has its own recording #{own[0]}{where}, "
                f"which answers it first and is kept; an alias to recording #{row.entry_id} would never be "
                f"served. Closed candidate(s) {', '.join(f'#{i}' for i in closed)} (an answered request closes its "
                f"own). To serve #{row.entry_id} instead, delete #{own[0]} (`semula entries delete {own[0]}`) "
                "and replay the request to queue the candidate again")
        aliases = [alias for alias in self.store.alias_requests(project) if alias.normalised_fp != fp]
        self.store.replace_aliases(project, [*aliases, AliasRequest(fp, row.entry_id, row.request_canonical)])
        self.index.put_alias(project, fp, row.entry_id)
        if self.folder is not None:
            self.folder.write_shared(shared.alias_file(project, row.request_canonical, relpath_of(entry)))
        self.store.set_candidate_status([candidate_id], "approved")
        self._event("approved", replace(row, status="approved"), entry)
        self._verdict(project)
        others = self._close([r for r in self.store.open_candidates_for(project, fp) if r.id != candidate_id])
        self._set_open(project, fp, False)
        return {"approved": candidate_id, "alias_to": row.entry_id, "closed": others}

    def _verdict(self, project: str) -> None:
        if self.on_verdict is not None:
            self.on_verdict(project)

    def _close(self, rows: builtins.list[ReviewCandidate]) -> builtins.list[int]:
        self.store.set_candidate_status([r.id for r in rows], "closed")
        for row in rows:
            self._event("closed", row)
        return [r.id for r in rows]

    def reject(self, candidate_id: int) -> dict[str, Any]:
        row = self._get(candidate_id, must_be_open=True)
        self.store.set_candidate_status([candidate_id], "rejected")
        entry = self.store.get_entry(row.entry_id)
        if self.folder is not None and entry is not None:
            self.folder.write_shared(shared.rejection_file(row.project, row.request_canonical, relpath_of(entry),
                                                           row.tier, row.score, row.reason))
        self._event("rejected", replace(row, status="rejected"), entry)
        self._verdict(row.project)
        if not self.store.open_candidates_for(row.project, row.request_normalised_fp):
            self._set_open(row.project, row.request_normalised_fp, False)
        return {"rejected": candidate_id}

    def find_open(self, request_fp: str, recording_fp: str) -> int:
        """The open candidate pairing the request whose normalised fingerprint starts with `request_fp`
        with the recording whose request fingerprint starts with `recording_fp`. Fingerprints are the
        same in every store, so a replay-miss printed in CI names a candidate a laptop can approve."""
        if not request_fp or not recording_fp:
            raise ValueError("give both --request and --recording (fingerprints from the replay-miss message)")
        rows = [r for r in self.store.candidates(None, "open", limit=100_000)
                if r.request_normalised_fp.startswith(request_fp)]
        entries = {r.entry_id: self.store.get_entry(r.entry_id) for r in rows}
        found = [r.id for r in rows if (e := entries[r.entry_id]) is not None and e.request_fp.startswith(recording_fp)]
        if not found:
            raise ValueError(f"no open review candidate pairs request {request_fp} with recording {recording_fp} here: "
                             "replay the test against this data dir first (it queues the candidate), then approve")
        if len(found) > 1:
            raise ValueError(f"{len(found)} open candidates match ({', '.join(f'#{i}' for i in found)}): "
                             "give longer fingerprints or a candidate id")
        return found[0]

    def _get(self, candidate_id: int, must_be_open: bool = False) -> ReviewCandidate:
        row = self.store.candidate(candidate_id)
        if row is None:
            raise ValueError(f"no review candidate #{candidate_id}")
        if must_be_open and row.status != "open":
            raise ValueError(f"candidate #{candidate_id} is already {row.status}")
        return row
