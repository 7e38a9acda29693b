"""`semula exec` as CI uses it, and a proxy that cannot get its store.

`semula exec -- CMD` must be transparent: CMD sees a working proxy through its env,
semula exits with CMD's exit code, and the call log is complete when it returns.
When another process holds the DuckDB file, the proxy must keep the test suite
working (calls go upstream) and say why it is not recording, rather than die.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import (
    FakeProvider,
    OutputPump,
    clean_env,
    openai_client,
    proxy_test_args,
    read_call_log,
    semula_cmd,
    semula_meta,
    stop_process,
    uniq,
)

pytestmark = pytest.mark.e2e

# Plain HTTP libraries that only know the env: HTTPS_PROXY and the CA bundle variables.
CLIENT_SCRIPTS = {
    "requests": """
import json, sys, requests
r = requests.post("https://api.openai.com/v1/chat/completions", timeout=30,
                  headers={"authorization": "Bearer sk-test-exec"},
                  json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": sys.argv[1]}]})
print(json.dumps({"status": r.status_code, "decision": r.headers.get("x-semula-decision"),
                  "text": r.json()["choices"][0]["message"]["content"]}))
sys.exit(int(sys.argv[2]))
""",
    "httpx": """
import json, sys, httpx
r = httpx.post("https://api.openai.com/v1/chat/completions", timeout=30,
               headers={"authorization": "Bearer sk-test-exec"},
               json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": sys.argv[1]}]})
print(json.dumps({"status": r.status_code, "decision": r.headers.get("x-semula-decision"),
                  "text": r.json()["choices"][0]["message"]["content"]}))
sys.exit(int(sys.argv[2]))
""",
}


def semula_exec(data_dir: Path, confdir: Path, upstream_port: int, script: str, *args: str,
                mode: str = "auto", env: dict[str, str] | None = None,
                extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    argv = [*semula_cmd(), "exec", "--data-dir", str(data_dir), "--mode", mode,
            *proxy_test_args(confdir, upstream_port), *extra, "--", sys.executable, "-c", script, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env or clean_env(), timeout=120)


def last_json_line(text: str) -> dict[str, object]:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    assert lines, f"no JSON line in:\n{text}"
    return json.loads(lines[-1])


@pytest.mark.parametrize("client", CLIENT_SCRIPTS)
def test_exec_passes_exit_code_and_leaves_a_complete_call_log(client: str, tmp_path: Path, fake_provider: FakeProvider,
                                                             mitm_confdir: Path) -> None:
    data_dir = tmp_path / "semula-data"
    content = uniq(f"exec {client}")
    runs = []
    for exit_code in (0, 3):
        res = semula_exec(data_dir, mitm_confdir, fake_provider.port, CLIENT_SCRIPTS[client], content, str(exit_code))
        detail = f"stdout:\n{res.stdout}\nstderr:\n{res.stderr}"
        assert res.returncode == exit_code, detail
        runs.append(last_json_line(res.stdout))
    first, second = runs
    assert first["status"] == 200 and str(first["text"]).startswith("fake answer #"), first
    assert (first["decision"], second["decision"]) == ("miss", "hit")
    assert second["text"] == first["text"]

    rows = read_call_log(data_dir)  # no polling: exec returns after the flush
    assert [r["decision"] for r in rows] == ["miss", "hit"], rows
    for row in rows:
        assert row["mode"] == "auto" and row["provider"] == "openai" and row["status"] == 200, row
        assert row["tier"] and row["request_fp"] and row["decision_ms"] is not None, row
    assert rows[1]["tier"] == "exact" and rows[1]["entry_id"] is not None


def test_exec_replay_miss_fails_the_command(tmp_path: Path, mitm_confdir: Path, dead_port: int) -> None:
    """In replay mode an unrecorded call is an HTTP 404, so a strict client script exits non-zero."""
    script = CLIENT_SCRIPTS["requests"].replace("r.json()[\"choices\"][0][\"message\"][\"content\"]",
                                                "r.json().get(\"error\", {}).get(\"message\")")
    res = semula_exec(tmp_path / "semula-data", mitm_confdir, dead_port, script, uniq("unrecorded"), "0",
                      mode="replay")
    assert res.returncode == 0, res.stderr
    out = last_json_line(res.stdout)
    assert out["status"] == 404 and str(out["text"]).startswith("semula: no recording matches"), out


def test_locked_store_still_serves_calls_upstream(proxy_factory: ProxyFactory, fake_provider: FakeProvider,
                                                 tmp_path: Path) -> None:
    data_dir = tmp_path / "semula-data"
    data_dir.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time\n"
         f"con = duckdb.connect({str(data_dir / 'semula.duckdb')!r})\n"
         "con.execute('create table if not exists held(x int)')\n"
         "print('holding', flush=True)\n"
         "time.sleep(600)\n"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        assert holder.stdout is not None
        pump = OutputPump(holder.stdout)
        assert pump.wait_for(lambda s: "holding" in s, 30), pump.text()

        proxy = proxy_factory("auto", data_dir)
        content = uniq("locked store")
        texts = []
        for _ in range(2):
            before = fake_provider.count()
            raw = openai_client(proxy.proxy_url, proxy.ca_path).chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": content}])
            text = raw.parse().choices[0].message.content or ""
            assert text.startswith(f"fake answer #{before + 1} "), (text, proxy.describe())
            assert semula_meta(raw.headers)["x-semula-decision"] != "hit"
            texts.append(text)
        assert texts[0] != texts[1], "without a store nothing is recorded: both calls went upstream"
        console = proxy.output().lower()
        assert "semula.duckdb" in console and "lock" in console, (
            f"the console should say why the store is unavailable:\n{proxy.output()}")
        proxy.stop()
    finally:
        stop_process(holder)


def test_exec_reuses_a_proxy_already_running_on_the_data_dir(proxy_factory: ProxyFactory, mitm_confdir: Path,
                                                             fake_provider: FakeProvider) -> None:
    """Two proxies cannot share one DuckDB file: exec must use the running one, not fail open beside it."""
    running = proxy_factory("auto")
    result = semula_exec(running.data_dir, mitm_confdir, fake_provider.port,
                         "import os; print(os.environ['HTTPS_PROXY'])", mode="auto")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(f":{running.port}"), result.stdout
    assert "reusing the proxy already running" in result.stderr
    assert (running.data_dir / "admin.json").exists(), "the running proxy is left running"


def test_a_second_proxy_on_the_same_data_dir_says_so_and_leaves_the_first_in_charge(
        proxy_factory: ProxyFactory) -> None:
    first = proxy_factory("auto")
    before = json.loads((first.data_dir / "admin.json").read_text())
    second = proxy_factory("auto", first.data_dir)
    assert "another semula proxy" in second.output() and str(before["pid"]) in second.output()
    assert json.loads((first.data_dir / "admin.json").read_text())["pid"] == before["pid"]
    second.stop()
    assert (first.data_dir / "admin.json").exists(), "stopping the second must not remove the first's admin.json"
