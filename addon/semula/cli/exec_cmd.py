"""`semula exec -- CMD`: run CMD with a proxy around it, in exactly the mode asked, and say what it did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from semula.cli.proxy_cmd import proxy_options, recordings_sets
from semula.cli.session import SessionError, open_session


def _echo(line: str) -> None:
    click.echo(line, err=True)


@click.command("exec", context_settings={"ignore_unknown_options": True})
@proxy_options
@click.option("--listen-port", type=int, default=0, help="0: a free port")
@click.option("--ready-timeout", type=float, default=60.0, show_default=True)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str,
                 recordings: Path | None, no_recordings: bool, sets: tuple[str, ...], ready_timeout: float,
                 cmd: tuple[str, ...]) -> None:
    """Run CMD with a proxy around it; exit with CMD's exit code: semula exec --mode replay -- pytest.

    The proxy's console goes to <data dir>/proxy.log; exec prints a summary of CMD's calls at the end.
    """
    sets = recordings_sets(recordings, no_recordings) + sets
    try:
        session = open_session(mode, listen_host, listen_port, data_dir, project, sets, ready_timeout, _echo)
    except SessionError as e:
        if e.exit_code == 2:
            click.echo(f"semula: refusing to run the command: {e}: semula exec --mode {mode} --data-dir DIR -- …",
                       err=True)
            sys.exit(2)
        raise click.ClickException(str(e)) from None
    environment = {**os.environ, **session.client_env(os.environ)}
    try:
        code = subprocess.run(list(cmd), env=environment).returncode
    except FileNotFoundError:
        click.echo(f"semula: command not found: {cmd[0]}", err=True)
        code = 127
    except KeyboardInterrupt:
        code = 130
    finally:
        summary = session.stop()
    click.echo(summary, err=True)
    sys.exit(code)
