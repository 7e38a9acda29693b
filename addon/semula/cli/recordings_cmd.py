"""`semula recordings check|unused`, `semula export` and `semula import`: the committed recordings folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from semula.cli.common import data_dir_option, open_engine, print_table, run_store_operation
from semula.recordings.location import DEFAULT_RECORDINGS, recordings_location

def default_recordings() -> Path:
    """The folder a proxy started here records into; when that is off, the default one."""
    return recordings_location(os.environ.get("SEMULA_RECORDINGS")) or Path(DEFAULT_RECORDINGS)


folder_argument = click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))


@click.group()
def recordings() -> None:
    """Check the recordings folder, and find recordings no call used."""


@recordings.command("check")
@folder_argument
def recordings_check(folder: Path | None) -> None:
    """Report every recording file that cannot be loaded (exit 1 if any): for CI."""
    from semula.recordings.folder import check

    folder = folder or default_recordings()
    if not folder.is_dir():
        raise click.ClickException(f"no recordings folder at {folder}")
    good, bad = check(folder)
    for rel, problem in bad:
        click.echo(f"{folder / rel}: {problem}", err=True)
    click.echo(f"{good} recording(s) load, {len(bad)} bad, in {folder}")
    sys.exit(1 if bad else 0)


@recordings.command("unused")
@folder_argument
@data_dir_option
@click.option("--delete", is_flag=True, help="delete the unused recordings (files and entries)")
def recordings_unused(folder: Path | None, data_dir: Path, delete: bool) -> None:
    """Recordings that no call of the last run (one proxy process, one `semula exec`) used.

    A partial run (pytest -k, one CI shard) leaves recordings that other tests need looking unused:
    base --delete on a full run.
    """
    import duckdb

    from semula.recordings.folder import RecordingsFolder
    from semula.store.logread import load_log
    from semula.store.logschema import CALL_LOG_SCHEMA

    folder = (folder or default_recordings()).resolve()
    con = duckdb.connect()
    if not load_log(con, "calls", data_dir / "calls", CALL_LOG_SCHEMA):
        raise click.ClickException(f"no call log in {data_dir / 'calls'}: run the tests through semula first")
    run = con.execute("SELECT run_id, min(ts), max(ts), count(*) FROM calls WHERE run_id IS NOT NULL "
                      "GROUP BY run_id ORDER BY max(ts) DESC LIMIT 1").fetchone()
    if run is None:
        raise click.ClickException("the call log has no run ids yet (it predates them): run the tests once more")
    used = {row[0] for row in con.execute("SELECT DISTINCT entry_id FROM calls WHERE run_id = ? AND entry_id IS NOT NULL",
                                          [run[0]]).fetchall()}
    files = RecordingsFolder(folder, data_dir).files
    unused = sorted((info["entry_id"], rel) for rel, info in files.items() if info["entry_id"] not in used)
    click.echo(f"based on run {run[0]} ({run[3]} calls, {run[1]:%Y-%m-%d %H:%M} to {run[2]:%H:%M} UTC); "
               "a partial run (pytest -k, one CI shard) makes recordings other tests need look unused", err=True)
    print_table(f"{len(unused)} unused recording(s) in {folder}",
                [{"entry": e, "file": rel} for e, rel in unused], ["entry", "file"])
    if delete:
        for entry_id, _ in unused:
            run_store_operation(data_dir, "entries.delete", {"id": entry_id})
        click.echo(f"deleted {len(unused)} recording(s)")


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
