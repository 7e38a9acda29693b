"""`semula exec -- CMD`: run CMD with a proxy around it, in exactly the mode asked, and say what it did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from semula.cli.proxy_cmd import (
    DEFAULT_CONFDIR,
    client_env,
    namespace_by_key,
    placeholder_keys,
    port_hint,
    port_in_use,
    proxy_options,
    recordings_sets,
)
from semula.core.modes import Mode
from semula.proxy.admin import read_admin_info

LOG_FILE = "proxy.log"
# A reused proxy writes its call log every second: wait that long before reading this run's rows.
FLUSH_WAIT_S = 1.5


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _confdir_from(sets: tuple[str, ...]) -> Path:
    for item in sets:
        if item.startswith("confdir="):
            return Path(item.split("=", 1)[1]).expanduser()
    return Path(DEFAULT_CONFDIR).expanduser()


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
    confdir = _confdir_from(sets)
    started = datetime.now(UTC).replace(tzinfo=None)
    info = read_admin_info(data_dir)
    process = console = None
    if info is not None:
        if info.get("mode") != mode:
            # The running proxy holds the store: a second one could not record or replay from it.
            click.echo(f"semula: refusing to run the command: a {info.get('mode')} proxy (pid {info.get('pid')}, "
                       f"{info.get('proxy')}) already runs on {data_dir}, and you asked for {mode}. Stop it, "
                       f"or run against another data dir: semula exec --mode {mode} --data-dir DIR -- …", err=True)
            sys.exit(2)
        port = int(info["proxy"].rsplit(":", 1)[1])
        confdir = Path(info.get("confdir") or confdir)  # trust the CA of the proxy actually running
        click.echo(f"semula: reusing the proxy already running on {data_dir} at {info['proxy']} "
                   f"(pid {info.get('pid')}, mode {mode})", err=True)
    else:
        port = listen_port or free_port()
        process, console = _start_proxy(mode, listen_host, port, data_dir, project, sets, ready_timeout)
    environment = {**os.environ, **client_env(port, confdir, None if project == "default" else project, listen_host)}
    if mode == Mode.REPLAY.value and not namespace_by_key(sets):
        environment.update(placeholder_keys(os.environ))
    try:
        result = subprocess.run(list(cmd), env=environment)
        code = result.returncode
    except FileNotFoundError:
        click.echo(f"semula: command not found: {cmd[0]}", err=True)
        code = 127
    except KeyboardInterrupt:
        code = 130
    finally:
        if process is not None:
            _stop(process)
        if console is not None:
            console.close()
    if process is None:
        time.sleep(FLUSH_WAIT_S)
    click.echo(run_summary(data_dir, started), err=True)
    sys.exit(code)


def _start_proxy(mode: str, listen_host: str, port: int, data_dir: Path, project: str, sets: tuple[str, ...],
                 ready_timeout: float) -> tuple[subprocess.Popen, ProxyConsole]:
    """Start `semula proxy` with its console in <data dir>/proxy.log; return once it is ready."""
    args = [sys.executable, "-m", "semula", "proxy", "--mode", mode, "--listen-host", listen_host,
            "--listen-port", str(port), "--data-dir", str(data_dir), "--project", project]
    for item in sets:
        args += ["--set", item]
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / LOG_FILE
    with os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as log_file:
        process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
    console = ProxyConsole(log_path)
    deadline = time.monotonic() + ready_timeout
    while True:
        if console.echo_new():
            console.follow()
            return process, console
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            text = log_path.read_text(errors="replace")
            tail = "\n".join(text.splitlines()[-20:])
            in_use = "--listen-port" not in tail and port_in_use(listen_host, port)  # `semula proxy` said it
            hint = f"\n{port_hint(listen_host, port)}" if in_use else ""
            raise click.ClickException(f"the proxy did not start (console in {log_path}):\n{tail}{hint}")
        time.sleep(0.1)


class ProxyConsole:
    """Follows proxy.log and echoes semula's own status lines (ready, bad recordings, store problems).

    mitmproxy's lines and the one line per call stay in the file: the command's output stays its own.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.ready = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def echo_new(self) -> bool:
        """Echo the status lines completed since the last call; return whether the proxy said it is ready."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if line.startswith("semula ready"):
                self.ready = True
                click.echo(f"{line} · console in {self.path}", err=True)
            elif line.startswith("semula") and " → " not in line:  # not a per-call line
                click.echo(line, err=True)
        return self.ready

    def follow(self) -> None:
        def run() -> None:
            while not self._stop.wait(0.2):
                self.echo_new()

        self._thread = threading.Thread(target=run, name="semula-console", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.echo_new()


def run_summary(data_dir: Path, since: datetime) -> str:
    """One line: this run's calls by outcome, or a warning when none went through semula."""
    import duckdb

    from semula.store.logread import load_log
    from semula.store.logschema import CALL_LOG_SCHEMA

    con = duckdb.connect()
    rows: tuple = (0, 0, 0, 0)
    if load_log(con, "calls", data_dir / "calls", CALL_LOG_SCHEMA):
        rows = con.execute(
            "SELECT count(*), count(*) FILTER (decision = 'hit'), "
            "count(*) FILTER (decision = 'miss' AND mode <> 'replay'), "
            "count(*) FILTER (mode = 'replay' AND decision <> 'hit') FROM calls WHERE ts >= ?", [since]).fetchone()
    calls, hits, misses, refused = rows
    if not calls:
        return ("semula: WARNING: the command made no calls through semula — nothing was recorded or replayed. "
                "Do its clients honour HTTPS_PROXY (certs_readme.md), or do they call a host semula does not "
                "intercept?")
    other = calls - hits - misses - refused
    other_text = f" · {other} other (bypass/passthrough/error)" if other else ""
    return (f"semula: {_count(calls, 'call', 'calls')} · {_count(hits, 'hit', 'hits')} · "
            f"{_count(misses, 'miss', 'misses')} · {refused} refused{other_text}")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _stop(process: subprocess.Popen) -> None:
    """SIGINT lets mitmproxy run its `done` hooks: the call log is flushed before exit."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
