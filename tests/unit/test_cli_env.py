"""`semula env --mode replay`: placeholder API keys that never shadow a key the shell has."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from semula.cli import main
from semula.session.clientenv import PLACEHOLDER_KEY, namespace_by_key, placeholder_keys

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


def test_placeholder_keys_fill_only_unset_providers() -> None:
    keys = placeholder_keys({"ANTHROPIC_API_KEY": "sk-ant", "GOOGLE_API_KEY": "g"})
    assert keys["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert not {"ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"} & keys.keys()


def test_namespace_by_key_switch() -> None:
    assert namespace_by_key(("semula_namespace_by_key=true",))
    assert not namespace_by_key(("semula_namespace_by_key=off",)) and not namespace_by_key(())


@pytest.mark.parametrize("extra, expect_placeholder", [
    (["--mode", "replay"], True), ([], False), (["--mode", "replay", "--namespace-by-key"], False)])
def test_env_exports_placeholders_in_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str],
                                            expect_placeholder: bool) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(main, ["env", "--confdir", str(tmp_path), *extra])
    assert result.exit_code == 0, result.output
    # The shell keeps a key it has, even one it never exported.
    shell = subprocess.run(
        ["bash", "-c", f'ANTHROPIC_API_KEY=sk-ant-local\n{result.output}\n'
                       'echo "$OPENAI_API_KEY|$ANTHROPIC_API_KEY|$GEMINI_API_KEY|$GOOGLE_API_KEY"\n'
                       'echo "${SSL_CERT_FILE-unset}"'],
        capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k not in KEYS}, check=True)
    placeholder = PLACEHOLDER_KEY if expect_placeholder else ""
    # Only GOOGLE_API_KEY of the Google pair, the one google-genai reads first: it warns when both are set.
    assert shell.stdout.split() == [f"{placeholder}|sk-ant-local||{placeholder}", "unset"]  # SSL_CERT_DIR serves


def test_placeholder_key_groups_are_the_adapters_declared_key_variables() -> None:
    from semula.providers import ADAPTERS, KEY_VARIABLE_GROUPS
    from semula.providers.auth import KeyAuth
    from semula.session.clientenv import PROVIDER_KEY_GROUPS

    assert PROVIDER_KEY_GROUPS is KEY_VARIABLE_GROUPS
    names = [name for group in PROVIDER_KEY_GROUPS for name in group]
    assert len(names) == len(set(names)), "a variable in two groups would get two placeholders"
    for adapter in ADAPTERS:  # every key drift can send is one a placeholder stands in for
        auth = adapter.auth()
        if isinstance(auth, KeyAuth) and adapter.name != "mcp":  # $SEMULA_MCP_TOKEN: drift's own, no client reads it
            assert set(auth.env) <= set(names), adapter.name
    assert "SEMULA_MCP_TOKEN" not in names
    assert PROVIDER_KEY_GROUPS[:4] == (("OPENAI_API_KEY",), ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
                                       ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
                                       ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"))
    assert {("MISTRAL_API_KEY",), ("GROQ_API_KEY",), ("XAI_API_KEY",)} <= set(PROVIDER_KEY_GROUPS)


@pytest.mark.parametrize(("sets", "plain_http"), [
    ((), False),
    (("semula_extra_hosts=llm.internal.example",), True),
    (("semula_mcp_servers=tools.internal.example/mcp",), True),
    (("semula_hosts=api.openai.com",), True),
], ids=["built-in providers only", "an extra host", "an MCP server", "the user's own host list"])
def test_http_proxy_is_set_only_when_a_plain_http_host_may_be_intercepted(
        tmp_path: Path, sets: tuple[str, ...], plain_http: bool) -> None:
    """The built-in providers speak only HTTPS: HTTP_PROXY there would only make httpx build (and load the CA
    bundle for) one more SSL context per client. A host of the user's own may be plain HTTP."""
    from semula.session.run import run_env

    env = run_env("auto", sets, "127.0.0.1", 8080, tmp_path, {})
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://127.0.0.1:8080"
    assert ("HTTP_PROXY" in env and "http_proxy" in env) is plain_http, env
    assert ("HTTP_PROXY" in env or "http_proxy" in env) is plain_http, env


@pytest.mark.parametrize(("sets", "everything"), [
    ((), False),
    (("semula_intercept_all=true",), True),
    (("semula_intercept_all=TRUE",), True),
    (("semula_intercept_all=true", "semula_intercept_all=false"), False),  # the last value counts, as in mitmproxy
])
def test_intercept_all_decrypts_every_host_and_gives_clients_semulas_ca_alone(
        tmp_path: Path, sets: tuple[str, ...], everything: bool) -> None:
    from semula.cli.proxy_cmd import mitmproxy_args
    from semula.session.run import run_env

    env = run_env("auto", sets, "127.0.0.1", 8080, tmp_path, {})
    bundle = Path(str(env["CURL_CA_BUNDLE"])).read_text()
    assert (bundle.count("BEGIN CERTIFICATE") == 1) is everything
    file_readers = ("NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE", "GIT_SSL_CAINFO", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH")
    assert {env[name] for name in file_readers} == {env["CURL_CA_BUNDLE"]}
    if everything:  # one certificate: the file is as cheap as a directory
        assert env["SSL_CERT_FILE"] == env["REQUESTS_CA_BUNDLE"] == env["CURL_CA_BUNDLE"]
    else:  # httpx would load SSL_CERT_FILE whole, before SSL_CERT_DIR: it is unset
        assert env["SSL_CERT_FILE"] is None and env["SSL_CERT_DIR"] == env["REQUESTS_CA_BUNDLE"]
        assert len(list(Path(str(env["SSL_CERT_DIR"])).iterdir())) == bundle.count("BEGIN CERTIFICATE")
    args = mitmproxy_args("auto", "127.0.0.1", 8080, tmp_path, "default", sets, web=False)
    assert any(a.startswith("allow_hosts=") for a in args) is not everything
