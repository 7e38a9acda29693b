"""`semula import --from vcr|har|mitmproxy PATH…`: other tools' recordings into the recordings folder.

Without `--from` it is the older `semula import FOLDER` (recording files into the store).

Exit status: 0 when every entry was written or left out by a rule (not a provider call, a duplicate,
already in the folder, an error answer the policy does not record); 1 when any file or entry could
not be imported (unreadable, hostile, over a cap) or a file could not be written. The good entries
of the same command are written either way, and the summary line counts each kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from semula.cli.common import data_dir_option, json_option, print_table
from semula.core.settings import DEFAULT_PROJECT, SettingsError, validate_project
from semula.recordings.importers import SOURCES


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--from", "source", type=click.Choice(SOURCES), default=None,
              help="convert VCR cassettes (vcrpy, pytest-recording, pydantic-ai), HAR files or mitmproxy flow "
                   "files [default: PATH is a recordings folder, loaded into the store]")
@click.option("--project", default=DEFAULT_PROJECT, show_default=True, help="the project the recordings go to")
@click.option("--hosts", multiple=True, metavar="HOST",
              help="also import calls to this non-provider host (repeatable, or comma-separated; *.example.com)")
@click.option("--recordings", "folder", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="the recordings folder [default: ./semula-recordings, or $SEMULA_RECORDINGS]")
@click.option("--header", "fill", multiple=True, metavar="PROVIDER:NAME=VALUE",
              help="a header to add to a provider's requests that lack it (e.g. anthropic:anthropic-beta=…); "
                   "anthropic-version defaults to the installed Anthropic SDK's")
@click.option("--repeats", type=click.Choice(["first", "sequence"]), default="first", show_default=True,
              help="a request recorded again: keep its first answer, or each in order (semula_repeats=sequence)")
@click.option("--record-errors", is_flag=True, help="also import 401/403/429/5xx answers (semula_record_errors)")
@click.option("--max-body-mb", type=click.FloatRange(min=0, min_open=True), default=None,
              help="request bodies over this many MB are not imported [default: the proxy's semula_max_body_mb, 32]")
@click.option("--dry-run", is_flag=True, help="show what would be written, write nothing")
@json_option
@data_dir_option
def import_command(paths: tuple[Path, ...], source: str | None, project: str, hosts: tuple[str, ...],
                   folder: Path | None, fill: tuple[str, ...], repeats: str, record_errors: bool,
                   max_body_mb: float | None, dry_run: bool, as_json: bool, data_dir: Path) -> None:
    """Convert other tools' recordings into recording files (--from), or load a recordings FOLDER."""
    if source is None:
        from semula.cli.recordings_cmd import import_command as load_folder

        if len(paths) != 1 or not paths[0].is_dir():
            raise click.UsageError("without --from, give one recordings folder (or --from vcr|har|mitmproxy)")
        load_folder.callback(folder=paths[0], data_dir=data_dir)  # type: ignore[misc]
        return
    from semula.cli.recordings_cmd import default_recordings
    from semula.recordings.importers import convert, read, write

    try:
        validate_project(project)
    except SettingsError as e:
        raise click.BadParameter(str(e), param_hint="--project") from None
    root = (folder or default_recordings()).expanduser().resolve()
    extra = tuple(h.strip().lower() for value in hosts for h in value.split(",") if h.strip())
    try:
        key = write.folder_key(root, create=not dry_run)
    except OSError as e:
        raise click.ClickException(str(e)) from None
    options = convert.ImportOptions(project=project, hosts=extra, record_errors=record_errors,
                                    sequence=repeats == "sequence", fill_headers=_fill_headers(fill),
                                    **({"max_body_bytes": int(max_body_mb * 2**20)} if max_body_mb else {}))
    results = write.kept_existing(root, convert.plan(read.interactions(list(paths), source), options, key))
    failed: dict[str, str] = {}
    written = 0 if dry_run else write.write(root, results, lambda p, e: failed.__setitem__(p.source, str(e)))
    rows = [_row(r, dry_run, failed) for r in results]
    errors = sum(1 for r in rows if r["result"] == "error")
    if as_json:
        click.echo(json.dumps({"folder": str(root), "dry_run": dry_run, "written": written, "errors": errors,
                               "unwritten": len(failed), "items": rows}, indent=2))
        if problem := _problem(errors, len(failed), dry_run):
            click.echo(f"Error: {problem}", err=True)  # stdout stays JSON
            click.get_current_context().exit(1)
        return
    print_table(f"{'would write' if dry_run else 'import'} into {root}",
                [{**r, "file or reason": r["file"] or r["reason"]} for r in rows],
                ["source", "result", "provider", "status", "file or reason"])
    skipped = sum(1 for r in rows if r["result"] == "skipped")
    done = (f"{sum(1 for r in rows if r['result'] == 'would write')} recording(s) would be written" if dry_run
            else f"{written} recording(s) written")
    click.echo(f"{done}, {skipped} left out by rule, {errors} could not be imported (reasons above)"
               f"{'; nothing written (dry run)' if dry_run else ''}")
    if problem := _problem(errors, len(failed), dry_run):
        raise click.ClickException(problem)


def _problem(errors: int, unwritten: int, dry_run: bool) -> str:
    """What makes the exit status 1, in one line ("" when nothing did)."""
    return "; ".join(
        ([f"{errors} entr{'y' if errors == 1 else 'ies'} could not be imported (the others were "
          f"{'checked' if dry_run else 'written'})"] if errors else [])
        + ([f"{unwritten} file(s) could not be written"] if unwritten else []))


def _row(result: Any, dry_run: bool, failed: dict[str, str]) -> dict[str, Any]:
    from semula.recordings.importers.convert import Planned

    if isinstance(result, Planned):
        problem = failed.get(result.source)
        return {"source": result.source, "result": "failed" if problem else "would write" if dry_run else "written",
                "provider": result.provider, "status": result.status, "streamed": result.streamed,
                "file": result.rel, "reason": problem}
    return {"source": result.source, "result": "error" if result.failed else "skipped", "provider": None,
            "status": None, "streamed": None, "file": None, "reason": result.reason}


def _fill_headers(values: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """`--header provider:name=value`, over the default: the `anthropic-version` the installed SDK sends,
    which a replayed call carries (the API refuses a request without one, so a cassette without it lost it)."""
    out: dict[str, dict[str, str]] = {}
    try:
        from anthropic._constants import ANTHROPIC_API_VERSION

        out["anthropic"] = {"anthropic-version": ANTHROPIC_API_VERSION}
    except ImportError:
        out["anthropic"] = {"anthropic-version": "2023-06-01"}
    for value in values:
        provider, colon, pair = value.partition(":")
        name, equals, header_value = pair.partition("=")
        if not colon or not equals or not name.strip():
            raise click.BadParameter(f"{value!r} is not PROVIDER:NAME=VALUE", param_hint="--header")
        out.setdefault(provider.strip(), {})[name.strip().lower()] = header_value.strip()
    return out
