"""`semula report`: one HTML page answering "is the cache doing its job?".

Thin edge over `semula.reporting.report.build_report`; the heavy imports (nbclient,
nbconvert, matplotlib) happen only when the command runs, so `semula --help`
stays fast and works without the analysis extra.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="SEMULA_DATA_DIR",
    default=Path(".semula"),
    show_default=True,
    show_envvar=True,
    help="semula data dir whose calls/ and reviews/ Parquet logs to analyse.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("report.html"),
    show_default=True,
    help="Where to write the self-contained HTML report.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def report(data_dir: Path, out: Path, quiet: bool) -> None:
    """Run the analysis notebooks on the current logs and write one HTML report."""
    from datetime import UTC, datetime

    from semula.cli.recordings_cmd import default_recordings
    from semula.recordings.usage import provenance_summary
    from semula.reporting.report import ReportError, build_report

    summary = provenance_summary(default_recordings(), datetime.now(UTC).replace(tzinfo=None))
    try:
        path = build_report(data_dir, out, progress=not quiet, recordings=summary)
    except ReportError as e:
        raise click.ClickException(str(e)) from e
    click.echo(str(path))
