"""A throwaway PostgreSQL server for the tests, started from the machine's own binaries.

`initdb` and `pg_ctl` run as the `postgres` user (PostgreSQL refuses to run as root) in a temporary
directory that user can read, on a free port, with trust authentication on loopback only; the server
is stopped and its directory removed at the end, and by a guard process should the test process die
without its teardown (a killed xdist worker), so no server outlives its run. Without binaries the tests that need it skip and
say so loudly, unless `SEMULA_REQUIRE_POSTGRES=1` (`.ci/run` sets it): then they fail with the reason.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from e2e_helpers import free_port

REQUIRE_ENV = "SEMULA_REQUIRE_POSTGRES"


class PostgresUnavailable(Exception):
    pass


def _bindir() -> Path:
    """The directory of `initdb`/`pg_ctl`: $SEMULA_PG_BINDIR, `pg_config --bindir`, else PATH."""
    if given := os.environ.get("SEMULA_PG_BINDIR"):
        return Path(given)
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").is_file():
            return Path(out.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    initdb = shutil.which("initdb")
    if initdb is None:
        raise PostgresUnavailable("no PostgreSQL binaries: neither `pg_config --bindir` nor PATH has initdb")
    return Path(initdb).resolve().parent


@dataclass
class PostgresServer:
    bindir: Path
    root: Path
    port: int
    as_postgres: list[str]
    guard: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        auth = f"postgres:{password}" if password else "postgres"
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def _ctl(self, *args: str, timeout: float = 60) -> None:
        out = subprocess.run([*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", *args],
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise PostgresUnavailable(f"pg_ctl {' '.join(args)} failed: {(out.stderr or out.stdout).strip()}")

    def start(self) -> None:
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._ctl("-l", str(self.root / "server.log"), "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "stop")

    def stop_argv(self, mode: str = "immediate") -> list[str]:
        return [*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-m", mode, "stop"]

    def new_database(self) -> str:
        """A fresh empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def start_postgres() -> PostgresServer:
    """initdb + start on a free port; raises PostgresUnavailable saying why."""
    bindir = _bindir()
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (bindir / tool).is_file():
            raise PostgresUnavailable(f"{bindir / tool} is missing")
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError as e:
            raise PostgresUnavailable("running as root and there is no `postgres` user to run the server as") from e
        if shutil.which("runuser") is None:
            raise PostgresUnavailable("running as root and `runuser` is missing")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="semula-pg-"))
    if as_postgres:
        os.chown(root, user.pw_uid, user.pw_gid)
    root.chmod(0o700)
    server = PostgresServer(bindir, root, free_port(), as_postgres)
    out = subprocess.run([*as_postgres, str(bindir / "initdb"), "-D", str(server.data), "-U", "postgres",
                          "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise PostgresUnavailable(f"initdb failed: {(out.stderr or out.stdout).strip()[-500:]}")
    server.guard = _start_guard(server)
    try:
        server.start()
    except PostgresUnavailable:
        log = (root / "server.log").read_text(errors="replace")[-500:] if (root / "server.log").exists() else ""
        _end_guard(server)
        raise PostgresUnavailable(f"the server did not start: {log}") from None
    return server


# Waits for its stdin to close (this process ended, however: the kernel closes the pipe), then stops the
# server and removes its directory; a no-op when discard() already did both.
_GUARD = """
import json, shutil, subprocess, sys
stop, root = json.loads(sys.argv[1]), sys.argv[2]
sys.stdin.buffer.read()
try:
    subprocess.run(stop, capture_output=True, timeout=60)
finally:
    shutil.rmtree(root, ignore_errors=True)
"""


def _start_guard(server: PostgresServer) -> subprocess.Popen[bytes]:
    # Its own session, so a signal to the test run's process group leaves it to do its work.
    return subprocess.Popen([sys.executable, "-c", _GUARD, json.dumps(server.stop_argv()), str(server.root)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _end_guard(server: PostgresServer) -> None:
    """Close the guard's pipe: it stops the server (if still running) and removes the directory."""
    if server.guard is None:
        shutil.rmtree(server.root, ignore_errors=True)
        return
    assert server.guard.stdin is not None
    server.guard.stdin.close()
    try:
        server.guard.wait(90)
    except subprocess.TimeoutExpired:
        server.guard.kill()
        server.guard.wait(10)
    shutil.rmtree(server.root, ignore_errors=True)


def discard(server: PostgresServer) -> None:
    try:
        server.stop("immediate")
    except PostgresUnavailable:
        pass
    _end_guard(server)


def required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"
