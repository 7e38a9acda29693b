"""`semula recordings diff`: what a pull request changes in the recordings folder, for a reviewer and a CI gate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from semula.cli.common import print_table

if TYPE_CHECKING:
    from semula.core.redact import FingerprintKey
    from semula.recordings.diff import RecordingsDiff
    from semula.recordings.diffsides import Side

FAIL_ON = ("answer-changed", "error-answer", "unreadable", "request-changed", "any")
EXIT_USAGE = 2


class UsageProblem(click.ClickException):
    """A side that cannot be read (no such folder or commit, no repository): one line, exit 2."""

    exit_code = EXIT_USAGE


def _fail_on(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    chosen = [name.strip() for value in values for name in value.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in FAIL_ON]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: choose from {', '.join(FAIL_ON)}")
    return chosen


@click.command("diff")
@click.argument("base", required=False)
@click.argument("head", required=False)
@click.option("--folder", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="the recordings folder (in the work tree; inside each commit, the same path) "
                   "[default: $SEMULA_RECORDINGS, else ./semula-recordings]")
@click.option("--format", "output", type=click.Choice(["text", "markdown", "json"]), default="text",
              help="text (a terminal view), markdown (a pull-request comment) or json")
@click.option("--json", "as_json", is_flag=True, help="the same as --format json")
@click.option("--fail-on", "fail_on", multiple=True, callback=_fail_on, metavar="LIST",
              help=f"exit 1 when the diff holds one of these (comma-separated, repeatable): {', '.join(FAIL_ON)}")
@click.option("--max-chars", type=click.IntRange(min=1000), default=None,
              help="cap of the Markdown output [default: 60000, a GitHub comment's room]")
def diff_command(base: str | None, head: str | None, folder: Path | None, output: str, as_json: bool,
                 fail_on: list[str], max_chars: int | None) -> None:
    """What changed in the recordings between BASE and HEAD: per project and provider, the recordings
    added, removed, re-recorded (same request, new answer) and those whose request changed; for each
    changed one, which request fields differ (the replay-miss message's reasons) and whether the answer's
    text, tool calls, model, usage or status changed. Error answers (status >= 400) are flagged.

    BASE and HEAD are git commits (a branch, a tag, a sha) or folders. Without HEAD: the work tree's
    folder. Without BASE: where this branch left the default branch (origin/HEAD, else main or master).
    A commit's files are read as the loader reads a folder: a file it would skip is listed as unreadable.

    \b
    Exit codes (for a CI gate):
      0  none of the --fail-on conditions holds (always, without --fail-on)
      1  one holds:
           answer-changed   an answer changed, its request did not
           error-answer     an added or changed recording answers >= 400
           unreadable       a HEAD file the loader would skip
           request-changed  a recording's request changed
           any              any change
      2  a usage error: no such folder or commit, not a git repository
    """
    from semula.core.redact import FingerprintKey, redact_text
    from semula.recordings.diff import compare
    from semula.recordings.diffsides import SideError
    from semula.recordings.diffview import MARKDOWN_MAX_CHARS, markdown, to_json
    from semula.recordings.location import default_folder

    folder = folder or default_folder()
    key = FingerprintKey.generate()  # one key for both sides: a secret's tag is the same on each
    try:
        base_side, head_side = _sides(base, head, folder, key)
    except SideError as e:
        raise UsageProblem(redact_text(str(e))) from None
    result = compare(base_side.entries, head_side.entries,
                     tuple(("base", p, why) for p, why in base_side.unreadable)
                     + tuple(("head", p, why) for p, why in head_side.unreadable))
    failed = failures(result, fail_on)
    if as_json or output == "json":
        click.echo(to_json(result, base_side.label, head_side.label, failed))
    elif output == "markdown":
        text = markdown(result, base_side.label, head_side.label, failed, max_chars or MARKDOWN_MAX_CHARS)
        click.echo(text, nl=False)
    else:
        _terminal(result, base_side.label, head_side.label, failed)
    sys.exit(1 if failed else 0)


def _sides(base: str | None, head: str | None, folder: Path, key: FingerprintKey) -> tuple[Side, Side]:
    """Each side read: a folder as it is, a commit's folder through a checkout in a temporary directory."""
    from semula.recordings.diffsides import (
        commit_of, default_base, folder_in_repository, read_commit, read_folder, repository_top,
    )

    def top() -> Path:
        return repository_top(folder.parent if folder.parent.is_dir() else Path.cwd())

    def read(spec: str, name: str | None = None) -> Side:
        if Path(spec).is_dir():
            return read_folder(spec, Path(spec), key)
        commit = commit_of(top(), spec)
        return read_commit(f"{name or spec} ({commit[:10]})", top(), commit, folder_in_repository(top(), folder), key)

    base_side = read(*reversed(default_base(top()))) if base is None else read(base)
    head_side = read(head) if head is not None else read_folder(f"work tree ({folder})", folder, key)
    return base_side, head_side


def failures(result: RecordingsDiff, fail_on: list[str]) -> list[str]:
    """The --fail-on conditions the diff holds, each with how many recordings hold it."""
    from semula.recordings.diff import ADDED, REMOVED, REQUEST_CHANGED

    changed = [c for c in result.changes if c.kind not in (ADDED, REMOVED)]
    held = {
        "answer-changed": sum(1 for c in changed if c.answer_changed and not c.request_differences),
        "error-answer": sum(1 for c in result.changes if c.error_status is not None),
        "unreadable": sum(1 for side, _, _ in result.unreadable if side == "head"),
        "request-changed": sum(1 for c in result.changes if c.kind == REQUEST_CHANGED),
        "any": len(result.changes),
    }
    return [f"{name} ({held[name]})" for name in dict.fromkeys(fail_on) if held[name]]


def _terminal(result: RecordingsDiff, base: str, head: str, failed: list[str]) -> None:
    from semula.core.redact import redact_text
    from semula.recordings.diffview import answer_words, detail_lines, flag, path_words, request_words, summary

    clean = redact_text
    click.echo(clean(f"semula recordings diff: {base} → {head}: {summary(result)}"))
    for (project, provider), changes in result.by_group().items():
        rows = [{"change": c.kind, "file": clean(path_words(c)), "request": clean(request_words(c)),
                 "answer": clean(answer_words(c)), "flag": clean(flag(c))} for c in changes]
        print_table(clean(f"{project} / {provider}"), rows, ["change", "file", "request", "answer", "flag"])
        for change in changes:
            if (details := detail_lines(change)):
                click.echo(clean(f"  {change.path}:"))
                for line in details:
                    click.echo(clean(f"    {line}"))
    if result.error_answers:
        click.echo(f"{len(result.error_answers)} recording(s) answer with an error (status >= 400); committed, "
                   "they replay that error:")
        for path, status in result.error_answers:
            click.echo(clean(f"  {path}: {status}"))
    for side, path, problem in result.unreadable:
        click.echo(clean(f"unreadable ({side}): {path}: {problem}"), err=True)
    if failed:
        click.echo(f"failing: {', '.join(failed)}", err=True)
