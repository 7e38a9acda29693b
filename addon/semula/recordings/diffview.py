"""`semula recordings diff` as a reader gets it: JSON, Markdown sized for a pull-request comment, and the
lines of the terminal view. Pure: a `RecordingsDiff` in, text out.

Every text leaves through `redact_text`, the redaction every byte semula writes passes: the recordings
are redacted when written, but a diff also quotes files the loader refused (their reasons quote a
field), and those are anybody's bytes.
"""

from __future__ import annotations

import json
from typing import Any

from semula.core.redact import redact_text
from semula.recordings.diff import ADDED, KINDS, REMOVED, AnswerView, Change, RecordingsDiff

MARKDOWN_MAX_CHARS = 60_000  # GitHub refuses a comment over 65,536 characters
FOLD_LINES = 40  # a project's section longer than this is folded in <details>
FOLD_TEXT_LINES = 3  # an answer's text or word diff longer than this is folded
MAX_TEXT_CHARS = 400  # an answer's text shown in full up to this
MAX_LISTED = 50  # error answers and unreadable files listed in a comment; the count says the rest


def _answer_json(answer: AnswerView | None) -> dict[str, Any] | None:
    if answer is None:
        return None
    return {"status": answer.status, "text": answer.text[:MAX_TEXT_CHARS * 10], "tool_calls": list(answer.tool_calls),
            "model": answer.model, "usage": {"prompt_tokens": answer.usage[0], "completion_tokens": answer.usage[1]}}


def change_json(change: Change) -> dict[str, Any]:
    return {
        "kind": change.kind, "project": change.project, "provider": change.provider, "endpoint": change.endpoint,
        "base_path": change.base_path, "head_path": change.head_path,
        "request": {"differences": list(change.request_differences), "same": list(change.request_same)},
        "answer": {"changed": change.answer_changed, "differences": list(change.answer_differences),
                   "same": list(change.answer_same), "text_diff": list(change.text_diff),
                   "base": _answer_json(change.base_answer), "head": _answer_json(change.head_answer)},
        "error_status": change.error_status,
    }


def to_json(diff: RecordingsDiff, base: str, head: str, failed: list[str]) -> str:
    document = {
        "base": base, "head": head, "counts": {**diff.counts(), "unchanged": diff.unchanged},
        "changes": [change_json(c) for c in diff.changes],
        "unreadable": [{"side": side, "path": path, "problem": problem} for side, path, problem in diff.unreadable],
        "error_answers": [{"path": path, "status": status} for path, status in diff.error_answers],
        "failed": failed,
    }
    return redact_text(json.dumps(document, ensure_ascii=False, indent=2))


# ---------------------------------------------------------------- words, shared by the views


def summary(diff: RecordingsDiff) -> str:
    counts = diff.counts()
    parts = [f"{counts[kind]} {kind}" for kind in KINDS if counts[kind]] or ["no change"]
    line = ", ".join(parts) + f"; {diff.unchanged} unchanged"
    if diff.unreadable:
        line += f"; {len(diff.unreadable)} file(s) unreadable"
    return line


def request_words(change: Change) -> str:
    if change.kind in (ADDED, REMOVED):
        return ""
    if not change.request_differences:
        return "the same"
    return "; ".join(change.request_differences)


def answer_words(change: Change) -> str:
    if change.kind in (ADDED, REMOVED):
        answer = change.head_answer or change.base_answer
        return f"status {answer.status}" if answer is not None else ""
    if not change.answer_differences:
        return "the same (only ids, timestamps or other bytes differ)"
    base, head = change.base_answer, change.head_answer
    assert base is not None and head is not None
    words = []
    for part in change.answer_differences:
        if part == "status":
            words.append(f"status {base.status} → {head.status}")
        elif part == "model":
            words.append(f"model {base.model} → {head.model}")
        elif part == "usage":
            words.append(f"usage {_usage(base)} → {_usage(head)}")
        elif part == "tool calls":
            words.append(f"tool calls {_calls(base)} → {_calls(head)}")
        else:
            words.append("text changed")
    return "; ".join(words) + (f" (same: {', '.join(change.answer_same)})" if change.answer_same else "")


def _usage(answer: AnswerView) -> str:
    return f"{answer.usage[0]}+{answer.usage[1]}"


def _calls(answer: AnswerView) -> str:
    return ",".join(answer.tool_calls) or "none"


def flag(change: Change) -> str:
    """What a reviewer must not miss: an error answer brought in, an answer changed under the same request."""
    flags = []
    if change.error_status is not None:
        flags.append(f"ERROR ANSWER {change.error_status}")
    if change.kind not in (ADDED, REMOVED) and change.answer_changed and not change.request_differences:
        flags.append("answer changed, request the same")
    return "; ".join(flags)


def detail_lines(change: Change) -> list[str]:
    """The longer part of a change: the word diff of the answer's text, or an added answer's text."""
    if change.text_diff:
        return list(change.text_diff)
    if change.kind == ADDED and change.head_answer is not None:
        text = change.head_answer.text
        return [text[:MAX_TEXT_CHARS] + ("…" if len(text) > MAX_TEXT_CHARS else "")] if text else []
    return []


def path_words(change: Change) -> str:
    if change.base_path and change.head_path and change.base_path != change.head_path:
        return f"{change.base_path} → {change.head_path}"
    return change.path


# ---------------------------------------------------------------- Markdown


def _md(text: str) -> str:
    """Text inside a table cell or a line: no pipe, no newline, no HTML."""
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")


def _change_markdown(change: Change) -> list[str]:
    head = f"- **{change.kind}** `{_md(path_words(change))}`"
    if (flagged := flag(change)):
        head += f" — ⚠️ {_md(flagged)}"
    lines = [head]
    if (request := request_words(change)):
        lines.append(f"  - request: {_md(request)}")
    if (answer := answer_words(change)):
        lines.append(f"  - answer: {_md(answer)}")
    if (details := detail_lines(change)):
        block = ["", "    ```diff" if change.text_diff else "    ```text",
                 *("    " + line.replace("```", "'''") for line in details), "    ```", ""]
        if len(details) > FOLD_TEXT_LINES:
            block = ["  <details><summary>answer text</summary>", *block, "  </details>"]
        lines += block
    return lines


def markdown(diff: RecordingsDiff, base: str, head: str, failed: list[str],
             max_chars: int = MARKDOWN_MAX_CHARS) -> str:
    """The diff as a pull-request comment: a summary, then each project and provider's changes, a long
    section folded; past `max_chars`, the rest is left out with a note saying how much."""
    out = ["### semula recordings diff", "", f"`{_md(base)}` → `{_md(head)}`: {_md(summary(diff))}", ""]
    if failed:
        out += [f"**Failing:** {_md(', '.join(failed))}", ""]
    if diff.error_answers:
        out += [f"⚠️ {len(diff.error_answers)} recording(s) on `{_md(head)}` answer with an error "
                "(status ≥ 400): committed, they replay that error for ever."]
        out += [f"- `{_md(path)}`: {status}" for path, status in diff.error_answers[:MAX_LISTED]]
        out += [f"- and {len(diff.error_answers) - MAX_LISTED} more"] if len(diff.error_answers) > MAX_LISTED else []
        out += [""]
    if diff.unreadable:
        out += ["<details><summary>⚠️ {} file(s) the loader would skip</summary>".format(len(diff.unreadable)), ""]
        out += [f"- {side}: `{_md(path)}`: {_md(problem)}" for side, path, problem in diff.unreadable[:MAX_LISTED]]
        out += [f"- and {len(diff.unreadable) - MAX_LISTED} more"] if len(diff.unreadable) > MAX_LISTED else []
        out += ["", "</details>", ""]
    left_out = 0
    used = sum(len(line) + 1 for line in out)
    for (project, provider), changes in diff.by_group().items():
        section = [f"#### {_md(project)} / {_md(provider)}", ""]
        body = [line for change in changes for line in _change_markdown(change)]
        if len(body) > FOLD_LINES:
            counts = ", ".join(f"{sum(1 for c in changes if c.kind == k)} {k}" for k in KINDS
                               if any(c.kind == k for c in changes))
            body = [f"<details><summary>{len(changes)} change(s): {counts}</summary>", "", *body, "", "</details>"]
        size = sum(len(line) + 1 for line in section + body + [""])
        if used + size > max_chars - 200:
            left_out += len(changes)
            continue
        out += section + body + [""]
        used += size
    if left_out:
        out += [f"_{left_out} more change(s) left out to fit a comment: run `semula recordings diff` or "
                "`--json` to see them all._"]
    return redact_text("\n".join(out).rstrip() + "\n")
