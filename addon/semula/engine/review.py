"""The near-match tiers' bookkeeping: search, serve-or-queue, and the human review queue.

The verdict for one pair is pure (`nearmatch.near_match`); this module applies it to the
index's proposals and keeps the ADR's rules: only same-speaker conversations are candidates,
at most 3 per missed request, never the same (request, entry) pairing twice, a rejection is
kept forever (that pairing is never queued or served again), approval writes an alias and
closes the request's other open candidates, an answered request closes its own.
Runs on the store thread.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from semula.core.canonical import CanonicalRequest
from semula.core.decision import Match
from semula.store.logschema import REVIEW_LOG_SCHEMA_VERSION
from semula.core.nearmatch import Verdict, near_match
from semula.core.settings import ProjectSettings, threshold_for

if TYPE_CHECKING:
    from semula.engine.cache import Cache

MAX_CANDIDATES = 3
log = logging.getLogger("semula")


@dataclass(frozen=True)
class Candidate:
    entry_id: int
    verdict: Verdict
    candidate_id: int | None = None  # set when queued


@dataclass(frozen=True)
class NearSearch:
    served: Match | None = None
    best: Candidate | None = None  # the best candidate (served or not): the call log's candidate_*
    queued: tuple[Candidate, ...] = field(default_factory=tuple)


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


class ReviewQueue:
    def __init__(self, cache: Cache, log: Callable[[dict[str, Any]], None] | None = None):
        self.cache = cache
        self.store = cache.store
        self.log = log

    def _event(self, event: str, candidate: dict[str, Any]) -> None:
        if self.log is None:
            return
        self.log({
            "ts": datetime.now(UTC), "event": event, "candidate_id": candidate["id"],
            "project": candidate["project"], "tier": candidate["tier"], "score": candidate["score"],
            "guard_reason": candidate.get("guard_reason"), "request_fp": candidate["request_normalised_fp"],
            "entry_id": candidate["entry_id"], "schema_version": REVIEW_LOG_SCHEMA_VERSION,
        })

    # --- search ----------------------------------------------------------------------------

    def search(self, project: str, request: CanonicalRequest, request_fp: str, normalised_fp: str,
               settings: ProjectSettings, fuzzy_bypass_reason: str | None = None, queue: bool = True) -> NearSearch:
        text = request.last_user_text()
        if not request.parsed or not text.strip():
            return NearSearch()
        ids = self.cache.lexical.propose(project, text)
        stored = self.store.canonicals_by_ids(ids)
        paired = self.store.paired_entries(project, normalised_fp)
        candidates = []
        for entry_id in ids:
            if entry_id not in stored or paired.get(entry_id) == "rejected":
                continue  # a rejected pairing is never served or queued again
            verdict = near_match(request, CanonicalRequest.from_json(stored[entry_id]), settings,
                                 tier="lexical", fuzzy_bypass_reason=fuzzy_bypass_reason)
            candidates.append(Candidate(entry_id, verdict))
        candidates += self._embedding_candidates(project, request, settings, paired, fuzzy_bypass_reason)
        if not candidates:
            return NearSearch()
        candidates.sort(key=lambda c: (c.verdict.serve, c.verdict.score, c.entry_id), reverse=True)
        best = candidates[0]
        if best.verdict.serve:
            return NearSearch(served=Match(best.verdict.tier, best.entry_id, best.verdict.score), best=best)
        queued: list[Candidate] = []
        if queue:
            chosen: list[Candidate] = []
            for candidate in candidates:
                if sum(1 for s in paired.values() if s == "open") >= MAX_CANDIDATES:
                    break
                if not candidate.verdict.review or candidate.entry_id in paired:
                    continue
                paired = {**paired, candidate.entry_id: "open"}
                chosen.append(candidate)
            if chosen:
                rows = self.store.add_candidates(project, request_fp, normalised_fp, request.to_json(), text, [
                    (c.verdict.tier, c.verdict.score, c.verdict.guard_reason, c.verdict.reason, c.entry_id)
                    for c in chosen
                ])
                for candidate, row in zip(chosen, rows):
                    self._event("queued", row)
                    queued.append(Candidate(candidate.entry_id, candidate.verdict, row["id"]))
                self.cache.open_requests.add((project, normalised_fp))
        best = next((c for c in queued if c.entry_id == best.entry_id), best)
        return NearSearch(best=best, queued=tuple(queued))

    def _embedding_candidates(self, project: str, request: CanonicalRequest, settings: ProjectSettings,
                              paired: dict[int, str], fuzzy_bypass_reason: str | None) -> list[Candidate]:
        """The embedding tier (opt-in): cosine neighbours the lexical tier did not propose."""
        tier = self.cache.embeddings
        if tier is None:
            return []
        model = tier.embedder.name
        review_floor = threshold_for(settings.embedding_review_threshold, model)
        serve_floor = threshold_for(settings.embedding_serve_threshold, model)
        floors = [t for t in (review_floor, serve_floor) if t is not None]
        if not floors:
            return []  # no threshold for this model: its cosines mean nothing yet
        settings = replace(settings, embedding_review_threshold=review_floor if review_floor is not None else 1.1,
                           embedding_serve_threshold=serve_floor)
        try:
            found = [(e, c) for e, c in tier.search(project, request, settings)
                     if paired.get(e) != "rejected" and c >= min(floors)]
        except Exception as e:  # an embedder failure is logged; the call carries on as a miss
            log.warning("semula: embedding search failed (%s); carrying on without it", e)
            return []
        stored = self.store.canonicals_by_ids([e for e, _ in found])
        return [
            Candidate(entry_id, near_match(request, CanonicalRequest.from_json(stored[entry_id]), settings,
                                           tier="embedding", score=cosine, fuzzy_bypass_reason=fuzzy_bypass_reason))
            for entry_id, cosine in found if entry_id in stored
        ]

    def answered(self, project: str, normalised_fp: str, created_before: datetime | None = None) -> int:
        """A request got an answer (served, or recorded by a later call): close its open candidates."""
        if (project, normalised_fp) not in self.cache.open_requests:
            return 0
        rows = self.store.open_candidates_for(project, normalised_fp, created_before)
        self.store.set_candidate_status([r["id"] for r in rows], "closed")
        for row in rows:
            self._event("closed", row)
        if not self.store.open_candidates_for(project, normalised_fp):
            self.cache.open_requests.discard((project, normalised_fp))
        return len(rows)

    # --- the human's side --------------------------------------------------------------------

    def list(self, project: str | None = None, status: str | None = "open") -> list[dict[str, Any]]:
        rows = self.store.candidates(project, status)
        entries = self.store.canonicals_by_ids([r["entry_id"] for r in rows])
        out = []
        for row in rows:
            recorded = entries.get(row["entry_id"])
            recorded_text = CanonicalRequest.from_json(recorded).last_user_text() if recorded else "(deleted)"
            out.append({
                "id": row["id"], "project": row["project"], "tier": row["tier"], "score": round(row["score"], 3),
                "guard_reason": row["guard_reason"], "reason": row["reason"], "status": row["status"],
                "entry_id": row["entry_id"], "request": shorten(row["request_text"]),
                "recorded": shorten(recorded_text),
            })
        return out

    def show(self, candidate_id: int) -> dict[str, Any]:
        row = self._get(candidate_id)
        entry = self.cache.entry(row["entry_id"])
        recorded = CanonicalRequest.from_json(entry.canonical) if entry else None
        incoming = CanonicalRequest.from_json(row["request_canonical"])
        recorded_text = recorded.last_user_text() if recorded else ""
        return {
            **{k: row[k] for k in ("id", "project", "tier", "score", "guard_reason", "reason", "status", "entry_id")},
            "diff": word_diff(recorded_text, incoming.last_user_text()),
            "request_text": incoming.last_user_text(),
            "recorded_text": recorded_text,
            "answer": entry.body.decode("utf-8", errors="replace") if entry else "(the recording was deleted)",
        }

    def approve(self, candidate_id: int) -> dict[str, Any]:
        row = self._get(candidate_id, must_be_open=True)
        project, fp = row["project"], row["request_normalised_fp"]
        if self.cache.entry(row["entry_id"]) is None:
            raise ValueError(f"candidate #{candidate_id}: its recording #{row['entry_id']} was deleted")
        # The approved answer replaces the request's own recording (auto mode recorded it while
        # the candidate waited): otherwise the exact tier would keep serving that one.
        replaced = [e for e in self.store.entries_with_normalised_fp(project, fp) if e != row["entry_id"]]
        for entry_id in replaced:
            self.store.delete_entry(entry_id)
            self.cache.lexical.deleted(entry_id)
        self.cache.put_alias(project, fp, row["entry_id"], row["request_canonical"])
        self.store.set_candidate_status([candidate_id], "approved")
        self._event("approved", {**row, "status": "approved"})
        others = [r for r in self.store.open_candidates_for(project, fp) if r["id"] != candidate_id]
        self.store.set_candidate_status([r["id"] for r in others], "closed")
        for other in others:
            self._event("closed", other)
        self.cache.open_requests.discard((project, fp))
        if replaced:
            self.cache.reload()
        return {"approved": candidate_id, "alias_to": row["entry_id"], "closed": [r["id"] for r in others],
                "replaced_recordings": replaced}

    def reject(self, candidate_id: int) -> dict[str, Any]:
        row = self._get(candidate_id, must_be_open=True)
        self.store.set_candidate_status([candidate_id], "rejected")
        self._event("rejected", {**row, "status": "rejected"})
        if not self.store.open_candidates_for(row["project"], row["request_normalised_fp"]):
            self.cache.open_requests.discard((row["project"], row["request_normalised_fp"]))
        return {"rejected": candidate_id}

    def _get(self, candidate_id: int, must_be_open: bool = False) -> dict[str, Any]:
        row = self.store.candidate(candidate_id)
        if row is None:
            raise ValueError(f"no review candidate #{candidate_id}")
        if must_be_open and row["status"] != "open":
            raise ValueError(f"candidate #{candidate_id} is already {row['status']}")
        return row
