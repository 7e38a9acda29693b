"""Why did a request miss? Rank the nearest recordings and say which fields differ.

Pure: takes canonical requests, returns values. The replay-miss error a developer reads in
a failed CI run is built from this, so each difference names the field and both values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from semula.core.canonical import CanonicalRequest, canonical_json
from semula.core.checks import MISS_CHECKS
from semula.core.normalise import words
from semula.core.settings import ProjectSettings
from semula.core.text import dice


# A miss explanation reads at most this much of each text (head and tail): 2,000 stored 20 KB
# conversations diffed whole took 11-22 s per replay miss.
TEXT_HEAD = TEXT_TAIL = 2048


@dataclass(frozen=True)
class Nearest:
    entry_id: int
    similarity: float  # 0..1, word overlap of the whole conversation's text
    differences: tuple[str, ...]


def differences(incoming: CanonicalRequest, recorded: CanonicalRequest) -> list[str]:
    """The named checks the near-match verdict uses, plus the fields only a miss can differ in."""
    settings = ProjectSettings()
    return [reason for check in MISS_CHECKS if (reason := check(incoming, recorded, settings)) is not None]


def cut(text: str) -> str:
    """`text`'s head and tail, when it is longer than both (what a miss explanation reads of it)."""
    if len(text) <= TEXT_HEAD + TEXT_TAIL:
        return text
    return text[:TEXT_HEAD] + " … " + text[-TEXT_TAIL:]


def capped(request: CanonicalRequest) -> CanonicalRequest:
    """`request` with its system prompt and message texts `cut`: bounded work per candidate."""
    if len(request.system or "") <= TEXT_HEAD + TEXT_TAIL and all(
            len(m.text) <= TEXT_HEAD + TEXT_TAIL for m in request.messages):
        return request
    return replace(request, system=cut(request.system) if request.system else request.system,
                   messages=tuple(replace(m, text=cut(m.text)) for m in request.messages))


def conversation_words(request: CanonicalRequest) -> list[str]:
    texts = [request.system or ""] + [m.text for m in request.messages]
    if not request.parsed:
        texts.append(canonical_json(request.body))
    return words(" ".join(texts))


def nearest_recordings(incoming: CanonicalRequest, candidates: list[tuple[int, CanonicalRequest]],
                       limit: int = 3) -> list[Nearest]:
    """The `limit` nearest candidates: same provider and endpoint first, then by word overlap less
    a penalty per differing field. Texts are `cut` first, so the cost per candidate is bounded."""
    incoming = capped(incoming)
    incoming_words = conversation_words(incoming)
    ranked = []
    for entry_id, recorded in candidates:
        recorded = capped(recorded)
        diffs = differences(incoming, recorded)
        similarity = dice(incoming_words, conversation_words(recorded))
        elsewhere = (recorded.provider, recorded.endpoint) != (incoming.provider, incoming.endpoint)
        ranked.append((elsewhere, -(similarity - 0.05 * len(diffs)), -entry_id,
                       Nearest(entry_id, round(similarity, 3), tuple(diffs))))
    ranked.sort(key=lambda item: item[:3])
    return [item[3] for item in ranked[:limit]]


def miss_message(project: str, mode: str, nearest: list[Nearest], other_projects: list[str],
                 problem: str | None = None, candidate: Any = None) -> str:
    """The replay-miss error: enough to fix a failed CI run without opening anything else."""
    head = f"semula: no recording matches this request (project '{project}', mode {mode})."
    if problem:
        head = f"semula: this request cannot be replayed (project '{project}', mode {mode}): {problem}."
    parts = [head]
    if nearest:
        best = nearest[0]
        what = "; ".join(best.differences[:6]) or "no field differs after normalisation"
        parts.append(f"Nearest recording: #{best.entry_id} (similarity {best.similarity:.2f}): {what}.")
    elif not problem:
        parts.append(f"Project '{project}' has no recordings yet.")
    if candidate is not None:
        why = candidate.verdict.reason or "not served"
        if candidate.candidate_id is not None:
            parts.append(
                f"A near-match is queued for review: candidate #{candidate.candidate_id} "
                f"({candidate.verdict.tier}, score {candidate.verdict.score:.2f}, recording #{candidate.entry_id}; "
                f"not served: {why}). If its answer is right for this request, run "
                f"`semula review approve {candidate.candidate_id}` and replay again."
            )
        else:
            parts.append(
                f"Best near-match: recording #{candidate.entry_id} ({candidate.verdict.tier}, "
                f"score {candidate.verdict.score:.2f}; not served: {why})."
            )
    if other_projects:
        parts.append(
            "An identical request is recorded in project(s) " + ", ".join(f"'{p}'" for p in sorted(other_projects))
            + ": select the project with HTTPS_PROXY=http://<project>:semula@host:port or the x-semula-project header."
        )
    parts.append(
        "To record it, run the test once with the proxy in auto or record mode "
        "(e.g. `semula exec --mode auto -- <test command>`), then replay again."
    )
    return " ".join(parts)
