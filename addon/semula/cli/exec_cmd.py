"""`semula exec -- CMD`: run CMD with a proxy around it, in exactly the mode asked, and say what it did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from semula.session.clientenv import applied, command_sets, java_env

from semula.cli.proxy_cmd import proxy_options, refuse_bad_options
from semula.session.run import BadOption, ProxySession, SessionError, open_session
from semula.session.signals import StopSignals, Stopped

# A stopped command's time to exit (its own clean-up) before it is killed: CI runners kill exec ~10 s after SIGTERM.
CHILD_GRACE_S = 5.0


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
                 recordings: Path | None, no_recordings: bool, extra_hosts: tuple[str, ...],
                 mcp_servers: tuple[str, ...], intercept_all: bool, sets: tuple[str, ...],
                 ready_timeout: float, java: bool, cmd: tuple[str, ...]) -> None:
    """Run CMD with a proxy around it; exit with CMD's exit code: semula exec --mode replay -- pytest.

    The proxy's console goes to <data dir>/proxy.log; exec prints a summary of CMD's calls at the end.
    """
    refuse_bad_options(sets)
    if java:
        from semula.session.java_env import find_jdk

        find_jdk()  # no JDK: say so before a proxy starts
    sets = command_sets(recordings, no_recordings, extra_hosts, mcp_servers, intercept_all) + sets
    stop = StopSignals().install()  # SIGTERM/SIGHUP (a cancelled CI job): unwind like Ctrl-C, proxy stopped
    try:
        code = _around(cmd, stop, mode, listen_host, listen_port, data_dir, project, sets, ready_timeout, java)
    finally:
        stop.restore()
    sys.exit(code)


def _around(cmd: tuple[str, ...], stop: StopSignals, mode: str, listen_host: str, listen_port: int,
            data_dir: Path, project: str, sets: tuple[str, ...], ready_timeout: float, java: bool) -> int:
    """Run CMD around a proxy; the exit code: CMD's, 130 on Ctrl-C, 128+N on signal N."""
    try:
        session = open_session(mode, listen_host, listen_port, data_dir, project, sets, ready_timeout, _echo)
    except BadOption as e:
        click.echo(f"semula: {e}", err=True)
        return 2
    except SessionError as e:
        if e.exit_code == 2:
            click.echo(f"semula: refusing to run the command: {e}: semula exec --mode {mode} --data-dir DIR -- …",
                       err=True)
            return 2
        raise click.ClickException(str(e)) from None
    except Stopped as e:  # the proxy that was starting is stopped (session/run.py)
        click.echo(f"semula: {e} before the command started", err=True)
        return e.exit_code
    try:  # from here on, whatever fails stops the proxy we started
        code = _run(cmd, _command_env(session, java))
    except KeyboardInterrupt:
        code = 130
    except Stopped as e:
        click.echo(f"semula: {e}: the command was given the signal; stopping the proxy", err=True)
        code = e.exit_code
    finally:
        stop.hold()
        summary = session.stop()
    click.echo(summary, err=True)
    return stop.exit_code or code


def _command_env(session: ProxySession, java: bool) -> dict[str, str]:
    environment = applied(os.environ, session.client_env(os.environ))
    if java:  # the JVM sends no proxy user name: its calls land in the proxy's --project
        options = java_env(session.port, session.confdir, host=session.host)["JAVA_TOOL_OPTIONS"]
        environment["JAVA_TOOL_OPTIONS"] = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {options}".strip()
    return environment


def _run(cmd: tuple[str, ...], environment: dict[str, str]) -> int:
    try:
        child = subprocess.Popen(list(cmd), env=environment)
    except FileNotFoundError:
        click.echo(f"semula: command not found: {cmd[0]}", err=True)
        return 127
    try:
        return child.wait()
    except Stopped as e:
        _stop_child(child, e.signo)
        raise
    except BaseException:  # Ctrl-C: the child got it too (same process group); as subprocess.run does
        _stop_child(child, None)
        raise


def _stop_child(child: subprocess.Popen, signo: int | None) -> None:
    """Pass the signal on (a CI runner may signal exec alone), give CMD CHILD_GRACE_S to exit, then kill it."""
    if signo is not None and child.poll() is None:
        child.send_signal(signo)
    try:
        child.wait(timeout=CHILD_GRACE_S if signo is not None else 0.25)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
