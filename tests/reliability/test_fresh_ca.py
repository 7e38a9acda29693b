"""A fresh machine (no mitmproxy CA yet) gets one CA, and the proxy serves the one its clients trust.

`semula exec` on a fresh HOME used to fail about one run in four under load: the client's TLS
handshake was rejected "unknown ca". mitmproxy wrote its CA only after it listened and after
`semula ready`, so exec's `ensure_ca` found none, made a second one — which overwrote the files
and went into the clients' bundle — while the proxy served its own. Now one process creates the
CA, atomically, before mitmproxy starts (`ensure_ca`): exec, `semula proxy` and the pytest plugin.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from e2e_helpers import OutputPump, clean_env, free_port, semula_cmd, stop_process

pytestmark = pytest.mark.e2e

CA_FILES = ("mitmproxy-ca.pem", "mitmproxy-ca-cert.pem", "mitmproxy-ca-cert.p12", "mitmproxy-ca-cert.cer",
            "mitmproxy-ca.p12", "mitmproxy-dhparam.pem")
EXEC_RUNS = 8
PLUGIN_RUNS = 3
PROXY_RUNS = 3
PARALLEL = 3  # runs at a time: more load, and the test stays short

# Only the TLS handshake through the proxy, trusting exactly the bundle the run was given: a
# request would be refused in replay (no recording), and the handshake is what used to fail.
HANDSHAKE = '''
import http.client, os, ssl, sys, urllib.parse

proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
context = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"), capath=os.environ.get("SSL_CERT_DIR"))
conn = http.client.HTTPSConnection(proxy.hostname, proxy.port, context=context, timeout=30)
conn.set_tunnel("api.openai.com", 443)
try:
    conn.connect()
except ssl.SSLError as e:
    sys.exit(f"HANDSHAKE FAILED: {e}")
print("HANDSHAKE OK", conn.sock.version(), flush=True)
conn.close()
'''

PLUGIN_SUITE = f'''
import subprocess, sys

HANDSHAKE = {HANDSHAKE!r}


def test_handshake_through_the_session_proxy():
    result = subprocess.run([sys.executable, "-c", HANDSHAKE], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "HANDSHAKE OK" in result.stdout
'''


@pytest.fixture
def cpu_load(request: pytest.FixtureRequest) -> Iterator[None]:
    """Two busy loops for the test's length: the race showed under load.

    Under pytest-xdist the other workers' proxies are that load already; two more busy loops there
    would only take both cores from the rest of the suite for the test's length.
    """
    workers = getattr(request.config, "workerinput", {}).get("workercount", 1)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 if workers < 2 else 0)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait(10)


def fresh_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True)
    env = clean_env(HOME=str(home), SEMULA_RECORDINGS="off", PYTHONUNBUFFERED="1")
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    return env


def assert_one_ca(home: Path, output: str) -> None:
    confdir = home / ".mitmproxy"
    for name in CA_FILES:
        assert (confdir / name).is_file(), (name, sorted(p.name for p in confdir.iterdir()), output)
    cert = (confdir / "mitmproxy-ca-cert.pem").read_text()
    assert cert in (confdir / "mitmproxy-ca.pem").read_text(), "the CA mitmproxy serves is the one clients trust"
    assert (confdir / "semula-ca-bundle.pem").read_text().endswith(cert), "the bundle holds that CA"
    assert not [p for p in confdir.parent.iterdir() if p.name.startswith(".semula-ca")], "no temporary dir left"
    assert not [p for p in confdir.iterdir() if p.name.startswith(".semula-ca-")], "no temporary dir left"


def run_exec(root: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    home = root / "home"
    env = fresh_env(home)
    argv = [*semula_cmd(), "exec", "--mode", "replay", "--data-dir", str(root / "data"), "--",
            sys.executable, "-c", HANDSHAKE]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root, timeout=120), home


def run_plugin(root: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    home = root / "home"
    env = fresh_env(home)
    (root / "test_handshake.py").write_text(PLUGIN_SUITE)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--semula=replay",
            f"--semula-data-dir={root / 'data'}", "test_handshake.py", "-q"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root, timeout=120), home


def test_exec_and_the_plugin_on_a_fresh_home_trust_the_ca_the_proxy_serves(tmp_path: Path, cpu_load: None) -> None:
    jobs = [(run_exec, tmp_path / f"exec-{i}") for i in range(EXEC_RUNS)]
    jobs += [(run_plugin, tmp_path / f"plugin-{i}") for i in range(PLUGIN_RUNS)]
    for _, root in jobs:
        root.mkdir()
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda job: (job[1].name, *job[0](job[1])), jobs))
    failures = []
    for name, result, home in results:
        output = f"--- {name} (exit {result.returncode})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        if result.returncode != 0 or ("HANDSHAKE OK" not in result.stdout and not name.startswith("plugin")):
            failures.append(output)
            continue
        assert_one_ca(home, output)
    assert not failures, "\n".join(failures)


def start_proxy_and_check_ca_at_ready(root: Path) -> str:
    """`semula proxy` on a fresh HOME: when it says ready, its CA is on disk, whole, and served."""
    home = root / "home"
    env = fresh_env(home)
    port = free_port()
    argv = [*semula_cmd(), "proxy", "--mode", "replay", "--listen-port", str(port), "--data-dir", str(root / "d")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=root,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        pump = OutputPump(proc.stdout)
        ready = pump.wait_for(lambda line: line.startswith("semula ready"), 60)
        assert ready is not None, pump.text()
        confdir = home / ".mitmproxy"
        missing = [name for name in CA_FILES if not (confdir / name).is_file()]  # right at `ready`: no wait
        assert not missing, ("CA files missing when the proxy said ready", missing, pump.text())
        assert (confdir / "mitmproxy-ca-cert.pem").read_text() in (confdir / "mitmproxy-ca.pem").read_text()
        handshake = subprocess.run([sys.executable, "-c", HANDSHAKE], capture_output=True, text=True, timeout=60,
                                   env={**env, "HTTPS_PROXY": f"http://127.0.0.1:{port}",
                                        "SSL_CERT_FILE": str(confdir / "mitmproxy-ca-cert.pem")})
        assert handshake.returncode == 0, handshake.stdout + handshake.stderr
        return (confdir / "mitmproxy-ca-cert.pem").read_text()
    finally:
        stop_process(proc)


def test_semula_proxy_on_a_fresh_home_has_its_ca_on_disk_when_ready(tmp_path: Path, cpu_load: None) -> None:
    roots = [tmp_path / f"proxy-{i}" for i in range(PROXY_RUNS)]
    for root in roots:
        root.mkdir()
    with ThreadPoolExecutor(PARALLEL) as pool:
        certs = list(pool.map(start_proxy_and_check_ca_at_ready, roots))
    assert len(set(certs)) == PROXY_RUNS, "each fresh HOME has its own CA"


# --- ensure_ca itself -------------------------------------------------------------------------


def _ensure_ca_in_process(confdir: str, barrier: multiprocessing.synchronize.Barrier, out: dict) -> None:
    from semula.session.ca import ensure_ca

    barrier.wait()
    out[os.getpid()] = ensure_ca(Path(confdir)).read_text()


def test_concurrent_ensure_ca_calls_end_with_one_ca(tmp_path: Path) -> None:
    from semula.session.ca import ensure_ca

    confdir = tmp_path / "conf"  # not there yet: a fresh HOME
    # Processes: each its own mitmproxy import and key generation, as `semula exec` and its proxy.
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        out = manager.dict()
        barrier = context.Barrier(3)
        processes = [context.Process(target=_ensure_ca_in_process, args=(str(confdir), barrier, out))
                     for _ in range(3)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
            assert process.exitcode == 0
        process_certs = set(out.values())
    assert len(process_certs) == 1, "every caller returned the same CA"

    # Threads too, on a second empty confdir.
    other = tmp_path / "other"
    barrier = threading.Barrier(4)
    thread_certs: list[str] = []

    def call() -> None:
        barrier.wait()
        thread_certs.append(ensure_ca(other).read_text())

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(thread_certs) == 4 and len(set(thread_certs)) == 1

    for folder, certs in ((confdir, process_certs), (other, set(thread_certs))):
        [cert] = certs
        assert (folder / "mitmproxy-ca-cert.pem").read_text() == cert, "the CA on disk is the one returned"
        assert cert in (folder / "mitmproxy-ca.pem").read_text(), "and the one mitmproxy will load"
        assert (folder / "mitmproxy-ca-cert.cer").read_text() == cert
        for name in CA_FILES:
            assert (folder / name).is_file(), name
        assert not [p for p in folder.iterdir() if p.name.startswith(".semula-ca-")], "no temporary dir left"
    assert ensure_ca(confdir).read_text() == next(iter(process_certs)), "a later call keeps the CA"


def test_mitmproxy_loads_the_ca_ensure_ca_made(tmp_path: Path) -> None:
    from mitmproxy.certs import CertStore

    from semula.session.ca import ensure_ca

    cert = ensure_ca(tmp_path).read_text()
    before = {name: (tmp_path / name).read_bytes() for name in CA_FILES}
    store = CertStore.from_store(str(tmp_path), "mitmproxy", 2048)
    from cryptography.hazmat.primitives import serialization

    assert store.default_ca._cert.public_bytes(serialization.Encoding.PEM).decode() == cert
    assert {name: (tmp_path / name).read_bytes() for name in CA_FILES} == before, "mitmproxy made none of its own"


def test_a_ca_key_alone_is_kept_and_its_certificate_written(tmp_path: Path) -> None:
    """A mitmproxy-ca.pem without its certificate file (mitmproxy was writing it, or the user's own):
    mitmproxy serves that one, so ensure_ca makes no other and writes its certificate."""
    from mitmproxy.certs import CertStore

    from semula.session.ca import ensure_ca

    CertStore.create_store(tmp_path / "theirs", "mitmproxy", 2048)
    key = (tmp_path / "theirs" / "mitmproxy-ca.pem").read_bytes()
    confdir = tmp_path / "conf"
    confdir.mkdir()
    (confdir / "mitmproxy-ca.pem").write_bytes(key)
    (confdir / ".semula-ca-left-by-a-crash").mkdir()  # a caller that died while making one
    cert = ensure_ca(confdir).read_text()
    assert (confdir / "mitmproxy-ca.pem").read_bytes() == key, "the CA mitmproxy loads is kept"
    assert cert == (tmp_path / "theirs" / "mitmproxy-ca-cert.pem").read_text()
    assert not (confdir / ".semula-ca-left-by-a-crash").exists()
