"""What changed in the recordings folder between two versions of it: `semula recordings diff`.

Pure: each side's recordings as the loader reads them (path → `NewEntry`, and the files it skips with
its reason) in, a `RecordingsDiff` out. Reading a side (a folder, a git commit) is the edge's job
(`diffsides.py`); printing it is `diffview.py`'s.

Recordings are paired across the sides by their file's path; else by project and request fingerprint
(a moved file); else a recording added is paired with the removed one of its project, provider and
endpoint that a replay miss would name as nearest (`core.explain.nearest_recordings`, above
`NEAREST_FLOOR`): a test whose prompt changed was re-recorded under a new name. A pair is
`re-recorded` when its request is the same and its answer's bytes are not, `request changed` when the
request differs. The request's differences are the miss message's reasons (`core.explain`); the
answer is compared as a reader reads it: its status, the text it assembles (a stream's too), its tool
calls, the model that answered and the usage.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from semula.core.explain import NEAREST_FLOOR, checked_fields, nearest_recordings
from semula.core.checks import Shape
from semula.core.provenance import answered_model
from semula.core.request.canonical import CanonicalRequest, canonical_json
from semula.core.request.normalise import words
from semula.core.text import word_diff
from semula.recordings.eventframes import payloads
from semula.recordings.format import body_fields
from semula.store.types import NewEntry

ADDED, REMOVED, RE_RECORDED, REQUEST_CHANGED = "added", "removed", "re-recorded", "request changed"
KINDS = (ADDED, REMOVED, RE_RECORDED, REQUEST_CHANGED)
ERROR_STATUS = 400  # an answer at or above it is an error answer: replayed for ever once committed
NEAREST_CANDIDATES = 5  # removed requests an added one is ranked against (those sharing most words)
ANSWER_PARTS = ("status", "text", "tool calls", "model", "usage")
# What a test sees of an answer: a change in one of these is "the answer changed". Usage alone is not.
ANSWER_CHANGES = ("status", "text", "tool calls", "model")


@dataclass(frozen=True)
class AnswerView:
    """One recorded answer as a reviewer compares it."""

    status: int
    text: str  # the assembled text; the body itself when the answer has no text and no tool call
    tool_calls: tuple[str, ...]  # each call's name, in order
    tool_arguments: str  # every call's arguments, joined (a stream's pieces assembled)
    model: str | None
    usage: tuple[int | None, int | None]

    def parts(self) -> dict[str, Any]:
        return {"status": self.status, "text": self.text, "tool calls": (self.tool_calls, self.tool_arguments),
                "model": self.model, "usage": self.usage}


@dataclass(frozen=True)
class Change:
    """One recording added, removed or changed, with what differs and what stayed the same."""

    kind: str
    project: str
    provider: str
    endpoint: str
    base_path: str | None
    head_path: str | None
    request_differences: tuple[str, ...] = ()
    request_same: tuple[str, ...] = ()
    answer_differences: tuple[str, ...] = ()  # of ANSWER_PARTS
    answer_same: tuple[str, ...] = ()
    text_diff: tuple[str, ...] = ()
    base_answer: AnswerView | None = None
    head_answer: AnswerView | None = None

    @property
    def path(self) -> str:
        return self.head_path or self.base_path or ""

    @property
    def answer_changed(self) -> bool:
        """The answer a test reads changed (`ANSWER_CHANGES`), not only its ids, timestamps or usage."""
        return any(part in ANSWER_CHANGES for part in self.answer_differences)

    @property
    def error_status(self) -> int | None:
        """The status of an error answer this change brings in (the HEAD side's), else None."""
        answer = self.head_answer
        return answer.status if answer is not None and answer.status >= ERROR_STATUS else None


@dataclass(frozen=True)
class RecordingsDiff:
    changes: tuple[Change, ...]
    unchanged: int
    unreadable: tuple[tuple[str, str, str], ...] = ()  # (side "base"/"head", path, the loader's reason)
    error_answers: tuple[tuple[str, int], ...] = field(default=())  # every HEAD recording answering >= 400

    def by_group(self) -> dict[tuple[str, str], list[Change]]:
        """The changes per (project, provider), in order."""
        groups: dict[tuple[str, str], list[Change]] = {}
        for change in self.changes:
            groups.setdefault((change.project, change.provider), []).append(change)
        return groups

    def counts(self) -> dict[str, int]:
        return {kind: sum(1 for c in self.changes if c.kind == kind) for kind in KINDS}


# ---------------------------------------------------------------- one answer


def _json_values(fields: dict[str, Any]) -> list[Any]:
    """The answer's JSON documents (from its file fields, `format.body_fields`): the body, a stream's data
    frames, an event stream's payloads."""
    if "body_json" in fields:
        return [fields["body_json"]]
    if "body_eventstream" in fields:
        return payloads(fields["body_eventstream"])
    values = []
    for frame in fields.get("body_sse") or ():
        for line in frame.splitlines():
            if line.startswith("data:"):
                try:
                    values.append(json.loads(line[5:].strip()))
                except (ValueError, RecursionError):
                    continue
    return values


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every object in `value`, depth first, in document order (without recursion: untrusted depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _call_name(item: dict[str, Any]) -> str | None:
    """The tool a JSON object calls, across the providers' shapes (OpenAI chat and Responses, Anthropic,
    Gemini, Bedrock), or None."""
    for key in ("function", "functionCall", "toolUse"):
        inner = item.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("name"), str):
            return inner["name"]
    if item.get("type") in ("function_call", "tool_use") and isinstance(item.get("name"), str):
        return item["name"]
    return None


def _argument_piece(item: dict[str, Any]) -> str:
    if item.get("type") == "response.function_call_arguments.delta" and isinstance(item.get("delta"), str):
        return item["delta"]  # OpenAI Responses' stream
    for key in ("arguments", "partial_json"):  # OpenAI (whole or a stream's piece), Anthropic's input_json_delta
        if isinstance(item.get(key), str):
            return item[key]
    for key in ("args", "input"):  # Gemini, Anthropic and Bedrock: an object
        if isinstance(item.get(key), (dict, list)):
            return canonical_json(item[key])
    return ""


def tool_calls(values: list[Any]) -> tuple[tuple[str, ...], str]:
    """(the tools called, in order, each once; their arguments joined) of an answer's JSON documents. Best
    effort, for reading: a stream repeats a call in its done events, so a name is kept once."""
    names: list[str] = []
    arguments: list[str] = []
    for item in _walk(values):
        if (name := _call_name(item)) is not None and name not in names:
            names.append(name)
        if names:
            arguments.append(_argument_piece(item))
    return tuple(names), "".join(arguments)


def answer_view(entry: NewEntry) -> AnswerView:
    fields = body_fields(entry.body, entry.streamed)
    text = fields.get("answer_text") or ""
    names, arguments = tool_calls(_json_values(fields))
    if not text and not names:  # an error, an embedding: the body is what a reader compares
        text = entry.body.decode("utf-8", errors="replace")
    return AnswerView(status=entry.status, text=text, tool_calls=names, tool_arguments=arguments,
                      model=answered_model(entry.body, entry.streamed),
                      usage=(entry.prompt_tokens, entry.completion_tokens))


# ---------------------------------------------------------------- one pair


def _request(entry: NewEntry) -> CanonicalRequest:
    return CanonicalRequest.from_json(entry.canonical)


def compare_pair(base_path: str, base: NewEntry, head_path: str, head: NewEntry) -> Change | None:
    """How `head` differs from `base`, or None when it records the same request and the same answer bytes."""
    same_request = base.request_fp == head.request_fp
    if same_request and (base.status, base.body, base.streamed) == (head.status, head.body, head.streamed):
        return None
    checked = [] if same_request else checked_fields(_request(head), _request(base))
    old, new = answer_view(base), answer_view(head)
    old_parts, new_parts = old.parts(), new.parts()
    changed = tuple(part for part in ANSWER_PARTS if old_parts[part] != new_parts[part])
    return Change(
        kind=RE_RECORDED if same_request else REQUEST_CHANGED, project=head.project, provider=head.provider,
        endpoint=head.endpoint, base_path=base_path, head_path=head_path,
        request_differences=tuple(reason for _, reason in checked if reason is not None),
        request_same=tuple(name for name, reason in checked if reason is None),
        answer_differences=changed, answer_same=tuple(part for part in ANSWER_PARTS if part not in changed),
        text_diff=word_diff(old.text, new.text) if "text" in changed else (),
        base_answer=old, head_answer=new,
    )


def _one_side(kind: str, path: str, entry: NewEntry) -> Change:
    view = answer_view(entry)
    return Change(kind=kind, project=entry.project, provider=entry.provider, endpoint=entry.endpoint,
                  base_path=path if kind == REMOVED else None, head_path=path if kind == ADDED else None,
                  base_answer=view if kind == REMOVED else None, head_answer=view if kind == ADDED else None)


# ---------------------------------------------------------------- the folder


def _claim(entry: NewEntry) -> tuple[str, str]:
    return entry.project, entry.request_fp


def _pairs(base: Mapping[str, NewEntry], head: Mapping[str, NewEntry]) -> Iterator[tuple[str, str]]:
    """(base path, head path) of each pair: by path, then by request, then the nearest changed request."""
    paired = [(path, path) for path in base if path in head]
    left = {path: entry for path, entry in base.items() if path not in head}
    right = {path: entry for path, entry in head.items() if path not in base}
    by_claim = {_claim(entry): path for path, entry in left.items()}
    for path, entry in list(right.items()):
        if (old := by_claim.pop(_claim(entry), None)) is not None and old in left:
            paired.append((old, path))
            del left[old], right[path]
    yield from paired
    yield from _nearest_pairs(left, right)


def _nearest_pairs(left: Mapping[str, NewEntry], right: Mapping[str, NewEntry]) -> Iterator[tuple[str, str]]:
    """A removed and an added recording of one shape (provider, endpoint, stream mode, model) whose
    requests a replay miss would call nearest: the closest pairs first, each recording in one pair.

    A replay miss ranks a few stored requests; a rewritten folder has thousands on each side. So each added
    request is ranked against only the `NEAREST_CANDIDATES` removed ones of its shape sharing most of its
    words (an inverted index of their searchable text, words in over half of them left out)."""
    shapes: dict[tuple[str, Shape], list[tuple[str, CanonicalRequest, NewEntry]]] = {}
    for path, entry in left.items():
        request = _request(entry)
        shapes.setdefault((entry.project, Shape.of(request)), []).append((path, request, entry))
    postings = {shape: _postings(olds) for shape, olds in shapes.items()}
    scored: list[tuple[float, str, str]] = []
    for path, entry in sorted(right.items()):
        request = _request(entry)
        shape = (entry.project, Shape.of(request))
        olds = shapes.get(shape, [])
        if not olds:
            continue
        shared = Counter(n for word in set(words(entry.last_text)) for n in postings[shape].get(word, ()))
        chosen = [n for n, _ in shared.most_common(NEAREST_CANDIDATES)] or list(range(min(len(olds),
                                                                                           NEAREST_CANDIDATES)))
        ranked = nearest_recordings(request, [(n, olds[n][1]) for n in chosen], limit=len(chosen))
        scored += [(near.similarity, olds[near.entry_id][0], path) for near in ranked
                   if near.similarity >= NEAREST_FLOOR]
    taken: set[str] = set()
    for _, old_path, new_path in sorted(scored, key=lambda item: (-item[0], item[1], item[2])):
        if old_path not in taken and new_path not in taken:
            taken.update((old_path, new_path))
            yield old_path, new_path


def _postings(olds: list[tuple[str, CanonicalRequest, NewEntry]]) -> dict[str, list[int]]:
    """word -> the removed recordings whose searchable text holds it; a word in over half of them (of more
    than `NEAREST_CANDIDATES`) is left out: it tells none apart."""
    index: dict[str, list[int]] = {}
    for n, (_, _, entry) in enumerate(olds):
        for word in set(words(entry.last_text)):
            index.setdefault(word, []).append(n)
    if len(olds) <= NEAREST_CANDIDATES:
        return index
    return {word: ns for word, ns in index.items() if len(ns) * 2 <= len(olds)}


def compare(base: Mapping[str, NewEntry], head: Mapping[str, NewEntry],
            unreadable: tuple[tuple[str, str, str], ...] = ()) -> RecordingsDiff:
    """What changed from `base` to `head` (each: path → entry, as loaded), sorted by project, provider, path."""
    changes: list[Change] = []
    unchanged = 0
    seen_base: set[str] = set()
    seen_head: set[str] = set()
    for base_path, head_path in _pairs(base, head):
        seen_base.add(base_path)
        seen_head.add(head_path)
        change = compare_pair(base_path, base[base_path], head_path, head[head_path])
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    changes += [_one_side(ADDED, path, entry) for path, entry in head.items() if path not in seen_head]
    changes += [_one_side(REMOVED, path, entry) for path, entry in base.items() if path not in seen_base]
    changes.sort(key=lambda c: (c.project, c.provider, KINDS.index(c.kind), c.path))
    errors = tuple(sorted((path, entry.status) for path, entry in head.items() if entry.status >= ERROR_STATUS))
    return RecordingsDiff(tuple(changes), unchanged, tuple(unreadable), errors)
