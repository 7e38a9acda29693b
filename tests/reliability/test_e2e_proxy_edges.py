"""Keys in URL paths, file modes, the listen address and cut answers, through the real proxy
(reliability items 13, 14, 16 and the cut-stream status)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, curl, read_call_log, start_proxy, uniq

pytestmark = pytest.mark.e2e

PATH_KEY = "sk-proj-PLANTED" + "PathK3y4E5f6G7h8J9k0L1m2N"
KEY_URL = f"https://api.openai.com/openai/deployments/{PATH_KEY}/chat/completions"


def ask(proxy, url: str, text: str, **extra):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **extra}
    return curl(url, proxy_url=proxy.proxy_url, ca_path=proxy.ca_path, data=body)


def test_a_key_in_the_url_path_reaches_neither_console_nor_disk(proxy_factory: ProxyFactory,
                                                                fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    text = uniq("pathkey")
    first, second = ask(proxy, KEY_URL, text), ask(proxy, KEY_URL, text)
    # (the fake echoes the deployment as the model; a stored answer has it redacted, so compare the text)
    content = [json.loads(r.body)["choices"][0]["message"]["content"] for r in (first, second)]
    assert first.status == 200 and content[0] == content[1], (first, second, proxy.output()[-2000:])
    assert fake_provider.last()["path"].find(PATH_KEY) >= 0, "the key must still reach the provider"
    proxy.stop()
    assert PATH_KEY not in proxy.output(), proxy.output()[-2000:]
    leaks = [p for p in proxy.data_dir.rglob("*") if p.is_file() and PATH_KEY.encode() in p.read_bytes()]
    assert leaks == []
    rows = read_call_log(proxy.data_dir)
    assert [r["decision"] for r in rows] == ["miss", "hit"], rows
    assert all("[REDACTED]" in r["path"] and PATH_KEY not in r["path"] for r in rows), rows


def test_a_fresh_data_dir_and_its_files_are_private(proxy_factory: ProxyFactory, fake_provider: FakeProvider,
                                                   tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh" / "semula-data"
    (tmp_path / "fresh").mkdir()
    proxy = start_proxy(mode="auto", data_dir=data_dir, confdir=proxy_factory.confdir,
                        upstream_port=fake_provider.port, extra_args=("--no-recordings",))
    try:
        assert ask(proxy, "https://api.openai.com/v1/chat/completions", uniq("modes")).status == 200
        admin = data_dir / "admin.json"
        assert stat.S_IMODE(admin.stat().st_mode) == 0o600
        # The files are private by their own modes: mitmproxy's process keeps the umask it was given.
        assert _umask(proxy.proc.pid) == _own_umask()
    finally:
        proxy.stop()
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and any(p.name == "semula.duckdb" for p in files), files
    loose = {str(p.relative_to(data_dir)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files
             if stat.S_IMODE(p.stat().st_mode) & 0o077}
    assert loose == {}


def test_an_existing_data_dir_keeps_its_mode(proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    data_dir = proxy_factory.new_data_dir("existing")
    data_dir.mkdir(parents=True)
    data_dir.chmod(0o755)
    proxy = proxy_factory("auto", data_dir)
    # Others may enter this dir: only the umask keeps DuckDB's WAL (it takes no file mode) private.
    assert _umask(proxy.proc.pid) == 0o077
    proxy.stop()
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o755


def _umask(pid: int) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("Umask:"))
    return int(line.split()[1], 8)


def _own_umask() -> int:
    return _umask(os.getpid())


def test_binding_every_interface_warns_and_says_so(proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto", extra_args=("--listen-host", "0.0.0.0"))
    proxy.stop()
    lines = proxy.output().splitlines()
    ready = [line for line in lines if line.startswith("semula ready:")]
    assert ready and ready[0].startswith(f"semula ready: http://0.0.0.0:{proxy.port} "), lines
    assert any("WARNING" in line and "0.0.0.0" in line and "loopback" in line for line in lines), lines


def test_a_loopback_proxy_does_not_warn(proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    proxy.stop()
    assert "WARNING" not in proxy.output()
    assert f"semula ready: http://127.0.0.1:{proxy.port} " in proxy.output()


def test_a_stream_the_upstream_cut_is_not_logged_as_200(proxy_factory: ProxyFactory,
                                                        fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    ask(proxy, "https://api.openai.com/v1/chat/completions", f"{uniq('cut')} BREAKSTREAM", stream=True)
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    assert len(rows) == 1, (rows, proxy.output()[-2000:])
    assert rows[0]["status"] is None and rows[0]["error"], rows
    assert "· cut ·" in proxy.output(), proxy.output()[-2000:]
