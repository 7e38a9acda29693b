"""Go's net/http through the proxy, configured only by `semula env`.

Go's default transport reads HTTPS_PROXY/NO_PROXY, and on Linux SSL_CERT_FILE (the bundle semula env
writes: public roots + semula's CA). The example client (tests/clients/chat.go) is built once, with
the build cache in a temporary folder, then records a chat call and replays it with the provider gone.
The project travels as the proxy user name (P:semula@). Skipped when go is not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import REPO, FakeProvider, ProxyHandle, clean_env, parse_exports, read_call_log, run_semula, uniq

pytestmark = pytest.mark.e2e

CHAT_GO = REPO / "tests" / "clients" / "chat.go"


@pytest.fixture(scope="module")
def go_chat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/clients/chat.go built into a temporary folder (build cache there too, never ~/.cache)."""
    go = shutil.which("go")
    if not go:
        pytest.skip("go is not installed: the Go recipe is not tested here")
    work = tmp_path_factory.mktemp("go")
    binary = work / "chat"
    env = clean_env(GOCACHE=str(work / "cache"), GOPATH=str(work / "gopath"), GOTOOLCHAIN="local", GOPROXY="off",
                    GOFLAGS="", GO111MODULE="")
    build = subprocess.run([go, "build", "-o", str(binary), str(CHAT_GO)], capture_output=True, text=True, env=env,
                           cwd=work, timeout=600)
    assert build.returncode == 0, build.stderr
    return binary


def run_go(binary: Path, proxy: ProxyHandle, prompt: str, project: str, *, user_only: bool = False) -> tuple[str, str]:
    """The answer text and x-semula-decision of one run, with exactly what `semula env --project` exports."""
    res = run_semula("env", "--port", str(proxy.port), "--confdir", str(proxy.confdir), "--project", project)
    assert res.returncode == 0, res.stderr
    exports = parse_exports(res.stdout)
    assert exports["HTTPS_PROXY"] == f"http://{project}:semula@127.0.0.1:{proxy.port}", exports
    if user_only:
        exports["HTTPS_PROXY"] = f"http://{project}@127.0.0.1:{proxy.port}"
    run = subprocess.run([str(binary), prompt], capture_output=True, text=True, timeout=60,
                         env=clean_env(**exports, OPENAI_API_KEY="sk-test-go"))
    assert run.returncode == 0, f"{run.stderr}\n{proxy.describe()}"
    decision = re.search(r"x-semula-decision: (\S+)", run.stderr)
    assert decision, run.stderr
    return json.loads(run.stdout)["choices"][0]["message"]["content"], decision.group(1)


def test_go_net_http_records_then_replays_with_the_provider_gone(go_chat: Path, proxy_factory: ProxyFactory,
                                                                 fake_provider: FakeProvider) -> None:
    prompt = uniq("go net/http")
    auto = proxy_factory("auto")
    before = fake_provider.count()
    text, decision = run_go(go_chat, auto, prompt, "gopher")
    assert decision == "miss" and text.startswith(f"fake answer #{before + 1} "), text
    auto.stop()

    replay = proxy_factory("replay", auto.data_dir, upstream="gone")
    assert run_go(go_chat, replay, prompt, "gopher") == (text, "hit")
    assert fake_provider.count() == before + 1, "the replay never reached the provider"
    replay.stop()
    rows = read_call_log(auto.data_dir)
    assert [(r["project"], r["decision"]) for r in rows] == [("gopher", "miss"), ("gopher", "hit")], rows


def test_go_sends_a_user_only_proxy_url_too(go_chat: Path, proxy_factory: ProxyFactory) -> None:
    """certs_readme.md: Go sends http://P@host as well as the documented http://P:semula@host."""
    proxy = proxy_factory("auto")
    _, decision = run_go(go_chat, proxy, uniq("go user only"), "gopher-user", user_only=True)
    assert decision == "miss"
    proxy.stop()
    assert [r["project"] for r in read_call_log(proxy.data_dir)] == ["gopher-user"]
