"""Another local user against the admin endpoint, and the modes of what semula creates.

The admin token in `<data dir>/admin.json` opens every prompt and answer. A user who can plant
a link there (a shared or world-writable data dir) must not get it written through the link, and
an admin.json the CLI cannot trust (a link, readable by others, someone else's) must not send its
calls — with the store's prompts — to whatever port it names. The recordings folder `semula exec`
writes is the repository's and follows the user's umask; the data dir stays private.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import clean_env, openai_client, proxy_test_args, run_semula, semula_cmd, uniq

pytestmark = pytest.mark.e2e

ADMIN = "admin.json"
UNTRUSTED_LINE = "semula: not writing to the data dir"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ask(proxy, text: str) -> str:  # type: ignore[no-untyped-def]
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    return client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}]).choices[0].message.content


def _assert_private_admin_file(path: Path) -> None:
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode), f"{path} is not a regular file: {stat.filemode(st.st_mode)}"
    assert st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)


def test_a_planted_admin_link_is_replaced_not_written_through(proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    data_dir = proxy_factory.new_data_dir()
    data_dir.mkdir(mode=0o700)
    target = tmp_path / "attackers-file.json"
    target.write_text('{"planted": true}\n')
    target.chmod(0o644)
    before = _sha(target)
    (data_dir / ADMIN).symlink_to(target)

    proxy = proxy_factory("auto", data_dir)
    assert _sha(target) == before, "the proxy wrote its port and token through the planted link"
    _assert_private_admin_file(data_dir / ADMIN)
    info = json.loads((data_dir / ADMIN).read_text())
    assert info["token"] not in target.read_text()
    assert not [p.name for p in data_dir.iterdir() if p.name.startswith(f".{ADMIN}.")], "temp file left behind"

    listed = run_semula("entries", "list", "--data-dir", str(data_dir), "--json")  # the CLI reaches it
    proxy.stop()
    assert listed.returncode == 0, (listed.stderr, proxy.output()[-2000:])
    assert _sha(target) == before
    assert not (data_dir / ADMIN).exists(), "the stopped proxy left its admin file behind"


def test_a_data_dir_others_can_write_is_served_read_only_with_one_line(proxy_factory: ProxyFactory,
                                                                       tmp_path: Path) -> None:
    from semula.admin.protocol import fallback_admin_dir

    data_dir = proxy_factory.new_data_dir()
    data_dir.mkdir()
    data_dir.chmod(0o777)
    target = tmp_path / "attackers-file.json"
    target.write_text("{}")
    before = _sha(target)
    (data_dir / ADMIN).symlink_to(target)
    listing = sorted(p.name for p in data_dir.iterdir())

    proxy = proxy_factory("auto", data_dir)
    try:
        lines = [line for line in proxy.output().splitlines() if line.startswith(UNTRUSTED_LINE)]
        assert len(lines) == 1, proxy.describe()
        assert "other users can write it (mode 0777)" in lines[0] and "--data-dir" in lines[0], lines[0]
        assert str(fallback_admin_dir(data_dir)) in lines[0], lines[0]
        fallback = fallback_admin_dir(data_dir) / ADMIN
        _assert_private_admin_file(fallback)
        assert _ask(proxy, uniq("world-writable data dir")).startswith("fake answer #"), proxy.describe()  # fail-open
        assert _sha(target) == before
        assert sorted(p.name for p in data_dir.iterdir()) == listing, "the untrusted data dir was written"
    finally:
        proxy.stop()
    assert not (fallback_admin_dir(data_dir) / ADMIN).exists()


def test_untrusted_data_dir_reasons(tmp_path: Path) -> None:
    from semula.proxy.run.lifecycle import _untrusted_data_dir

    path = tmp_path / "d"
    path.mkdir()
    for mode, reason in ((0o700, None), (0o755, None), (0o1777, "other users can write it (mode 1777)"),
                         (0o757, "other users can write it (mode 0757)")):
        path.chmod(mode)
        assert _untrusted_data_dir(path) == reason, oct(mode)
    path.chmod(0o700)
    if os.geteuid() == 0:
        os.chown(path, 65534, -1)
        assert _untrusted_data_dir(path) == "it belongs to uid 65534, not to you (uid 0)"
        os.chown(path, 0, -1)


class _Listener:
    """Where an untrusted admin.json points: counts the calls the CLI would have sent."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                calls.append(self.headers.get("authorization", ""))
                body = b'{"ok": false, "error": "the listener"}'
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    server = _Listener()
    try:
        yield server
    finally:
        server.close()


def _plant(data_dir: Path, tmp_path: Path, port: int, how: str) -> None:
    text = json.dumps({"port": port, "token": f"token-{how}", "pid": os.getpid(), "mode": "auto",
                       "proxy": "http://127.0.0.1:9", "data_dir": str(data_dir)})
    path = data_dir / ADMIN
    if how == "symlink":
        target = tmp_path / f"elsewhere-{how}.json"
        target.write_text(text)
        target.chmod(0o600)
        path.symlink_to(target)
        return
    path.write_text(text)
    path.chmod(0o644 if how == "mode 0644" else 0o600)
    if how == "other owner":
        os.chown(path, 65534, -1)


CASES = ["symlink", "mode 0644", pytest.param("other owner", marks=pytest.mark.skipif(
    os.geteuid() != 0, reason="chown to another uid needs root"))]
REASONS = {"symlink": "it is a symbolic link", "mode 0644": "mode 0644, expected 0600",
           "other owner": "it belongs to uid 65534"}


@pytest.mark.parametrize("how", CASES)
def test_the_cli_ignores_an_untrusted_admin_file(how: str, tmp_path: Path, listener: _Listener) -> None:
    data_dir = tmp_path / "semula-data"
    data_dir.mkdir(mode=0o700)
    _plant(data_dir, tmp_path, listener.port, how)
    listed = run_semula("entries", "list", "--data-dir", str(data_dir), "--json")
    assert listener.calls == [], "the CLI sent its call to the port an untrusted admin.json named"
    said = [line for line in listed.stderr.splitlines() if line.startswith("semula: ignoring")]
    assert len(said) == 1 and str(data_dir / ADMIN) in said[0] and REASONS[how] in said[0], listed.stderr
    assert listed.returncode == 0, listed.stderr  # it opened the store itself, as with no proxy
    assert json.loads(listed.stdout) == []


def test_the_cli_uses_a_trusted_admin_file(tmp_path: Path, listener: _Listener) -> None:
    """The control: the same file, 0600 and ours, is used (the listener gets the call and its token)."""
    data_dir = tmp_path / "semula-data"
    data_dir.mkdir(mode=0o700)
    _plant(data_dir, tmp_path, listener.port, "private")
    listed = run_semula("entries", "list", "--data-dir", str(data_dir), "--json")
    assert listener.calls == ["Bearer token-private"], (listed.stderr, listener.calls)
    assert "ignoring" not in listed.stderr


EXEC_SCRIPT = """
import httpx, sys
r = httpx.post("https://api.openai.com/v1/chat/completions", timeout=30,
               headers={"authorization": "Bearer sk-test-modes"},
               json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": sys.argv[1]}]})
sys.exit(0 if r.status_code == 200 else 1)
"""


def test_exec_creates_the_recordings_folder_with_the_umask_and_the_data_dir_private(
        tmp_path: Path, fake_provider, mitm_confdir: Path) -> None:  # type: ignore[no-untyped-def]
    data_dir = tmp_path / "semula-data"
    recordings = tmp_path / "recordings"
    argv = [*semula_cmd(), "exec", "--data-dir", str(data_dir), "--mode", "auto", "--recordings", str(recordings),
            *proxy_test_args(mitm_confdir, fake_provider.port), "--", sys.executable, "-c", EXEC_SCRIPT,
            uniq("umask 022")]
    result = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=120, umask=0o022)
    assert result.returncode == 0, (result.stdout, result.stderr)

    folders = [recordings, *(p for p in recordings.rglob("*") if p.is_dir())]
    assert len(folders) > 1 and any(recordings.rglob("*.json")), result.stderr
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in folders}
    assert set(modes.values()) == {"0o755"}, modes

    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    for path in data_dir.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert not mode & 0o077, f"{path.relative_to(data_dir)} is {oct(mode)} in the private data dir"
