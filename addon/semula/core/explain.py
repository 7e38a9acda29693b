"""Why did a request miss? Rank the nearest recordings and say which fields differ.

Pure: takes canonical requests, returns values. The replay-miss error a developer reads in
a failed CI run is built from this, so each difference names the field and both values.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from semula.core.canonical import CanonicalRequest, canonical_json
from semula.core.normalise import normalise_text, words


@dataclass(frozen=True)
class Nearest:
    entry_id: int
    similarity: float  # 0..1, word overlap of the whole conversation's text
    differences: tuple[str, ...]


def dice(a: list[str], b: list[str]) -> float:
    """Sørensen–Dice over word multisets; two empty texts are not evidence of sameness."""
    if not a or not b:
        return 0.0
    ca, cb = Counter(a), Counter(b)
    return 2 * sum((ca & cb).values()) / (len(a) + len(b))


def _short(value: object, width: int = 40) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def around_difference(a: str, b: str, width: int = 40) -> tuple[str, str]:
    """Both texts shortened to a window around their first difference, so they never look equal."""
    a, b = " ".join(a.split()), " ".join(b.split())
    start = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    begin = max(0, start - width // 3)

    def window(text: str) -> str:
        piece = text[begin: begin + width]
        return ("…" if begin else "") + piece + ("…" if begin + width < len(text) else "")

    return window(a), window(b)


def differences(incoming: CanonicalRequest, recorded: CanonicalRequest) -> list[str]:
    diffs: list[str] = []
    if (incoming.provider, incoming.endpoint) != (recorded.provider, recorded.endpoint):
        diffs.append(f"endpoint {incoming.provider} {incoming.endpoint} ≠ {recorded.provider} {recorded.endpoint}")
    if incoming.model != recorded.model:
        diffs.append(f"model {incoming.model} ≠ {recorded.model}")
    if incoming.stream != recorded.stream:
        diffs.append(f"stream {incoming.stream} ≠ {recorded.stream}")
    if incoming.query != recorded.query:
        diffs.append(f"query {_short(dict(incoming.query))} ≠ {_short(dict(recorded.query))}")
    if incoming.headers != recorded.headers:
        diffs.append(f"headers {_short(dict(incoming.headers))} ≠ {_short(dict(recorded.headers))}")
    params_in, params_rec = dict(incoming.params or {}), dict(recorded.params or {})
    for key in sorted(set(params_in) | set(params_rec)):
        if key not in params_rec:
            diffs.append(f"parameter {key}={_short(params_in[key])} only in this request")
        elif key not in params_in:
            diffs.append(f"parameter {key}={_short(params_rec[key])} only in the recording")
        elif canonical_json(params_in[key]) != canonical_json(params_rec[key]):
            diffs.append(f"parameter {key} {_short(params_in[key])} ≠ {_short(params_rec[key])}")
    if canonical_json(list(incoming.tools)) != canonical_json(list(recorded.tools)):
        diffs.append("tools differ")
    if normalise_text(incoming.system or "") != normalise_text(recorded.system or ""):
        diffs.append("system prompt differs")
    roles_in = [m.role for m in incoming.messages]
    roles_rec = [m.role for m in recorded.messages]
    if roles_in != roles_rec:
        diffs.append(f"turns {'/'.join(roles_in) or 'none'} ≠ {'/'.join(roles_rec) or 'none'}")
    for index, (a, b) in enumerate(zip(incoming.messages, recorded.messages), start=1):
        if normalise_text(a.text) != normalise_text(b.text):
            mine, theirs = around_difference(a.text, b.text)
            diffs.append(f"message {index} ({a.role}) text: {mine!r} ≠ {theirs!r}")
        elif canonical_json(list(a.parts)) != canonical_json(list(b.parts)):
            diffs.append(f"message {index} ({a.role}) non-text parts differ")
    if not incoming.parsed or not recorded.parsed:
        if canonical_json(incoming.body) != canonical_json(recorded.body):
            diffs.append("body differs")
    return diffs


def conversation_words(request: CanonicalRequest) -> list[str]:
    texts = [request.system or ""] + [m.text for m in request.messages]
    if not request.parsed:
        texts.append(canonical_json(request.body))
    return words(" ".join(texts))


def nearest_recordings(incoming: CanonicalRequest, candidates: list[tuple[int, CanonicalRequest]],
                       limit: int = 3) -> list[Nearest]:
    incoming_words = conversation_words(incoming)
    ranked = []
    for entry_id, recorded in candidates:
        diffs = differences(incoming, recorded)
        similarity = dice(incoming_words, conversation_words(recorded))
        ranked.append((-(similarity - 0.05 * len(diffs)), -entry_id, Nearest(entry_id, round(similarity, 3), tuple(diffs))))
    ranked.sort(key=lambda item: item[:2])
    return [item[2] for item in ranked[:limit]]


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
        parts.append(f"Nearest recording: #{best.entry_id} (similarity {best.similarity:.2f}); differs in: {what}.")
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
            + ": select the project with HTTPS_PROXY=http://<project>@host:port or the x-semula-project header."
        )
    parts.append(
        "To record it, run the test once with the proxy in auto or record mode "
        "(e.g. `semula exec --mode auto -- <test command>`), then replay again."
    )
    return " ".join(parts)
