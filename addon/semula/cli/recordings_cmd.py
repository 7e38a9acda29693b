"""`semula recordings check|unused|stale`, `semula export` and `semula import`: the committed recordings folder."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from semula.cli.common import data_dir_option, open_engine, print_table, run_store_operation
from semula.cli.recordings_diff_cmd import diff_command
from semula.recordings.location import default_folder as default_recordings


folder_argument = click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))


@click.group()
def recordings() -> None:
    """Check the recordings folder, and find recordings no call used or too old."""


@recordings.command("check")
@folder_argument
@click.option("--fail-on-error-answers", is_flag=True,
              help="exit 1 also when a recording answers with an error (status >= 400)")
def recordings_check(folder: Path | None, fail_on_error_answers: bool) -> None:
    """Report every recording file that cannot be loaded (exit 1 if any): for CI. Realtime
    conversations (`_realtime/`) are checked too. Recorded error answers (a 400 from a wrong path
    replays for ever) are listed."""
    from semula.core.redact import redact_text
    from semula.recordings.diff import ERROR_STATUS
    from semula.recordings.folder import check

    folder = folder or default_recordings()
    if not folder.is_dir():
        raise click.ClickException(f"no recordings folder at {folder}")
    errors: list[tuple[str, int]] = []
    good, bad = check(folder, each=lambda rel, entry: errors.append((rel, entry.status))
                      if entry.status >= ERROR_STATUS else None)
    for rel, problem in bad:
        click.echo(redact_text(f"{folder / rel}: {problem}"), err=True)
    click.echo(f"{good} recording(s) load, {len(bad)} bad, in {folder}")
    if errors:
        click.echo(f"{len(errors)} recording(s) answer with an error (status >= {ERROR_STATUS}); committed, "
                   "they replay that error (delete the file and record again if it was a mistake):")
        for rel, status in errors:
            click.echo(redact_text(f"  {folder / rel}: {status}"))
    _warn_tracked_data_dirs(folder)
    sys.exit(1 if bad or (fail_on_error_answers and errors) else 0)


def _warn_tracked_data_dirs(folder: Path) -> None:
    """The data dir beside the folder holds every prompt and answer and the admin token: never in git."""
    from semula.session.run import default_data_dir
    from semula.store.datadir import tracked_data_dirs

    for directory, files in tracked_data_dirs(folder, Path(default_data_dir())).items():
        click.echo(f"semula: WARNING: git tracks {files} file(s) of the data dir {directory} (its store and call "
                   f"logs hold every prompt and answer): untrack it with `git rm -r --cached {directory}` and put a "
                   "`.gitignore` holding `*` in it", err=True)


@recordings.command("unused")
@folder_argument
@data_dir_option
@click.option("--shard", "shards", multiple=True, type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="another run's data dir (or its calls dir), e.g. a CI shard's artifact; repeatable")
@click.option("--run", "runs", multiple=True, help="use these run ids of the call log (default: the last run)")
@click.option("--delete", is_flag=True, help="delete the unused recordings (files and entries) and unused sidecars")
@click.option("--fail", is_flag=True, help="exit 1 when any recording or sidecar is unused (a CI gate)")
@click.option("--json", "as_json", is_flag=True, help="print JSON lines ({entry, file} or {sidecar}) instead of tables")
def recordings_unused(folder: Path | None, data_dir: Path, shards: tuple[Path, ...], runs: tuple[str, ...],
                      delete: bool, fail: bool, as_json: bool) -> None:
    """Recordings that no call of the last run (or of --run ids, or of any --shard) used.

    A partial run (pytest -k, one CI shard) leaves recordings that other tests need looking unused:
    pass every shard's data dir with --shard, and base --delete on all of them.
    """
    from semula.recordings import sidecars
    from semula.recordings.folder import RecordingsFolder
    from semula.recordings.files import contained
    from semula.recordings.usage import recording_files, shard_of, unused_files

    folder = (folder or default_recordings()).resolve()
    try:
        evidence = [shard_of(data_dir, runs)] if (runs or not shards) else []
        evidence += [shard_of(path) for path in shards]
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    for shard in evidence:
        click.echo(f"based on {shard.name} ({shard.calls} calls)", err=True)
    if len(evidence) == 1:
        click.echo("a partial run (pytest -k, one CI shard) makes recordings other tests need look unused: "
                   "pass each shard with --shard", err=True)
    here = {rel: info["entry_id"] for rel, info in RecordingsFolder(folder, data_dir).files.items()}
    unused = unused_files(recording_files(folder), here, evidence)
    orphans = sidecars.unreferenced(folder) if folder.is_dir() else []
    if as_json:
        for line in [{"entry": e, "file": rel} for e, rel in unused] + [{"sidecar": rel} for rel in orphans]:
            click.echo(json.dumps(line))
    else:
        print_table(f"{len(unused)} unused recording(s) in {folder}",
                    [{"entry": e, "file": rel} for e, rel in unused], ["entry", "file"])
    if orphans and not as_json:
        print_table(f"{len(orphans)} sidecar(s) no recording refers to", [{"file": rel} for rel in orphans], ["file"])
    if delete:
        for entry_id, rel in unused:
            if entry_id is not None:
                run_store_operation(data_dir, "entries.delete", {"id": entry_id})
            else:  # not loaded in this data dir: only its file
                contained(folder, rel).unlink(missing_ok=True)
        pruned = sidecars.prune(folder)
        click.echo(f"deleted {len(unused)} recording(s) and {len(pruned)} sidecar(s)")
    sys.exit(1 if fail and (unused or orphans) else 0)


@recordings.command("stale")
@folder_argument
@click.option("--max-age", help="older than this is stale (30d, 12h, 2w); default: each project's max_age")
@click.option("--project", help="only this project's recordings")
@click.option("--json", "as_json", is_flag=True, help="print JSON lines instead of a table")
def recordings_stale(folder: Path | None, max_age: str | None, project: str | None, as_json: bool) -> None:
    """Recordings older than max_age, oldest first, with the SDK and model that made them."""
    from datetime import UTC, datetime

    from semula.core.expiry import parse_duration
    from semula.recordings.usage import stale

    folder = folder or default_recordings()
    if not folder.is_dir():
        raise click.ClickException(f"no recordings folder at {folder}")
    if max_age is not None:
        try:
            parse_duration(max_age)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--max-age") from None
    rows, bad = stale(folder, datetime.now(UTC).replace(tzinfo=None), max_age, project)
    for rel, problem in bad:
        click.echo(f"{folder / rel}: skipped: {problem}", err=True)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False))
        return
    print_table(f"{len(rows)} stale recording(s) in {folder}", rows, ["file", "age", "max_age", "sdk", "model"])


@click.command("export")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@data_dir_option
def export_command(folder: Path, data_dir: Path) -> None:
    """Write every recording of the store as files in FOLDER."""
    from semula.recordings.folder import RecordingsFolder

    with open_engine(data_dir) as engine:
        count = RecordingsFolder(folder, data_dir).export(engine.store)
    click.echo(f"exported {count} recording(s) to {folder}")


@click.command("import")
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
@data_dir_option
def import_command(folder: Path, data_dir: Path) -> None:
    """Load the recording files of FOLDER into the store (changed files are re-imported)."""
    from semula.recordings.folder import RecordingsFolder

    with open_engine(data_dir, RecordingsFolder(folder, data_dir)) as engine:
        report = engine.sync_report
    assert report is not None
    click.echo(report.line(folder))
    for rel, problem in report.bad:
        click.echo(f"{folder / rel}: {problem}", err=True)
    sys.exit(1 if report.bad else 0)


recordings.add_command(diff_command)
