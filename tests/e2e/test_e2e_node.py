"""Node clients through the proxy, configured only by `semula env`.

Node 20's built-in fetch ignores HTTPS_PROXY, so JavaScript test suites route through
undici's EnvHttpProxyAgent; NODE_EXTRA_CA_CERTS makes Node trust the mitmproxy CA.
This checks that the exports semula prints are enough for that setup. Skipped when
node is missing or undici cannot be installed (no registry).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import (REPO, FakeProvider, ProxyHandle, clean_env, npm_project, parse_exports, read_call_log,
                         run_semula, uniq)

pytestmark = pytest.mark.e2e

CHAT_MJS = REPO / "tests" / "clients" / "chat.mjs"
@pytest.fixture(scope="module")
def node_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch npm project with undici installed, and tests/clients/chat.mjs in it."""
    project = npm_project(tmp_path_factory.mktemp("node-undici"), "undici")
    # The example a newcomer runs, beside the undici it imports.
    shutil.copyfile(CHAT_MJS, project / "chat.mjs")
    return project


def run_node(node_project: Path, exports: dict[str, str], content: str, proxy: ProxyHandle) -> dict[str, object]:
    run = subprocess.run(["node", "chat.mjs", content], cwd=node_project, capture_output=True, text=True,
                         env=clean_env(**exports, OPENAI_API_KEY="sk-test-node"), timeout=60)
    assert run.returncode == 0, f"{run.stderr}\n{proxy.describe()}"
    decision = re.search(r"x-semula-decision: (\S+)", run.stderr)
    assert decision, run.stderr
    text = json.loads(run.stdout)["choices"][0]["message"]["content"]
    return {"decision": decision.group(1), "text": text}


# (semula env --project, HTTPS_PROXY's user part, the project the calls land in)
PROXY_FORMS = [
    (None, "", "default"),
    ("alpha", "alpha:semula@", "alpha"),  # the documented form
    # undici 7.30's EnvHttpProxyAgent sends a user name without a password too (older undici was seen to
    # drop it, as requests does): the documented form is P:semula@, which every client sends.
    ("alpha", "alpha@", "alpha"),
]


@pytest.mark.parametrize(("project", "user", "lands_in"), PROXY_FORMS)
def test_node_fetch_via_env_proxy_agent(node_project: Path, proxy_factory: ProxyFactory,
                                        fake_provider: FakeProvider, project: str | None, user: str,
                                        lands_in: str) -> None:
    proxy = proxy_factory("auto")
    env_args = ["env", "--port", str(proxy.port), "--confdir", str(proxy.confdir)]
    res = run_semula(*env_args, *(["--project", project] if project else []))
    assert res.returncode == 0, res.stderr
    exports = parse_exports(res.stdout)
    assert "NODE_EXTRA_CA_CERTS" in exports and "HTTPS_PROXY" in exports, res.stdout
    assert exports["HTTPS_PROXY"] == f"http://{'alpha:semula@' if project else ''}127.0.0.1:{proxy.port}"
    exports["HTTPS_PROXY"] = f"http://{user}127.0.0.1:{proxy.port}"

    content = uniq("node fetch")
    before = fake_provider.count()
    first, second = (run_node(node_project, exports, content, proxy) for _ in range(2))
    assert str(first["text"]).startswith(f"fake answer #{before + 1} "), first
    assert (first["decision"], second["decision"]) == ("miss", "hit")
    assert second["text"] == first["text"]
    assert fake_provider.count() == before + 1, "the second fetch was served from the recording"
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    assert [r["project"] for r in rows] == [lands_in] * 2, rows
