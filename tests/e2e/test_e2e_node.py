"""Node clients through the proxy, configured only by `semula env`.

Node 20's built-in fetch ignores HTTPS_PROXY, so JavaScript test suites route through
undici's EnvHttpProxyAgent; NODE_EXTRA_CA_CERTS makes Node trust the mitmproxy CA.
This checks that the exports semula prints are enough for that setup. Skipped when
node is missing or undici cannot be installed (no registry).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, clean_env, parse_exports, read_call_log, run_semula, uniq

pytestmark = pytest.mark.e2e

SCRIPT = """
import { EnvHttpProxyAgent, setGlobalDispatcher } from 'undici';

setGlobalDispatcher(new EnvHttpProxyAgent());
const res = await fetch('https://api.openai.com/v1/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test-node' },
  body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: process.argv[2] }] }),
});
const raw = await res.text();
let text = null;
try { text = JSON.parse(raw).choices?.[0]?.message?.content ?? null; } catch {}
console.log(JSON.stringify({ status: res.status, decision: res.headers.get('x-semula-decision'), text, raw: text ? null : raw.slice(0, 500) }));
"""


@pytest.fixture(scope="module")
def node_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch npm project with undici installed, and the probe script in it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node/npm not installed")
    project = tmp_path_factory.mktemp("node-undici")
    try:
        res = subprocess.run([npm, "install", "undici", "--no-audit", "--no-fund", "--loglevel=error"], cwd=project,
                             capture_output=True, text=True, timeout=180, env=clean_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"npm install undici failed: {e}")
    if res.returncode != 0 or not (project / "node_modules" / "undici").is_dir():
        pytest.skip(f"npm install undici failed: {res.stderr[-500:]}")
    (project / "probe.mjs").write_text(SCRIPT)
    return project


@pytest.mark.parametrize("project", [None, "alpha"])
def test_node_fetch_via_env_proxy_agent(node_project: Path, proxy_factory: ProxyFactory,
                                        fake_provider: FakeProvider, project: str | None) -> None:
    proxy = proxy_factory("auto")
    env_args = ["env", "--port", str(proxy.port), "--confdir", str(proxy.confdir)]
    res = run_semula(*env_args, *(["--project", project] if project else []))
    assert res.returncode == 0, res.stderr
    exports = parse_exports(res.stdout)
    assert "NODE_EXTRA_CA_CERTS" in exports and "HTTPS_PROXY" in exports, res.stdout

    content = uniq("node fetch")
    outs = []
    before = fake_provider.count()
    for _ in range(2):
        run = subprocess.run(["node", "probe.mjs", content], cwd=node_project, capture_output=True, text=True,
                             env=clean_env(**exports), timeout=60)
        assert run.returncode == 0, f"{run.stderr}\n{proxy.describe()}"
        outs.append(json.loads(run.stdout.strip().splitlines()[-1]))
    first, second = outs
    assert first["status"] == 200 and str(first["text"]).startswith("fake answer #"), first
    assert (first["decision"], second["decision"]) == ("miss", "hit")
    assert second["text"] == first["text"]
    assert fake_provider.count() == before + 1, "the second fetch was served from the recording"
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    assert [r["project"] for r in rows] == [project or "default"] * 2, rows
