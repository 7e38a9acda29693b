"""Process-level helpers for semula's end-to-end tests.

The e2e tests run what a user runs: a real `semula proxy` (mitmdump + the addon) in
front of the fake provider (tests/support/fakeprovider.py), driven by the official SDKs, curl,
requests and Node. These helpers start and stop those processes, build clients that go
through the proxy, and read the call log, so the test files read as scenarios.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import semula_fork

REPO = Path(__file__).resolve().parents[2]
FAKEPROVIDER = Path(__file__).resolve().parent / "fakeprovider.py"
READY_MARKER = "semula ready"  # also "semula ready, NOT recording:"
PROVIDER_HOSTS = ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com",
                  "us-central1-aiplatform.googleapis.com", "aiplatform.googleapis.com", "oauth2.googleapis.com",
                  "bedrock-runtime.us-east-1.amazonaws.com")
SEMULA_HEADERS = ("x-semula-decision", "x-semula-tier", "x-semula-score", "x-semula-entry")

# Variables from the developer's shell that would reroute or re-trust our clients.
CLIENT_ENV_NOISE = (
    "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
    "NO_PROXY", "no_proxy", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
)


def semula_cmd() -> list[str]:
    """The semula CLI next to the running interpreter, else `python -m semula`."""
    exe = Path(sys.executable).parent / "semula"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "semula"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV_NOISE}
    env.update(extra)
    return env


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PORTS = random.SystemRandom()  # never a seeded generator: two workers would pick the same ports


def free_port() -> int:
    """A port free now, for a process to bind later: picked below the kernel's ephemeral range.

    A port from bind(0) comes from that range, and so does every outgoing connection's own port: with
    thousands of connections a run, one could take it before the process it was picked for binds it.
    """
    low, high = 10000, _ephemeral_start()
    for _ in range(100 if high - low > 1000 else 0):
        port = _PORTS.randrange(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port() -> int:
    """A port nothing listens on: where a "gone" provider lives."""
    return free_port()


# The lines a proxy prints once its store's opening is over: the recordings folder loaded, the store refused.
STORE_OPENED_MARKERS = ("semula: recordings ", "semula: NOT recording", "semula: store open")


class OutputPump:
    """Collects a child's merged stdout/stderr on a thread so pipes never fill up."""

    def __init__(self, stream: Any) -> None:
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for line in iter(stream.readline, ""):
            with self._cond:
                self._lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._lines.append("")  # "" marks EOF
            self._cond.notify_all()

    def text(self) -> str:
        with self._cond:
            return "".join(self._lines)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float) -> str | None:
        """Wait for a line satisfying predicate; None on timeout or EOF."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self._lines[seen:]:
                    if line == "":
                        return None
                    if predicate(line):
                        return line
                seen = len(self._lines)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def join(self, timeout: float = 5) -> None:
        self._thread.join(timeout)


def stop_process(proc: subprocess.Popen[str] | semula_fork.ForkedProcess, timeout: float = 20) -> int | None:
    """SIGINT (semula's graceful stop: flushes the call log), then SIGKILL if it hangs."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group we created with start_new_session
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait(5)
    return proc.returncode


# ---------------------------------------------------------------------------
# The fake provider process


@dataclass
class FakeProvider:
    """A running tests/support/fakeprovider.py and a small client for its /__ hooks."""

    proc: subprocess.Popen[str]
    port: int
    ca_path: Path
    pump: OutputPump

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _ctx(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_path))

    def _call(self, method: str, path: str) -> Any:
        import urllib.request

        req = urllib.request.Request(self.base + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, context=self._ctx(), timeout=10) as resp:
            return json.loads(resp.read())

    def count(self) -> int:
        return int(self._call("GET", "/__count")["count"])

    def last(self) -> dict[str, Any]:
        return self._call("GET", "/__last")

    def requests(self) -> list[dict[str, Any]]:
        return self._call("GET", "/__requests")

    def reset(self) -> None:
        self._call("POST", "/__reset")


def start_fake_provider(cert_dir: Path, timeout: float = 20) -> FakeProvider:
    proc = subprocess.Popen(
        [sys.executable, str(FAKEPROVIDER), "--port", "0", "--cert-dir", str(cert_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    assert proc.stdout is not None
    pump = OutputPump(proc.stdout)
    line = pump.wait_for(lambda s: s.startswith("fakeprovider ready port="), timeout)
    if line is None:
        stop_process(proc)
        raise RuntimeError(f"fake provider did not start:\n{pump.text()}")
    return FakeProvider(proc, int(line.strip().rsplit("=", 1)[1]), cert_dir / "fake-ca.pem", pump)


# ---------------------------------------------------------------------------
# The proxy under test


def map_remote_args(upstream_port: int) -> list[str]:
    """Route every provider host to the fake (or to a dead port for replay tests)."""
    args: list[str] = []
    for host in PROVIDER_HOSTS:
        args += ["--set", f"map_remote=|//{host}/|//127.0.0.1:{upstream_port}/"]
    return args


def proxy_test_args(confdir: Path, upstream_port: int) -> list[str]:
    return ["--set", f"confdir={confdir}", "--set", "ssl_insecure=true", *map_remote_args(upstream_port)]


@dataclass
class ProxyHandle:
    """A running `semula proxy`; stop() is idempotent and waits for the call-log flush."""

    proc: subprocess.Popen[str] | semula_fork.ForkedProcess
    port: int
    mode: str
    data_dir: Path
    confdir: Path
    pump: OutputPump
    argv: list[str] = field(default_factory=list)

    @property
    def ca_path(self) -> Path:
        return self.confdir / "mitmproxy-ca-cert.pem"

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def proxy_url_for(self, project: str | None) -> str:
        return f"http://{project}@127.0.0.1:{self.port}" if project else self.proxy_url

    def output(self) -> str:
        return self.pump.text()

    def stop(self) -> int | None:
        code = stop_process(self.proc)
        self.pump.join()
        return code

    def describe(self) -> str:
        return f"semula proxy ({' '.join(self.argv)}) output:\n{self.output()}"

    def dump_info(self, timeout: float = 15) -> str:
        """mitmproxy's own dump (its SIGUSR1 handler): threads, and every asyncio task with the line it waits on,
        so a connection that stalls says where its handler is."""
        start = len(self.output())
        try:
            os.kill(self.proc.pid, signal.SIGUSR1)
        except OSError as e:
            return f"(no dump: {e})"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.output()[start:]
            if text.count("*" * 52) >= 2:
                return text
            time.sleep(0.1)
        return self.output()[start:] + "\n(the dump did not finish)"


@contextmanager
def dumped_if_stalled(proxy: ProxyHandle, after: float = 10) -> Iterator[list[str]]:
    """A list that gets the proxy's `dump_info` if the block is still running after `after` seconds (a watch
    only: the block's own timeouts decide whether it fails); put it in the failure's message."""
    dumps: list[str] = []
    done = threading.Event()

    def watch() -> None:
        if not done.wait(after):
            dumps.append(f"proxy state {after:g} s in:\n{proxy.dump_info()}")

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield dumps
    finally:
        done.set()


def start_proxy(
    *,
    mode: str,
    data_dir: Path,
    confdir: Path,
    upstream_port: int,
    project: str | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = 30,
    attempts: int = 3,
    env: dict[str, str] | None = None,
) -> ProxyHandle:
    """Start and wait for `semula ready:`; retry on a port lost to a concurrent process."""
    for attempt in range(attempts):
        handle = _start_proxy_once(mode=mode, data_dir=data_dir, confdir=confdir, upstream_port=upstream_port,
                                   project=project, extra_args=extra_args, env=env)
        if handle.pump.wait_for(lambda s: s.startswith(READY_MARKER), timeout) is not None:
            # The store and the recordings folder open beside the ready line (a client's first call waits for
            # them); a test that looks at the folder or the store right after start waits for the opening.
            handle.pump.wait_for(lambda s: s.startswith(STORE_OPENED_MARKERS), timeout)
            return handle
        handle.stop()
        if "address already in use" not in handle.output().lower() or attempt == attempts - 1:
            raise AssertionError(f"semula proxy did not print {READY_MARKER!r} within {timeout}s.\n{handle.describe()}")
    raise AssertionError("unreachable")


def _start_proxy_once(*, mode: str, data_dir: Path, confdir: Path, upstream_port: int, project: str | None,
                      extra_args: Sequence[str], env: dict[str, str] | None = None) -> ProxyHandle:
    port = free_port()
    argv = [
        *semula_cmd(), "proxy", "--mode", mode, "--listen-host", "127.0.0.1", "--listen-port", str(port),
        "--data-dir", str(data_dir), *(["--project", project] if project else []),
        *proxy_test_args(confdir, upstream_port), *extra_args,
    ]
    proc = semula_fork.spawn(argv, env=clean_env(PYTHONUNBUFFERED="1", **(env or {})), cwd=data_dir.parent)
    assert proc.stdout is not None
    return ProxyHandle(proc, port, mode, data_dir, confdir, OutputPump(proc.stdout), argv)


# ---------------------------------------------------------------------------
# Clients through the proxy


def ssl_context(ca_path: Path | str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_path))


def websocket_ssl_context(ca_path: Path | str) -> ssl.SSLContext:
    """For `websockets.sync` clients (the OpenAI SDK's Realtime): TLS 1.2 at most.

    The sync client reads its socket in a thread while the caller writes the upgrade request on the same
    SSLSocket. CPython's ssl does not serialise the two (python/cpython#77271): the TLS 1.3 session tickets a
    server sends just after the handshake, read while the request is written, lose the request now and then
    ("timed out while waiting for handshake response", or `[SSL] internal error`), with or without a proxy:
    3 in 3,000 connections to a plain local websockets server under load, 0 in 6,000 with TLS 1.2, where
    no message follows the handshake."""
    context = ssl_context(ca_path)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


def sdk_http_client(proxy_url: str, ca_path: Path | str, sdk_module: Any, *, asynchronous: bool = False) -> Any:
    """An http client of the kind the given SDK expects (httpx, or httpx2 for newer SDKs).

    trust_env=False so a developer's own proxy settings cannot reroute the test.
    """
    base_client = sys.modules[sdk_module.__name__ + "._base_client"]
    http_lib = getattr(base_client, "httpx2", None) or getattr(base_client, "httpx")
    client_type = http_lib.AsyncClient if asynchronous else http_lib.Client
    return client_type(proxy=proxy_url, verify=ssl_context(ca_path), trust_env=False, timeout=30)


def openai_client(proxy_url: str, ca_path: Path | str, *, api_key: str = "sk-test-not-a-real-key",
                  max_retries: int = 0, **kwargs: Any) -> Any:
    import openai

    return openai.OpenAI(api_key=api_key, base_url="https://api.openai.com/v1", max_retries=max_retries,
                         http_client=sdk_http_client(proxy_url, ca_path, openai), **kwargs)


def async_openai_client(proxy_url: str, ca_path: Path | str, *, api_key: str = "sk-test-not-a-real-key",
                        max_retries: int = 0, **kwargs: Any) -> Any:
    import openai

    return openai.AsyncOpenAI(api_key=api_key, base_url="https://api.openai.com/v1", max_retries=max_retries,
                              http_client=sdk_http_client(proxy_url, ca_path, openai, asynchronous=True), **kwargs)


def anthropic_client(proxy_url: str, ca_path: Path | str, *, api_key: str = "sk-ant-test-not-a-real-key",
                     max_retries: int = 0, **kwargs: Any) -> Any:
    import anthropic

    return anthropic.Anthropic(api_key=api_key, base_url="https://api.anthropic.com", max_retries=max_retries,
                               http_client=sdk_http_client(proxy_url, ca_path, anthropic), **kwargs)


def semula_meta(headers: Any) -> dict[str, str | None]:
    """The x-semula-* headers of a response, lower-cased keys."""
    return {name: headers.get(name) for name in SEMULA_HEADERS}


@dataclass(frozen=True)
class CurlResult:
    status: int
    headers: dict[str, str]
    body: str
    returncode: int
    stderr: str


def curl(url: str, *, proxy_url: str | None, ca_path: Path | str | None, data: Any = None,
         headers: Iterable[str] = (), env: dict[str, str] | None = None, timeout: float = 30) -> CurlResult:
    """POST (if data) with curl; headers are parsed from the last response block (after CONNECT)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        head_file = Path(tmp) / "headers"
        argv = ["curl", "-sS", "-N", "-D", str(head_file), "--max-time", str(int(timeout))]
        if proxy_url:
            argv += ["--proxy", proxy_url]
        if ca_path:
            argv += ["--cacert", str(ca_path)]
        for h in headers:
            argv += ["-H", h]
        if data is not None:
            argv += ["-H", "content-type: application/json", "--data-binary", json.dumps(data)]
        argv.append(url)
        res = subprocess.run(argv, capture_output=True, text=True, env=env or clean_env(), timeout=timeout + 10)
        raw = head_file.read_text() if head_file.exists() else ""
    blocks = [b for b in raw.replace("\r\n", "\n").split("\n\n") if b.strip().startswith("HTTP/")]
    status, parsed = 0, {}
    if blocks:
        lines = blocks[-1].strip().splitlines()
        status = int(lines[0].split()[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            parsed[name.strip().lower()] = value.strip()
    return CurlResult(status, parsed, res.stdout, res.returncode, res.stderr)


# ---------------------------------------------------------------------------
# The call log


def folder_tag(recordings: Path, secret: str) -> str:
    """The `[REDACTED:<tag>]` a secret becomes in this recordings folder (keyed by its committed salt)."""
    from semula.core.redact import FingerprintKey

    meta = json.loads((recordings / "_semula.json").read_text())
    return FingerprintKey.from_hex(meta["fingerprint_salt"]).tag(secret)


def files_holding(secret: str, *roots: Path) -> list[str]:
    """Every file under `roots` whose bytes hold `secret`."""
    return [str(p) for root in roots for p in sorted(root.rglob("*")) if p.is_file() and secret.encode() in p.read_bytes()]


def read_call_log(data_dir: Path) -> list[dict[str, Any]]:
    """All call-log rows as dicts, file by file so schema differences between parts cannot break us."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in sorted((data_dir / "calls").glob("**/*.parquet")):
        if path.name.startswith("."):
            continue
        try:
            rows += pq.read_table(path).to_pylist()
        except Exception:  # noqa: BLE001 - a part still being written; the next poll sees it
            continue
    return sorted(rows, key=lambda r: r.get("ts") or 0)


def wait_for_rows(data_dir: Path, predicate: Callable[[dict[str, Any]], bool], *, at_least: int = 1,
                  timeout: float = 10) -> list[dict[str, Any]]:
    """Poll the call log (flushed every ≤ 2 s) until enough matching rows appear."""
    deadline = time.monotonic() + timeout
    while True:
        rows = [r for r in read_call_log(data_dir) if predicate(r)]
        if len(rows) >= at_least or time.monotonic() > deadline:
            return rows
        time.sleep(0.25)


def run_semula(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`semula ARGS` with its output captured (text), forked from the warm parent (tests/support/semula_fork.py)."""
    return semula_fork.run([*semula_cmd(), *args], env=env or clean_env(), timeout=timeout)


def parse_exports(text: str) -> dict[str, str]:
    """`export NAME=value` lines (shell-quoted) from `semula env` as a dict."""
    import shlex

    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("export "):
            continue
        parts = shlex.split(line[len("export "):])
        for part in parts:
            name, sep, value = part.partition("=")
            if sep:
                env[name] = value
    return env


def uniq(label: str) -> str:
    """A prompt prefix unique to this run, so no two tests ever share a recording."""
    return f"{label} {os.getpid()}-{time.monotonic_ns() % 10**9}"


# undici 7 (what `npm install undici` gets) needs this Node.
MIN_NODE = (20, 18, 1)


def npm_project(folder: Path, *packages: str) -> Path:
    """A scratch npm project in `folder` with `packages` installed; skips the test when node or npm is missing,
    Node is older than undici 7 needs, or the install fails (no registry)."""
    import shutil

    import pytest

    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node/npm not installed")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if tuple(int(part) for part in version.lstrip("v").split(".")[:3]) < MIN_NODE:
        pytest.skip(f"node {version}: undici 7 needs Node >= 20.18.1 (certs_readme.md)")
    try:
        res = subprocess.run([npm, "install", *packages, "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                             capture_output=True, text=True, timeout=300, env=clean_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"npm install {' '.join(packages)} failed: {e}")
    if res.returncode != 0 or not all((folder / "node_modules" / p).is_dir() for p in packages):
        pytest.skip(f"npm install {' '.join(packages)} failed: {res.stderr[-500:]}")
    return folder
