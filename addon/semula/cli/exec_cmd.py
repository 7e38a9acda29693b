"""`semula exec -- CMD`: run CMD with a proxy around it, in exactly the mode asked, and say what it did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from semula.session.clientenv import extra_host_sets, java_env, recordings_sets

from semula.cli.proxy_cmd import proxy_options, refuse_bad_options
from semula.session.run import ProxySession, SessionError, open_session


def _echo(line: str) -> None:
    click.echo(line, err=True)


@click.command("exec", context_settings={"ignore_unknown_options": True})
@proxy_options
@click.option("--listen-port", type=int, default=0, help="0: a free port")
@click.option("--ready-timeout", type=float, default=60.0, show_default=True)
@click.option("--java", is_flag=True,
              help="JVM clients too: add the proxy and a truststore to JAVA_TOOL_OPTIONS (semula env --format java)")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str,
                 recordings: Path | None, no_recordings: bool, extra_hosts: tuple[str, ...], sets: tuple[str, ...],
                 ready_timeout: float, java: bool, cmd: tuple[str, ...]) -> None:
    """Run CMD with a proxy around it; exit with CMD's exit code: semula exec --mode replay -- pytest.

    The proxy's console goes to <data dir>/proxy.log; exec prints a summary of CMD's calls at the end.
    """
    refuse_bad_options(sets)
    if java:
        from semula.session.java_env import find_jdk

        find_jdk()  # no JDK: say so before a proxy starts
    sets = recordings_sets(recordings, no_recordings) + extra_host_sets(extra_hosts) + sets
    try:
        session = open_session(mode, listen_host, listen_port, data_dir, project, sets, ready_timeout, _echo)
    except SessionError as e:
        if e.exit_code == 2:
            click.echo(f"semula: refusing to run the command: {e}: semula exec --mode {mode} --data-dir DIR -- …",
                       err=True)
            sys.exit(2)
        raise click.ClickException(str(e)) from None
    try:  # from here on, whatever fails stops the proxy we started
        code = _run(cmd, _command_env(session, java))
    except KeyboardInterrupt:
        code = 130
    finally:
        summary = session.stop()
    click.echo(summary, err=True)
    sys.exit(code)


def _command_env(session: ProxySession, java: bool) -> dict[str, str]:
    environment = {**os.environ, **session.client_env(os.environ)}
    if java:  # the JVM sends no proxy user name: its calls land in the proxy's --project
        options = java_env(session.port, session.confdir, host=session.host)["JAVA_TOOL_OPTIONS"]
        environment["JAVA_TOOL_OPTIONS"] = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {options}".strip()
    return environment


def _run(cmd: tuple[str, ...], environment: dict[str, str]) -> int:
    try:
        return subprocess.run(list(cmd), env=environment).returncode
    except FileNotFoundError:
        click.echo(f"semula: command not found: {cmd[0]}", err=True)
        return 127
