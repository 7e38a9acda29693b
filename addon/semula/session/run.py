"""One proxy around a run — `semula exec` and the pytest plugin share it.

Start `semula proxy` (its console in <data dir>/proxy.log) or reuse the one already running on the
data dir in the same mode and asked for the same options (proxy/run/runinfo.py) — never another —, give the
run's clients their environment, and at the end stop the proxy (its call log flushed) and say what the
run did, from the call log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from semula.calllog.tally import Tally
from semula.core.modes import Mode
from semula.admin.protocol import read_admin_info
from semula.session.optioncheck import OptionError, check_sets
from semula.proxy.run.runinfo import differences, requested
from semula.session.ca import DEFAULT_CONFDIR, confdir_of, ensure_ca, key_size_of
from semula.session.clientenv import (client_env, intercepts_all, namespace_by_key, placeholder_keys,
                                      plain_http_possible, port_hint, port_in_use)
from semula.session.google_env import google_placeholder_env
from semula.store.datadir import make_data_dir

LOG_FILE = "proxy.log"
# A reused proxy writes its call log every second: wait that long before reading this run's rows.
FLUSH_WAIT_S = 1.5
# A run's identical requests get their answers in order, as vcrpy, mitmproxy's server replay and
# LiteLLM's test cache play them (docs/recordings.md: "Repeated identical requests"); `--set semula_repeats=one` keeps one.
RUN_DEFAULTS = ("semula_repeats=sequence",)
# How often the run looks for the proxy's ready line: a tenth of a second was a twentieth of the start-up.
READY_POLL_S = 0.01

Echo = Callable[[str], None]


def default_data_dir() -> str:
    return os.environ.get("SEMULA_DATA_DIR", ".semula")


class SessionError(Exception):
    """The run cannot have the proxy it asked for; the message says why and what to do."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class BadOption(SessionError):
    """An option's value is wrong: the message is only that, one line (no proxy was started)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


def confdir_from(sets: tuple[str, ...]) -> Path:
    return confdir_of(sets, DEFAULT_CONFDIR)


@dataclass
class ProxySession:
    """A proxy this run started (process set) or reused; `client_env` points clients at it."""

    mode: str
    host: str
    port: int
    data_dir: Path
    confdir: Path
    project: str
    sets: tuple[str, ...]
    started: datetime
    process: subprocess.Popen | None = None
    console: ProxyConsole | None = None

    def client_env(self, environ: dict[str, str] | os._Environ[str]) -> dict[str, str | None]:
        return run_env(self.mode, self.sets, self.host, self.port, self.confdir, environ,
                       None if self.project == "default" else self.project)

    def stop(self) -> str:
        """Stop the proxy this run started (its call log flushed); return the run's summary line."""
        final: Tally | None = None
        if self.process is not None:
            stop_process(self.process)
            self.process = None
        else:
            time.sleep(FLUSH_WAIT_S)
        if self.console is not None:
            self.console.close()
            final = self.console.final  # the proxy this run started counted its calls
            self.console = None
        return summary_line(final) if final is not None else run_summary(self.data_dir, self.started)


def run_env(mode: str, sets: tuple[str, ...], host: str, port: int, confdir: Path,
            environ: dict[str, str] | os._Environ[str], project: str | None = None,
            password: str = "semula") -> dict[str, str | None]:
    """The variables to set for a run's clients (None: to unset), placeholder API keys included in replay mode."""
    env = client_env(port, confdir, project, host, password, plain_http_possible(sets), intercepts_all(sets))
    if mode == Mode.REPLAY.value and not namespace_by_key(sets):
        env.update(placeholder_keys(environ))
        env.update(google_placeholder_env(environ, confdir))  # Vertex AI: session/google_env.py
    return env


def open_session(mode: str, listen_host: str, listen_port: int, data_dir: Path, project: str,
                 sets: tuple[str, ...], ready_timeout: float, echo: Echo) -> ProxySession:
    """Reuse the proxy on data_dir if it runs in this mode with these options, else start one; SessionError otherwise."""
    started = datetime.now(UTC).replace(tzinfo=None)
    confdir = confdir_from(sets)
    try:
        check_sets(sets)
    except OptionError as e:
        raise BadOption(str(e)) from None
    info = read_admin_info(data_dir)
    if info is not None:
        if info.get("mode") != mode:
            # The running proxy holds the store: a second one could not record or replay from it.
            raise SessionError(
                f"a proxy in {info.get('mode')} mode (pid {info.get('pid')}, {info.get('proxy')}) already runs on "
                f"{data_dir}, and you asked for {mode}. Stop it, or run against another data dir",
                exit_code=2)
        _check_reuse(info, mode, sets, data_dir)
        host_port = info["proxy"].split("//", 1)[-1]
        echo(f"semula: reusing the proxy already running on {data_dir} at {info['proxy']} "
             f"(pid {info.get('pid')}, mode {mode}; the options this run does not name are its own, "
             "semula_repeats included)")
        if any(s.startswith(("semula_extra_hosts=", "semula_hosts=", "semula_mcp_servers=")) for s in sets):
            echo("semula: the running proxy keeps its own hosts: the hosts asked for here (--extra-host) "
                 "apply to a proxy this run starts")
        return ProxySession(mode, host_port.rsplit(":", 1)[0], int(host_port.rsplit(":", 1)[1]),
                            data_dir, Path(info.get("confdir") or confdir),  # trust the CA actually in use
                            project, sets, started)
    # The CA before the proxy starts, so the proxy loads it and the clients trust the same one:
    # mitmproxy would make its own only after it listens (ensure_ca).
    try:
        ensure_ca(confdir, key_size_of(sets))
    except click.ClickException as e:
        raise SessionError(e.format_message()) from None
    except OSError as e:
        raise SessionError(f"cannot write the proxy's CA into {confdir}: {e}") from None
    sets = run_defaults(sets)
    # No port asked for: the proxy binds port 0 and its ready line says which port it got. A port picked
    # here and bound there could be taken by another process in between.
    process, console = _start_proxy(mode, listen_host, listen_port, data_dir, project, sets, ready_timeout, echo)
    port = console.bound_port or listen_port
    return ProxySession(mode, listen_host, port, data_dir, confdir, project, sets, started, process, console)


def _check_reuse(info: dict, mode: str, sets: tuple[str, ...], data_dir: Path) -> None:
    """Refuse a running proxy asked for other options than this run's (an orphan of a cancelled run, another
    run's proxy): it would serve this run silently with its own."""
    found = differences(info.get("run"), requested(mode, run_defaults(sets)),
                        {item.split("=", 1)[0].strip() for item in sets})
    if found:
        run = info["run"] if isinstance(info.get("run"), dict) else {}
        owner = f", started by the run with pid {run['owner']}" if run.get("owner") else ""
        raise SessionError(
            f"the {mode} proxy already running on {data_dir} (pid {info.get('pid')}, {info.get('proxy')}{owner}) "
            f"has other options than this run asks for: {'; '.join(found)}. Stop it (kill {info.get('pid')}), "
            "or run against another data dir", exit_code=2)


def run_defaults(sets: tuple[str, ...]) -> tuple[str, ...]:
    """The options a run's proxy starts with: RUN_DEFAULTS unless the run sets them itself."""
    given = {item.split("=", 1)[0] for item in sets}
    return tuple(item for item in RUN_DEFAULTS if item.split("=", 1)[0] not in given) + sets


def _start_proxy(mode: str, listen_host: str, port: int, data_dir: Path, project: str, sets: tuple[str, ...],
                 ready_timeout: float, echo: Echo) -> tuple[subprocess.Popen, ProxyConsole]:
    """Start `semula proxy` with its console in <data dir>/proxy.log; return once it is ready."""
    args = [sys.executable, "-m", "semula", "proxy", "--mode", mode, "--listen-host", listen_host,
            "--listen-port", str(port), "--data-dir", str(data_dir), "--project", project,
            "--parent-pid", str(os.getpid())]  # it stops by itself if this run is killed
    for item in sets:
        args += ["--set", item]
    # Private like the data dir the proxy creates: one the proxy finds open to others gets umask 077,
    # which would make the recordings folder it writes 0700 instead of following the user's umask.
    make_data_dir(data_dir)
    log_path = data_dir / LOG_FILE
    if log_path.is_symlink():  # never written through: a link planted in a shared data dir
        log_path.unlink()
    with os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "w") as log_file:
        process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
    console = ProxyConsole(log_path, echo)
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            if console.echo_new():
                console.follow()
                return process, console
            if process.poll() is not None or time.monotonic() > deadline:
                stop_process(process)
                text = log_path.read_text(errors="replace")
                tail = "\n".join(text.splitlines()[-20:])
                in_use = port != 0 and "--listen-port" not in tail and port_in_use(listen_host, port)  # `semula proxy` said it
                hint = f"\n{port_hint(listen_host, port)}" if in_use else ""
                raise SessionError(f"the proxy did not start (console in {log_path}):\n{tail}{hint}")
            time.sleep(READY_POLL_S)
    except BaseException:  # Ctrl-C, SIGTERM (session/signals.py) while it starts: never leave it running
        stop_process(process)
        raise


def ready_port(line: str) -> int | None:
    """The port in the proxy's ready line (`semula ready: http://127.0.0.1:PORT · …`), if it names one."""
    found = re.match(r"semula ready: (\S+)", line)
    try:
        return urlsplit(found.group(1)).port if found else None
    except ValueError:
        return None


HARNESS_ONLY = "semula: store open"  # the store opened with no folder to load: nothing for a person to read


class ProxyConsole:
    """Follows proxy.log and echoes semula's own status lines (ready, bad recordings, store problems).

    mitmproxy's lines and the one line per call stay in the file: the command's output stays its own.
    """

    def __init__(self, path: Path, echo: Echo) -> None:
        self.path = path
        self.echo = echo
        self.offset = 0
        self.ready = False
        self.bound_port: int | None = None  # from the ready line: the port the proxy listens on
        self.final: Tally | None = None  # the proxy's calls by outcome, from its last line
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def echo_new(self) -> bool:
        """Echo the status lines completed since the last call; return whether the proxy said it is ready."""
        with self._lock:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
            complete = chunk[:chunk.rfind(b"\n") + 1]
            self.offset += len(complete)
            for line in complete.decode(errors="replace").splitlines():
                if (tally := Tally.parse(line)) is not None:
                    self.final = tally  # the run's summary says it: not echoed twice
                elif line.startswith("semula ready"):
                    self.ready = True
                    self.bound_port = ready_port(line)
                    self.echo(f"{line} · console in {self.path}")
                elif line.startswith("semula") and " → " not in line and not line.startswith(HARNESS_ONLY):
                    self.echo(line)  # not a per-call line, nor one only a test harness waits for
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
    """One line from the call log: the calls since `since` by outcome (a proxy this run reused, or one
    that stopped before it could say its own tally)."""
    import duckdb

    from semula.calllog.reader import load_log
    from semula.calllog.schema import CALL_LOG_SCHEMA

    con = duckdb.connect()
    tally = Tally()
    if load_log(con, "calls", data_dir / "calls", CALL_LOG_SCHEMA):
        for row in con.execute("SELECT decision, mode, bypass_reason FROM calls WHERE ts >= ?", [since]).fetchall():
            tally.add(*row)
    return summary_line(tally)


def summary_line(tally: Tally) -> str:
    """The run's calls by outcome, or a warning when none went through semula."""
    if not tally.calls:
        return ("semula: WARNING: the command made no calls through semula — nothing was recorded or replayed. "
                "Do its clients honour HTTPS_PROXY (Node 20 needs undici's dispatcher, a JVM `semula exec --java`: "
                "certs_readme.md), or do they call a host semula does not intercept?")
    return f"semula: {tally.text()}"


def stop_process(process: subprocess.Popen) -> None:
    """SIGINT lets mitmproxy run its `done` hooks: the call log is flushed before exit."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
