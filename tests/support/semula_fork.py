"""A warm parent for the `semula` processes the tests start: it imports what a proxy imports once, then forks
the command each test asks for, so a start costs a fork and the command's own work, not ~1 s of imports.

Each forked child runs the real `semula` command (semula.cli.run with the test's argv), in the test's
working directory, environment and umask, with its output on pipes the test owns and a session of its own
(`os.killpg` on its pid works as with `start_new_session`). What it does not cover, the import path of a
fresh process, the tests of `semula exec` (never forked here), the pytest plugin, the start-up
benchmark and the tests that check what a fresh process imports still run.

The server (this file run as a script, one per test process) is single-threaded: it forks only from its
main loop, which waits on its listening socket, on each child's pidfd (to send the child's exit code back
on the connection that asked for it) and on its stdin (its end: the test process is gone).

The client side: `spawn` (a running process: `semula proxy`, `semula review web`) returns a
`ForkedProcess`, the part of `subprocess.Popen` the tests use; `run` is `subprocess.run` with the output
captured. Both fall back to a process of its own when the server cannot be used (SEMULA_TEST_FORK=0, an
environment whose interpreter settings differ from the server's, a server that failed, `exec`, `report`).
"""

from __future__ import annotations

import atexit
import gc
import io
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Variables a Python process reads at start or at import: a child asked for with other values than the
# server's gets a process of its own.
_START_VARIABLES = ("PYTHON", "LD_", "MALLOC", "SEMULA_TEST_FORK")
_SAME_IN_A_CHILD = ("PYTHONUNBUFFERED",)  # a child's stdout and stderr are unbuffered either way


# ---------------------------------------------------------------------------
# The server


def preload() -> None:
    """What `semula proxy` imports before and just after it is ready (its own order: the finders first)."""
    from semula.cli import without_pandas

    without_pandas()
    from semula.proxy.run import lean

    lean.install()
    import mitmproxy.addons  # noqa: F401
    import mitmproxy.tools.dump  # noqa: F401
    import mitmproxy.tools.main  # noqa: F401

    import semula.cli.proxy_cmd  # noqa: F401
    import semula.mitm_addon  # noqa: F401
    # Not duckdb nor numpy (the store's): each starts a thread when imported, and a fork copies none of a
    # process's threads, so a lock one of them held would stay locked in the child.


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def serve(path: str) -> None:
    preload()
    if threads() != 1:  # forking would copy a process whose other threads' locks may be held
        print(f"not forking: {threads()} threads after the imports", flush=True)
        return
    gc.freeze()  # the imports' objects stay out of the children's collections (and their pages shared)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
            elif key.data == "listener":
                conn, _ = listener.accept()
                _start_child(conn, selector)
            else:
                pid, conn = key.data
                selector.unregister(key.fileobj)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                report = {"code": os.waitstatus_to_exitcode(status)}
                try:
                    conn.sendall(json.dumps(report).encode() + b"\n")
                except OSError:
                    pass
                conn.close()


def _start_child(conn: socket.socket, selector: selectors.BaseSelector) -> None:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 20)
        if not more:
            break
        data += more
    if len(fds) != 2 or not data.endswith(b"\n"):
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
        _child(request, *fds)  # never returns
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:  # the asker is gone: its child is still waited for below
        pass
    selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))


def _child(request: dict[str, Any], out: int, err: int) -> None:
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, min(os.sysconf("SC_OPEN_MAX"), 65536))
        for signo in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD):
            signal.signal(signo, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True, write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, write_through=True,
                                      errors="backslashreplace")
        sys.argv = list(request["argv"])
        from semula.cli import run

        try:
            run()
            code = 0
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException:
            traceback.print_exc()
            code = 1
        threading._shutdown()  # type: ignore[attr-defined] - as the interpreter's own exit: non-daemon threads end
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


# ---------------------------------------------------------------------------
# The client


class ForkedProcess:
    """A proxy forked by the server: the part of `subprocess.Popen` the tests use."""

    def __init__(self, args: list[str], pid: int, stdout: Any, conn: socket.socket, rest: bytes) -> None:
        self.args = args
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._conn = conn
        self._buffer = rest
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        return self._wait(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._wait(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def _wait(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            self._conn.settimeout(timeout)
            try:
                while b"\n" not in self._buffer:
                    chunk = self._conn.recv(4096)
                    if not chunk:
                        break
                    self._buffer += chunk
            except (TimeoutError, BlockingIOError):
                return None
            line = self._buffer.split(b"\n", 1)[0]
            self.returncode = json.loads(line)["code"] if line else -signal.SIGKILL
            self._conn.close()
            return self.returncode

    def send_signal(self, signo: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signo)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Server:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._path: str | None = None
        self._env: dict[str, str] = {}
        self._failed = False
        self._folder: str | None = None

    def address(self, env: dict[str, str]) -> str | None:
        with self._lock:
            if self._failed:
                return None
            if self._proc is None:
                self._start(env)
            if self._proc is None or self._proc.poll() is not None or not _same_start(self._env, env):
                return None
            return self._path

    def _start(self, env: dict[str, str]) -> None:
        folder = tempfile.mkdtemp(prefix="semula-fork-")
        self._folder = folder
        self._path = str(Path(folder) / "socket")
        self._env = dict(env)
        self._proc = subprocess.Popen(
            [sys.executable, __file__, self._path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env, start_new_session=True,
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline() != b"ready\n":
            self._failed = True
            self._proc.kill()
            self._proc = None
            return
        atexit.register(self.close)

    def close(self) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()  # its end
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


_SERVER = _Server()


def _same_start(a: dict[str, str], b: dict[str, str]) -> bool:
    def start(env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k.startswith(_START_VARIABLES) and k not in _SAME_IN_A_CHILD}

    return start(a) == start(b)


# `semula` commands a fork serves: not `exec` (its tests are about its own processes and signals) nor
# `report` (its kernels need pandas, which the server's `semula.cli.without_pandas` refuses).
UNFORKED = ("exec", "report")


def semula_argv(argv: Sequence[str]) -> list[str] | None:
    """argv as the `semula` program sees it (`python -m semula X` -> `semula X`), when a fork can serve it."""
    if os.environ.get("SEMULA_TEST_FORK", "1") == "0":
        return None
    words = list(argv)
    if words[1:3] == ["-m", "semula"]:
        words = ["semula", *words[3:]]
    if Path(words[0]).name != "semula" or len(words) < 2 or words[1] in UNFORKED:
        return None
    return words


def spawn(argv: list[str], *, env: dict[str, str], cwd: Path | str) -> ForkedProcess | subprocess.Popen[str]:
    """A running `semula` command, from the warm server when it can, else a process of its own (output merged
    into stdout, text mode, a new session: what the tests' Popen calls ask for)."""
    path = _SERVER.address(env) if semula_argv(argv) else None
    if path is not None:
        read, write = os.pipe()
        forked = _fork(path, argv, env, cwd, [write, write], read)
        if forked is not None:
            return forked
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True, cwd=cwd)


def run(argv: list[str], *, env: dict[str, str], cwd: Path | str | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, capture_output=True, text=True, ...)` for a `semula` command, forked from the warm
    server when it can."""
    path = _SERVER.address(env) if semula_argv(argv) else None
    if path is not None:
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        forked = _fork(path, argv, env, cwd or os.getcwd(), [out_write, err_write], out_read)
        if forked is not None:
            with open(err_read, encoding=None) as err_stream:
                stderr: list[str] = []
                reader = threading.Thread(target=lambda: stderr.append(err_stream.read()), daemon=True)
                reader.start()
                try:
                    stdout = _read_all(forked, timeout)
                finally:
                    reader.join(5)
            return subprocess.CompletedProcess(argv, forked.returncode or 0, stdout, "".join(stderr))
        os.close(err_read)
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def _read_all(forked: ForkedProcess, timeout: float | None) -> str:
    """The child's whole stdout, then its exit; SIGKILL and TimeoutExpired when it takes over `timeout`."""
    stdout: list[str] = []
    reader = threading.Thread(target=lambda: stdout.append(forked.stdout.read()), daemon=True)
    reader.start()
    reader.join(timeout)
    try:
        if reader.is_alive():
            raise subprocess.TimeoutExpired(forked.args, timeout or 0)
        forked.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(forked.pid, signal.SIGKILL)
        forked.wait(10)
        raise
    forked.stdout.close()
    return "".join(stdout)


def _fork(path: str, argv: list[str], env: dict[str, str], cwd: Path | str, writes: list[int],
          read: int) -> ForkedProcess | None:
    """Ask the server for a child whose stdout and stderr are `writes` (closed here either way); `read` becomes
    the process's `stdout` (closed here if the server cannot be asked)."""
    umask = os.umask(0)
    os.umask(umask)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            conn.connect(path)
            request = {"argv": semula_argv(argv), "env": env, "cwd": str(cwd), "umask": umask}
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], writes)
        finally:
            for fd in set(writes):
                os.close(fd)
        data = b""
        while b"\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                raise OSError("the fork server closed the connection")
            data += chunk
    except OSError:
        conn.close()
        os.close(read)
        return None
    line, rest = data.split(b"\n", 1)
    stdout = open(read, encoding=None)  # text mode, as Popen(text=True)
    return ForkedProcess(argv, json.loads(line)["pid"], stdout, conn, rest)


if __name__ == "__main__":
    serve(sys.argv[1])
