"""The JVM recipe with a real JDK: `semula env --format java`, then a plain `java Chat.java`.

The JVM reads neither HTTPS_PROXY nor SSL_CERT_FILE; JAVA_TOOL_OPTIONS carries the proxy properties
and a truststore holding the JDK's own CAs plus semula's. The example client (tests/clients/Chat.java,
the JDK's HttpClient, single-file source launch) records a chat call against the fake provider and
replays it with the provider gone. Skipped when no JDK is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from semula.session.java_env import CA_ALIAS, Jdk, ensure_truststore, find_jdk, java_tool_options
from semula.session.ca import ensure_ca

from conftest import ProxyFactory
from e2e_helpers import (
    REPO,
    FakeProvider,
    ProxyHandle,
    clean_env,
    closed_port,
    parse_exports,
    proxy_test_args,
    read_call_log,
    run_semula,
    semula_cmd,
    uniq,
)

pytestmark = pytest.mark.e2e

CHAT_JAVA = REPO / "tests" / "clients" / "Chat.java"


@pytest.fixture(scope="module")
def jdk() -> Jdk:
    if not shutil.which("java") or not shutil.which("keytool"):
        pytest.skip("no JDK (java, keytool) on PATH: the JVM recipe is not tested here")
    return find_jdk(clean_env())


def java_env(proxy: ProxyHandle) -> dict[str, str]:
    res = run_semula("env", "--format", "java", "--port", str(proxy.port), "--confdir", str(proxy.confdir))
    assert res.returncode == 0, res.stderr
    exports = parse_exports(res.stdout)
    assert list(exports) == ["JAVA_TOOL_OPTIONS"], res.stdout
    return exports


def run_java(exports: dict[str, str], prompt: str, project: str) -> tuple[str, str]:
    """The answer text and x-semula-decision of one `java Chat.java` run."""
    env = clean_env(**exports, OPENAI_API_KEY="sk-test-java", SEMULA_PROJECT=project)
    run = subprocess.run(["java", str(CHAT_JAVA), prompt], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    decision = re.search(r"x-semula-decision: (\S+)", run.stderr)
    assert decision, run.stderr
    return json.loads(run.stdout)["choices"][0]["message"]["content"], decision.group(1)


def keystore_aliases(store: Path, keytool: str = "keytool") -> list[str]:
    listing = subprocess.run([keytool, "-list", "-keystore", str(store), "-storepass", "changeit"],
                             capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    return [line.split(",", 1)[0] for line in listing.stdout.splitlines() if "trustedCertEntry" in line]


def test_java_httpclient_records_then_replays_with_the_provider_gone(
        jdk: Jdk, proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    auto = proxy_factory("auto")
    exports = java_env(auto)
    options = exports["JAVA_TOOL_OPTIONS"]
    for needle in (f"-Dhttps.proxyPort={auto.port}", "-Dhttps.proxyHost=127.0.0.1", "-Djavax.net.ssl.trustStore="):
        assert needle in options, options

    prompt = uniq("java httpclient")
    before = fake_provider.count()
    text, decision = run_java(exports, prompt, "jvm")
    assert decision == "miss" and text.startswith(f"fake answer #{before + 1} "), text
    auto.stop()

    replay = proxy_factory("replay", auto.data_dir, upstream="gone")
    replayed, decision = run_java(java_env(replay), prompt, "jvm")
    assert (replayed, decision) == (text, "hit")
    assert fake_provider.count() == before + 1, "the replay never reached the provider"
    replay.stop()
    rows = read_call_log(auto.data_dir)
    assert [(r["project"], r["decision"]) for r in rows] == [("jvm", "miss"), ("jvm", "hit")], rows


def test_the_truststore_keeps_the_jdk_cas_and_adds_semulas(jdk: Jdk, tmp_path: Path) -> None:
    """Other HTTPS from the same JVM (a Maven download, a database) still trusts the JDK's CAs."""
    store = ensure_truststore(tmp_path, ensure_ca(tmp_path), jdk)
    aliases = keystore_aliases(store)
    jdk_aliases = keystore_aliases(jdk.cacerts)
    assert CA_ALIAS in aliases
    assert len(jdk_aliases) > 1 and len(aliases) == len(jdk_aliases) + 1, (len(aliases), len(jdk_aliases))


GET_JAVA = """
import java.net.URI;
import java.net.http.*;

public class Get {
    public static void main(String[] args) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(args[0])).build(),
                HttpResponse.BodyHandlers.ofString());
        System.out.println(r.statusCode());
    }
}
"""


def test_other_https_from_the_jvm_still_trusts_the_jdks_cas(jdk: Jdk, tmp_path: Path,
                                                            fake_provider: FakeProvider) -> None:
    """A host the JDK trusts, called with semula's options, still works: its CA came along.

    No public host is reachable here, so a copy of the JDK's cacerts also trusts the fake provider's CA
    (standing for a public CA), and the JVM calls the fake provider directly, not through semula.
    """
    cacerts = tmp_path / "cacerts"
    shutil.copyfile(jdk.cacerts, cacerts)
    added = subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "public-ca-stand-in", "-file",
                            str(fake_provider.ca_path), "-keystore", str(cacerts), "-storepass", "changeit"],
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    confdir = tmp_path / "conf"
    store = ensure_truststore(confdir, ensure_ca(confdir), replace(jdk, cacerts=cacerts))
    (tmp_path / "Get.java").write_text(GET_JAVA)
    url = f"https://127.0.0.1:{fake_provider.port}/__count"

    def get(truststore: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["java", str(tmp_path / "Get.java"), url], capture_output=True, text=True, timeout=120,
                              env=clean_env(JAVA_TOOL_OPTIONS=java_tool_options("127.0.0.1", 9, truststore)))

    run = get(store)
    assert run.returncode == 0 and run.stdout.strip() == "200", run.stderr
    # The control: a truststore with semula's CA alone fails that same call.
    only_semula = tmp_path / "only-semula.p12"
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "semula", "-file", str(ensure_ca(confdir)),
                    "-keystore", str(only_semula), "-storetype", "PKCS12", "-storepass", "changeit"],
                   capture_output=True, text=True, timeout=60, check=True)
    failed = get(only_semula)
    assert failed.returncode != 0 and "PKIX" in failed.stderr, failed.stderr


def test_the_truststore_is_rebuilt_when_the_ca_or_the_jdk_store_changes(jdk: Jdk, tmp_path: Path) -> None:
    cacerts = tmp_path / "cacerts"
    shutil.copyfile(jdk.cacerts, cacerts)
    own_jdk = replace(jdk, cacerts=cacerts)
    confdir = tmp_path / "conf"
    store = ensure_truststore(confdir, ensure_ca(confdir), own_jdk)
    built = store.stat().st_mtime_ns
    assert ensure_truststore(confdir, ensure_ca(confdir), own_jdk).stat().st_mtime_ns == built, "unchanged: kept"

    first_jdk_alias = keystore_aliases(cacerts)[0]
    removed = subprocess.run(["keytool", "-delete", "-alias", first_jdk_alias, "-keystore", str(cacerts),
                              "-storepass", "changeit"], capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0, removed.stderr
    store = ensure_truststore(confdir, ensure_ca(confdir), own_jdk)
    assert first_jdk_alias not in keystore_aliases(store), "a changed JDK store rebuilds the truststore"

    old_ca = (confdir / "mitmproxy-ca-cert.pem").read_text()
    for ca_file in confdir.glob("mitmproxy-ca*"):
        ca_file.unlink()
    new_ca = ensure_ca(confdir)
    assert new_ca.read_text() != old_ca
    store = ensure_truststore(confdir, new_ca, own_jdk)
    exported = subprocess.run(["keytool", "-exportcert", "-rfc", "-alias", "semula-mitmproxy-ca", "-keystore",
                               str(store), "-storepass", "changeit"], capture_output=True, text=True, timeout=60)
    assert "".join(exported.stdout.split()) == "".join(new_ca.read_text().split()), "a new CA rebuilds it"


def test_java_format_refuses_a_project_it_cannot_send(jdk: Jdk, tmp_path: Path) -> None:
    res = run_semula("env", "--format", "java", "--confdir", str(tmp_path), "--project", "alpha")
    assert res.returncode != 0 and "x-semula-project" in res.stderr and "--project P" in res.stderr, res.stderr


def test_without_a_jdk_env_and_exec_say_what_to_do(tmp_path: Path) -> None:
    env = clean_env(PATH="/nonexistent", JAVA_HOME=str(tmp_path / "no-jdk"))
    res = run_semula("env", "--format", "java", "--confdir", str(tmp_path / "conf"), env=env)
    assert res.returncode != 0 and "JAVA_HOME" in res.stderr and "keytool" in res.stderr, res.stderr
    marker = tmp_path / "ran"
    res = run_semula("exec", "--java", "--data-dir", str(tmp_path / "data"), "--", "touch", str(marker), env=env)
    assert res.returncode != 0 and "JAVA_HOME" in res.stderr, res.stderr
    assert not marker.exists() and not (tmp_path / "data").exists(), "no proxy starts, the command does not run"


def test_exec_java_runs_jvm_clients_in_the_proxys_project(jdk: Jdk, tmp_path: Path, mitm_confdir: Path,
                                                          fake_provider: FakeProvider) -> None:
    """`semula exec --java --project P -- java …`: a proxy for project P, a client that sends no credentials."""
    data_dir = tmp_path / "semula-data"
    prompt = uniq("exec java")
    texts = []
    for mode, upstream in (("auto", fake_provider.port), ("replay", closed_port())):
        argv = [*semula_cmd(), "exec", "--java", "--project", "jvm-exec", "--mode", mode, "--data-dir", str(data_dir),
                *proxy_test_args(mitm_confdir, upstream), "--", "java", str(CHAT_JAVA), prompt]
        run = subprocess.run(argv, capture_output=True, text=True, env=clean_env(OPENAI_API_KEY="sk-test-java"),
                             timeout=180)
        assert run.returncode == 0, run.stderr
        texts.append(json.loads(run.stdout)["choices"][0]["message"]["content"])
        assert "x-semula-decision: " + ("miss" if mode == "auto" else "hit") in run.stderr, run.stderr
    assert texts[0] == texts[1] and texts[0].startswith("fake answer #"), texts
    assert {r["project"] for r in read_call_log(data_dir)} == {"jvm-exec"}
