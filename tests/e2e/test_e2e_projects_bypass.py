"""Namespaces, opt-outs and the looser match tier, seen from the client side.

One auto-mode proxy serves the first half of this module (recording in projects alpha
and beta, the bypass header, `semula env` exports with curl and requests, the entries
CLI through the admin endpoint); then it is stopped and a replay-mode proxy on the same
data dir, with the provider gone, checks what each project can replay. Tests run in
file order; the replay fixture stops the auto proxy first (one DuckDB writer at a time).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import (
    FakeProvider,
    ProxyHandle,
    clean_env,
    openai_client,
    parse_exports,
    run_semula,
    semula_cmd,
    semula_meta,
    uniq,
)

pytestmark = pytest.mark.e2e

RUN = uniq("pb")
MODEL = "gpt-4o-mini"
CHAT_URL = "https://api.openai.com/v1/chat/completions"
SHARED = f"shared prompt {RUN}"  # recorded in alpha (user name) and then asked in beta (header)
ALPHA_ONLY = f"alpha only {RUN}"  # recorded in alpha only; replayed from beta must fail
BYPASSED = f"bypassed {RUN}"
NORMALISED = f"What is the capital of France? {RUN}"
NORMALISED_VARIANT = f"  what is the   capital of france?   {RUN}  "
VIA_ENV = f"via semula env {RUN}"


def chat(proxy: ProxyHandle, content: str, *, project: str | None = None,
         headers: dict[str, str] | None = None) -> tuple[str, dict[str, str | None]]:
    """One chat call; project goes in the proxy user name, like HTTPS_PROXY=http://alpha@host:port."""
    raw = openai_client(proxy.proxy_url_for(project), proxy.ca_path).chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": content}], extra_headers=headers or {})
    return raw.parse().choices[0].message.content or "", semula_meta(raw.headers)


@pytest.fixture(scope="module")
def auto(module_proxy_factory: ProxyFactory) -> ProxyHandle:
    return module_proxy_factory("auto", module_proxy_factory.new_data_dir("projects"))


@pytest.fixture(scope="module")
def recorded_texts() -> dict[str, str]:
    """Answers seen in auto mode, keyed by scenario, for the replay half to compare."""
    return {}


# --- auto mode ---------------------------------------------------------------------------------


def test_project_from_proxy_user_records_and_hits(auto: ProxyHandle, fake_provider: FakeProvider,
                                                  recorded_texts: dict[str, str]) -> None:
    before = fake_provider.count()
    text, meta = chat(auto, SHARED, project="alpha")
    assert meta["x-semula-decision"] == "miss" and fake_provider.count() == before + 1
    again, meta = chat(auto, SHARED, project="alpha")
    assert again == text and meta["x-semula-decision"] == "hit" and fake_provider.count() == before + 1
    recorded_texts["shared-alpha"] = text
    recorded_texts["alpha-only"], _ = chat(auto, ALPHA_ONLY, project="alpha")


def test_same_request_in_another_project_misses(auto: ProxyHandle, fake_provider: FakeProvider,
                                                recorded_texts: dict[str, str]) -> None:
    before = fake_provider.count()
    text, meta = chat(auto, SHARED, headers={"x-semula-project": "beta"})
    assert meta["x-semula-decision"] == "miss", meta
    assert fake_provider.count() == before + 1 and text != recorded_texts["shared-alpha"]
    assert "x-semula-project" not in fake_provider.last()["headers"], "the project header must be stripped"
    recorded_texts["shared-beta"] = text


def test_bypass_header_goes_upstream_every_time_and_records_nothing(auto: ProxyHandle,
                                                                   fake_provider: FakeProvider) -> None:
    texts = []
    for _ in range(2):
        before = fake_provider.count()
        text, meta = chat(auto, BYPASSED, headers={"x-semula-no-cache": "1"})
        assert meta["x-semula-decision"] == "bypass", meta
        assert fake_provider.count() == before + 1 and f"#{before + 1} " in text
        assert "x-semula-no-cache" not in fake_provider.last()["headers"], "the bypass header must be stripped"
        texts.append(text)
    assert texts[0] != texts[1]
    # Nothing was recorded, so the same request without the header is a miss, not a hit.
    _, meta = chat(auto, BYPASSED)
    assert meta["x-semula-decision"] == "miss", meta


def test_record_for_normalised_match(auto: ProxyHandle, recorded_texts: dict[str, str]) -> None:
    recorded_texts["normalised"], meta = chat(auto, NORMALISED)
    assert meta["x-semula-decision"] == "miss"


def test_env_exports_work_for_curl_and_requests(auto: ProxyHandle, fake_provider: FakeProvider,
                                                recorded_texts: dict[str, str]) -> None:
    res = run_semula("env", "--port", str(auto.port), "--confdir", str(auto.confdir), "--project", "alpha")
    assert res.returncode == 0, res.stderr
    exports = parse_exports(res.stdout)
    for name in ("HTTPS_PROXY", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert name in exports, f"{name} missing from:\n{res.stdout}"
    assert "unset SSL_CERT_FILE" in res.stdout.splitlines(), res.stdout  # httpx would load it whole
    assert urlsplit(exports["HTTPS_PROXY"]).username == "alpha", exports["HTTPS_PROXY"]

    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": VIA_ENV}]})
    before = fake_provider.count()
    # curl via `eval "$(semula env ...)"`, exactly as the docs tell users to do it.
    script = (f'eval "$({shlex.join(semula_cmd())} env --port {auto.port} --confdir {auto.confdir} --project alpha)"\n'
              f"curl -sS --fail-with-body -D /dev/stderr -H 'content-type: application/json' "
              f"-H 'authorization: Bearer sk-test' --data-binary @- {CHAT_URL}")
    curl_run = subprocess.run(["bash", "-c", script], input=body, capture_output=True, text=True, env=clean_env(),
                              timeout=60)
    assert curl_run.returncode == 0, curl_run.stderr
    curl_text = json.loads(curl_run.stdout)["choices"][0]["message"]["content"]
    assert curl_text.startswith(f"fake answer #{before + 1} ")
    assert "x-semula-decision: miss" in curl_run.stderr.lower()

    requests_script = (
        "import json, sys, requests\n"
        f"r = requests.post({CHAT_URL!r}, data=sys.stdin.read(), timeout=30,\n"
        "                  headers={'content-type': 'application/json', 'authorization': 'Bearer sk-test'})\n"
        "print(json.dumps({'status': r.status_code, 'decision': r.headers.get('x-semula-decision'),\n"
        "                  'text': r.json()['choices'][0]['message']['content']}))\n"
    )
    req_run = subprocess.run([sys.executable, "-c", requests_script], input=body, capture_output=True, text=True,
                             env=clean_env(**exports), timeout=60)
    assert req_run.returncode == 0, req_run.stderr
    out = json.loads(req_run.stdout)
    # requests (get_auth_from_url) and undici (ProxyAgent) silently drop a proxy user name that
    # has no password, so http://alpha@host would land here in project "default".
    assert out == {"status": 200, "decision": "hit", "text": curl_text}, (
        f"requests with `semula env --project alpha` should replay curl's alpha recording; "
        f"HTTPS_PROXY={exports['HTTPS_PROXY']!r}")
    assert fake_provider.count() == before + 1


def test_entries_cli_reads_through_admin_endpoint(auto: ProxyHandle) -> None:
    assert (auto.data_dir / "admin.json").exists(), "a running proxy advertises its admin endpoint"
    res = run_semula("entries", "list", "--data-dir", str(auto.data_dir), "--json")
    assert res.returncode == 0, res.stderr + res.stdout
    entries: list[dict[str, Any]] = json.loads(res.stdout)
    for entry in entries:
        assert {"id", "project", "provider", "model", "endpoint", "created_at"} <= set(entry), entry
    assert {e["project"] for e in entries} >= {"alpha", "beta", "default"}
    assert {e["provider"] for e in entries} == {"openai"} and {e["model"] for e in entries} == {MODEL}

    alpha = json.loads(run_semula("entries", "list", "--data-dir", str(auto.data_dir), "--project", "alpha",
                                  "--json").stdout)
    assert alpha and {e["project"] for e in alpha} == {"alpha"}
    assert len(alpha) == 3  # SHARED, ALPHA_ONLY, VIA_ENV

    stats = run_semula("stats", "--data-dir", str(auto.data_dir), "--json")
    assert stats.returncode == 0, stats.stderr
    json.loads(stats.stdout)


# --- replay mode, same data dir, provider gone -----------------------------------------------------


@pytest.fixture(scope="module")
def replay(module_proxy_factory: ProxyFactory, auto: ProxyHandle) -> ProxyHandle:
    auto.stop()
    return module_proxy_factory("replay", auto.data_dir, upstream="gone")


def test_replay_serves_each_project_its_own_recording(replay: ProxyHandle, recorded_texts: dict[str, str]) -> None:
    for project, headers, key in [("alpha", None, "shared-alpha"), (None, {"x-semula-project": "beta"}, "shared-beta")]:
        text, meta = chat(replay, SHARED, project=project, headers=headers)
        assert text == recorded_texts[key], (project, headers)
        assert meta["x-semula-decision"] == "hit"


@pytest.mark.parametrize(("label", "project", "headers"), [
    ("beta via header", None, {"x-semula-project": "beta"}),
    ("beta via proxy user", "beta", None),
    ("default project", None, None),
])
def test_replay_in_other_project_is_an_error(replay: ProxyHandle, fake_provider: FakeProvider,
                                             recorded_texts: dict[str, str], label: str, project: str | None,
                                             headers: dict[str, str] | None) -> None:
    assert chat(replay, ALPHA_ONLY, project="alpha")[0] == recorded_texts["alpha-only"]
    with pytest.raises(openai.NotFoundError) as exc:
        chat(replay, ALPHA_ONLY, project=project, headers=headers)
    message = exc.value.body["message"]  # type: ignore[index]
    assert message.startswith("semula: no recording matches"), message
    expected_project = "beta" if "beta" in label else "default"
    assert expected_project in message, message


def test_bypass_in_replay_mode_is_the_miss_error(replay: ProxyHandle, fake_provider: FakeProvider) -> None:
    before = fake_provider.count()
    with pytest.raises(openai.NotFoundError) as exc:
        chat(replay, SHARED, project="alpha", headers={"x-semula-no-cache": "1"})
    message = exc.value.body["message"]  # type: ignore[index]
    assert message.startswith("semula:") and "x-semula-no-cache" in message and "replay" in message, message
    assert fake_provider.count() == before


def test_whitespace_and_case_variant_replays_with_normalised_tier(replay: ProxyHandle,
                                                                 recorded_texts: dict[str, str]) -> None:
    text, meta = chat(replay, NORMALISED)
    assert text == recorded_texts["normalised"] and meta["x-semula-tier"] == "exact"
    text, meta = chat(replay, NORMALISED_VARIANT)
    assert meta["x-semula-decision"] == "hit", meta
    assert meta["x-semula-tier"] == "normalised", meta
    assert text == recorded_texts["normalised"]
