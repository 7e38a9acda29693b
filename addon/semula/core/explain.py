"""Why did a request miss? Rank the nearest recordings and say which fields differ.

Pure: takes canonical requests, returns values. The replay-miss error a developer reads in
a failed CI run is built from this, so each difference names the field and both values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from semula.core.request.canonical import NEVER_MATTERS, CanonicalRequest, canonical_json, ignored
from semula.core.request.ignore import IgnoreRules
from semula.core.checks import MISS_CHECKS
from semula.core.nearmatch import review_score
from semula.core.request.normalise import words
from semula.core.repeats import base_of
from semula.core.settings import ProjectSettings
from semula.core.text import dice


# A miss explanation reads at most this much of each text (head and tail): 2,000 stored 20 KB
# conversations diffed whole took 11-22 s per replay miss.
TEXT_HEAD = TEXT_TAIL = 2048

# Below this similarity a recording is not named as the nearest: it would send a reader to diff
# an unrelated file. Measured on the 625 request pairs in tests/data (paraphrases, antonyms, edits,
# format changes of one request): every pair scores >= 0.33, while 98 % of random pairs of unrelated
# requests to the same provider score below 0.3 (median 0.07).
NEAREST_FLOOR = 0.3


@dataclass(frozen=True)
class Nearest:
    entry_id: int
    # 0..1: for a recording of the same shape, the review queue's score (`nearmatch.review_score`);
    # for any other, the word overlap of the whole conversation's text
    similarity: float
    differences: tuple[str, ...]
    reviewable: bool = False  # of the same shape: the similarity is the score a review candidate gets


def differences(incoming: CanonicalRequest, recorded: CanonicalRequest) -> list[str]:
    """The named checks the near-match verdict uses, plus the fields only a miss can differ in."""
    return [reason for _, reason in checked_fields(incoming, recorded) if reason is not None]


def checked_fields(incoming: CanonicalRequest, recorded: CanonicalRequest) -> list[tuple[str, str | None]]:
    """Each field the miss checks compare ("model", "params", "messages", …) and how it differs, or None:
    what a recordings diff says changed in a request, and what stayed the same."""
    settings = ProjectSettings()
    return [(check.__name__.rsplit("_", 1)[0], check(incoming, recorded, settings)) for check in MISS_CHECKS]


def declared_rules(rules: IgnoreRules) -> list[str]:
    """The rules as messages name them: a path as written, a pattern between slashes."""
    return [*rules.paths, *(f"/{p}/" for p in rules.patterns)]


def ignore_taken(*requests: CanonicalRequest, rules: IgnoreRules) -> list[str]:
    """The rules that changed something in any of `requests`, in declared order."""
    taken: set[str] = set()
    for request in requests:
        ignored(request, rules, taken)
    return [name for name in declared_rules(rules) if name in taken]


def ignore_note(request: CanonicalRequest, rules: IgnoreRules) -> str | None:
    """What the project's `ignore` (semula_ignore) left out of this request's fingerprints, for a reader
    of a miss or of `semula eval`: the rules that took effect, and those declared that found nothing
    (a misspelt path shows here)."""
    if not rules:
        return None
    used = ignore_taken(request, rules=rules)
    never = [path for path in rules.paths if path.split(".", 1)[0].split("[", 1)[0] in NEVER_MATTERS]
    unused = [name for name in declared_rules(rules) if name not in used and name not in never]
    note = f"ignored by semula_ignore: {', '.join(used)}" if used else "nothing ignored by semula_ignore"
    if unused:
        note += f" (not found in this request: {', '.join(unused)})"
    if never:
        note += f" ({', '.join(never)}: never counted anyway)"
    return note


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
                       limit: int = 3, settings: ProjectSettings | None = None) -> list[Nearest]:
    """The `limit` nearest candidates: same provider and endpoint first, then by similarity less
    a penalty per differing field. Texts are `cut` first, so the cost per candidate is bounded."""
    settings = settings or ProjectSettings()
    whole = incoming  # the review score reads the texts whole, as the queue does
    incoming = capped(incoming)
    incoming_words = conversation_words(incoming)
    ranked = []
    for entry_id, recorded in candidates:
        queue_score = None if (recorded.provider, recorded.endpoint) != (incoming.provider, incoming.endpoint) \
            else review_score(whole, recorded, settings)
        recorded = capped(recorded)
        # What the project declared volatile is no difference: name only what still counts.
        diffs = differences(ignored(incoming, settings.ignore), ignored(recorded, settings.ignore))
        recorded_words = conversation_words(recorded)
        elsewhere = (recorded.provider, recorded.endpoint) != (incoming.provider, incoming.endpoint)
        # Two bodiless calls to one endpoint (GET /v1/models?…) have no words to compare: they are alike.
        alike = not incoming_words and not recorded_words and not elsewhere and recorded.method == incoming.method
        similarity = queue_score if queue_score is not None else 1.0 if alike else dice(incoming_words, recorded_words)
        ranked.append((elsewhere, -(similarity - 0.05 * len(diffs)), -entry_id,
                       Nearest(entry_id, round(similarity, 3), tuple(diffs), queue_score is not None)))
    ranked.sort(key=lambda item: item[:3])
    return [item[3] for item in ranked[:limit]]


# Fingerprints in a printed `review approve --request … --recording …` are cut to this many
# characters: unique in practice, and short enough to paste from a CI log.
FINGERPRINT_CHARS = 20


def approve_command(candidate_id: int | None, request_fp: str | None, recording_fp: str | None) -> str:
    """`semula review approve`, by the fingerprints when known: they are the same in every store
    (CI's candidate ids are not), so the command also works on a laptop that replays the same test."""
    if request_fp and recording_fp:
        request_fp = base_of(request_fp)  # sequence mode's n-th occurrence queues under the bare fingerprint
        return (f"semula review approve --request {request_fp[:FINGERPRINT_CHARS]} "
                f"--recording {recording_fp[:FINGERPRINT_CHARS]}")
    return f"semula review approve {candidate_id}"


def recording_name(entry_id: int, files: Mapping[int, str]) -> str:
    """A recording as a reader can find it: its file in the recordings folder, else (a store with no
    folder, a file not written yet) its store id, which means something only in this store."""
    return files.get(entry_id) or f"#{entry_id}"


def close_nearest(nearest: list[Nearest]) -> Nearest | None:
    """The nearest recording worth naming: the first ranked at or above `NEAREST_FLOOR`."""
    return next((n for n in nearest if n.similarity >= NEAREST_FLOOR), None)


def miss_message(project: str, mode: str, nearest: list[Nearest], other_projects: list[str],
                 problem: str | None = None, candidate: Any = None,
                 fingerprints: tuple[str | None, str | None] = (None, None), *,
                 request_line: str | None = None, files: Mapping[int, str] | None = None,
                 ignore: str | None = None) -> str:
    """The replay-miss error: enough to fix a failed CI run without opening anything else.

    `candidate` is the queued review candidate (or the best near-match), `fingerprints` the
    request's normalised fingerprint and the candidate recording's request fingerprint,
    `request_line` the refused call ("POST /v1/chat/completions"), `files` each recording's file
    in the recordings folder (by entry id), named instead of the store's ids, `ignore` the project's
    `ignore_note` for this request."""
    files = files or {}
    refused = f": {request_line}" if request_line else ""
    head = f"semula: no recording matches this request (project '{project}', mode {mode}){refused}."
    if problem:
        head = f"semula: this request cannot be replayed (project '{project}', mode {mode}){refused}: {problem}."
    parts = [head]
    best = close_nearest(nearest)
    if best is not None:
        what = "; ".join(best.differences[:6]) or "no field differs after normalisation"
        parts.append(f"Nearest recording: {recording_name(best.entry_id, files)} "
                     f"(similarity {best.similarity:.2f}): {what}.")
    elif nearest:
        parts.append(f"No recording in project '{project}' is close to this request "
                     f"(none shares {NEAREST_FLOOR:.0%} of its words).")
    elif not problem:
        parts.append(f"Project '{project}' has no recordings yet.")
    if ignore:
        parts.append(f"{ignore[0].upper()}{ignore[1:]}; every other field counts.")
    if candidate is not None:
        why = candidate.verdict.reason or "not served"
        recording = f"recording {recording_name(candidate.entry_id, files)}"
        if candidate.candidate_id is not None:
            parts.append(
                f"A near-match is queued for review: candidate #{candidate.candidate_id} "
                f"({candidate.verdict.tier}, score {candidate.verdict.score:.2f}, "
                f"{recording}; "
                f"not served: {why}). If its answer is right for this request, approve it "
                f"(`semula review show {candidate.candidate_id}` shows both) with "
                f"`semula review approve {candidate.candidate_id}` and replay again."
            )
            if mode == "replay" and all(fingerprints):
                parts.append(
                    "From another machine (a CI store's ids mean nothing there): run the test there in replay "
                    f"mode, which queues the same candidate, then `{approve_command(None, *fingerprints)}` "
                    "and commit the alias file it writes to the recordings folder."
                )
        else:
            parts.append(
                f"Best near-match: {recording} ({candidate.verdict.tier}, "
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
    if mode == "replay":
        parts.append("In CI: record on a developer machine and commit the new files in the recordings folder.")
    return " ".join(parts)
