"""Vertex AI: its hosts and paths, the adapters' readings, Google's token exchanges and the replay credentials.

The end-to-end run with google-genai and anthropic[vertex] is tests/e2e/test_e2e_vertex.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from mitmproxy.test import tflow, tutils

from addon_harness import run_addon
from semula.session.google_env import ADC_VARIABLE, PLACEHOLDER_ADC, google_placeholder_env
from semula.session.run import run_env
from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
from semula.core.redact import FingerprintKey, redact_text
from semula.providers import DEFAULT_PROVIDER_HOSTS, adapter_for, allow_hosts_regexes, host_matches, side_call_for
from semula.providers.base import RawRequest
from semula.providers.googleauth import PLACEHOLDER_TOKEN

KEY = FingerprintKey(b"v" * 32)
TOKEN = "ya29.a0AfH6SMBxPLANTEDtokenvalue0123456789abcdef"
GEMINI = "/v1beta1/projects/{p}/locations/{l}/publishers/google/models/gemini-2.0-flash:{m}"
CLAUDE = "/v1/projects/{p}/locations/{l}/publishers/anthropic/models/claude-sonnet-4@20250514:{m}"


def raw(path: str, body: dict, host: str = "us-central1-aiplatform.googleapis.com",
        query: tuple[tuple[str, str], ...] = (), token: str = TOKEN) -> RawRequest:
    return RawRequest("POST", host, path, query, {"authorization": f"Bearer {token}",
                                                  "content-type": "application/json"}, json.dumps(body).encode())


GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}], "generationConfig": {"temperature": 0}}
CLAUDE_BODY = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 64,
               "messages": [{"role": "user", "content": "hello"}]}


@pytest.mark.parametrize(("host", "intercepted"), [
    ("aiplatform.googleapis.com", True),
    ("us-central1-aiplatform.googleapis.com", True),
    ("europe-west4-aiplatform.googleapis.com:443", True),
    ("aiplatform.us.rep.googleapis.com", True),
    ("oauth2.googleapis.com", True),
    ("x-aiplatform.googleapis.com.evil.net", False),
    ("a.b-aiplatform.googleapis.com", False),  # one label only before -aiplatform
    ("-aiplatform.googleapis.com", False),
    ("evilaiplatform.googleapis.com", False),
    ("aiplatform.googleapis.com.evil.net", False),
    ("www.googleapis.com", False),  # serves Drive and Storage too: never by default
    ("sts.googleapis.com", False),
])
def test_vertex_hosts_and_look_alikes(host: str, intercepted: bool) -> None:
    assert host_matches(host, DEFAULT_PROVIDER_HOSTS) is intercepted
    target = host if ":" in host else f"{host}:443"
    assert any(re.search(r, target) for r in allow_hosts_regexes(DEFAULT_PROVIDER_HOSTS)) is intercepted


@pytest.mark.parametrize(("host", "path", "name"), [
    ("us-central1-aiplatform.googleapis.com", GEMINI.format(p="p", l="us-central1", m="generateContent"),
     "vertex-gemini"),
    ("aiplatform.googleapis.com", GEMINI.format(p="p", l="global", m="countTokens").replace("v1beta1", "v1"),
     "vertex-gemini"),
    ("aiplatform.googleapis.com", "/v1/publishers/google/models/gemini-2.0-flash:generateContent", "vertex-gemini"),
    ("aiplatform.googleapis.com", CLAUDE.format(p="p", l="global", m="rawPredict"), "vertex-anthropic"),
    ("us-east5-aiplatform.googleapis.com", CLAUDE.format(p="p", l="us-east5", m="streamRawPredict"),
     "vertex-anthropic"),
    ("aiplatform.googleapis.com", "/v1/projects/p/locations/global/endpoints/123:predict", "generic"),
    ("generativelanguage.googleapis.com", "/v1beta/models/gemini-2.0-flash:generateContent", "gemini"),
    ("generativelanguage.googleapis.com", GEMINI.format(p="p", l="l", m="generateContent"), "generic"),
])
def test_vertex_paths_pick_their_adapter(host: str, path: str, name: str) -> None:
    assert adapter_for(host, path).name == name


def test_vertex_gemini_reads_like_gemini_and_keeps_project_and_location() -> None:
    path = GEMINI.format(p="proj-a", l="us-central1", m="streamGenerateContent")
    request = raw(path, GEMINI_BODY, query=(("alt", "sse"),))
    c = adapter_for(request.host, path).canonicalise(request, KEY)
    assert (c.provider, c.model, c.stream, c.parsed) == ("vertex-gemini", "gemini-2.0-flash", True, True)
    assert c.messages[0].text == "hello" and c.query == (("alt", "sse"),)
    assert "/projects/proj-a/locations/us-central1/" in c.endpoint
    unary = GEMINI.format(p="proj-a", l="us-central1", m="generateContent")
    assert not adapter_for(request.host, unary).canonicalise(raw(unary, GEMINI_BODY), KEY).stream
    others = [raw(path.replace("proj-a", project), GEMINI_BODY, query=(("alt", "sse"),))
              for project in ("proj-b", "123456789012", "987654321098")]  # project numbers are not volatile ids
    elsewhere = raw(path.replace("us-central1", "europe-west4"), GEMINI_BODY, query=(("alt", "sse"),))
    canonicals = [adapter_for(r.host, r.path).canonicalise(r, KEY) for r in (request, *others, elsewhere)]
    assert len({request_fingerprint(c) for c in canonicals}) == 5, "another project or location is another request"
    assert len({normalised_fingerprint(c) for c in canonicals}) == 5, "in the normalised tier too"


def test_vertex_claude_reads_like_anthropic_with_the_model_and_stream_in_the_path() -> None:
    path = CLAUDE.format(p="p", l="global", m="streamRawPredict")
    c = adapter_for("aiplatform.googleapis.com", path).canonicalise(
        raw(path, {**CLAUDE_BODY, "stream": True}, host="aiplatform.googleapis.com"), KEY)
    assert (c.provider, c.model, c.stream, c.parsed) == ("vertex-anthropic", "claude-sonnet-4@20250514", True, True)
    assert c.params["anthropic_version"] == "vertex-2023-10-16", "the version in the body counts"
    plain = CLAUDE.format(p="p", l="global", m="rawPredict")
    assert not adapter_for("aiplatform.googleapis.com", plain).canonicalise(
        raw(plain, CLAUDE_BODY, host="aiplatform.googleapis.com"), KEY).stream
    count = "/v1/projects/p/locations/global/publishers/anthropic/models/count-tokens:rawPredict"
    assert adapter_for("aiplatform.googleapis.com", count).canonicalise(
        raw(count, {**CLAUDE_BODY, "model": "claude-sonnet-4@20250514"}, host="aiplatform.googleapis.com"),
        KEY).model == "claude-sonnet-4@20250514"


def test_the_oauth_token_is_in_no_fingerprint_and_nothing_stored() -> None:
    path = GEMINI.format(p="p", l="us-central1", m="generateContent")
    first = adapter_for("us-central1-aiplatform.googleapis.com", path).canonicalise(raw(path, GEMINI_BODY), KEY)
    second = adapter_for("us-central1-aiplatform.googleapis.com", path).canonicalise(
        raw(path, GEMINI_BODY, token="ya29.another-token-minted-an-hour-later-0123456789"), KEY)
    assert first.headers == () and request_fingerprint(first) == request_fingerprint(second)
    assert normalised_fingerprint(first) == normalised_fingerprint(second)
    assert TOKEN not in json.dumps(first.to_json())
    assert redact_text(f"the token {TOKEN} leaked") == "the token [REDACTED] leaked", "a bare token in text too"


@pytest.mark.parametrize(("host", "path", "status"), [
    ("oauth2.googleapis.com", "/token", 200),
    ("oauth2.googleapis.com", "/tokeninfo", 400),  # never recorded either, but not answered as a token
    ("www.googleapis.com", "/oauth2/v4/token", 200),  # when a project intercepts the host
    ("sts.googleapis.com", "/v1/token", 200),
    ("accounts.google.com", "/o/oauth2/token", 200),
    ("www.googleapis.com", "/storage/v1/b", None),
    ("oauth2.googleapis.com.evil.net", "/token", None),
])
def test_token_exchanges_are_side_calls(host: str, path: str, status: int | None) -> None:
    found = side_call_for(host, path)
    assert (found.path.status if found else None) == status
    if status == 200:
        assert json.loads(found.path.body) == PLACEHOLDER_TOKEN and found.provider == "google-oauth"


REFRESH = "1//0gPLANTED-refresh-token-0123456789"


def _token_flow():
    host = "oauth2.googleapis.com"
    body = urlencode({"grant_type": "refresh_token", "client_id": "c.apps.googleusercontent.com",
                      "client_secret": "GOCSPX-PLANTED", "refresh_token": REFRESH}).encode()
    request = tutils.treq(method=b"POST", scheme=b"https", host=host, port=443, path=b"/token",
                          authority=host.encode(), content=body,
                          headers=((b"host", host.encode()), (b"content-type", b"application/x-www-form-urlencoded")))
    return tflow.tflow(req=request)


@pytest.mark.parametrize("mode", ["auto", "replay"])
def test_a_token_exchange_is_forwarded_untouched_or_answered_and_its_body_never_logged(
        tmp_path: Path, mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    async def scenario(addon, tctx):
        flow = _token_flow()
        sent = flow.request.content
        addon.requestheaders(flow)
        await addon.request(flow)
        if mode == "replay":
            assert flow.response is not None and json.loads(flow.response.content) == PLACEHOLDER_TOKEN
        else:
            assert flow.response is None and flow.request.content == sent, "forwarded untouched"
            flow.response = tutils.tresp(status_code=200, content=json.dumps(
                {"access_token": TOKEN, "expires_in": 3599, "token_type": "Bearer"}).encode(),
                headers=((b"content-type", b"application/json"),))
            addon.responseheaders(flow)
            await addon.response(flow)
        assert flow.comment.startswith("bypass")
        engine = addon.parts.store.engine
        assert engine is None or engine.projects() == [], "nothing was recorded"

    run_addon(scenario, tmp_path, semula_mode=mode)
    out = capsys.readouterr()
    line = next(s for s in out.out.splitlines() if "oauth2.googleapis.com/token" in s)
    assert "→ bypass (side call: Google OAuth token exchange" in line
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for secret in (REFRESH, "GOCSPX-PLANTED", TOKEN):
        assert secret not in out.out + out.err and secret.encode() not in written, secret


def test_replay_runs_get_placeholder_google_credentials_unless_they_have_their_own(tmp_path: Path) -> None:
    env = google_placeholder_env({}, tmp_path)
    written = json.loads(Path(env[ADC_VARIABLE]).read_text())
    assert written == PLACEHOLDER_ADC and written["type"] == "authorized_user"
    assert all("semula-replay-placeholder" in str(v) or k == "type" for k, v in written.items()), "no secret in it"
    assert google_placeholder_env({ADC_VARIABLE: "/mine.json"}, tmp_path) == {}
    replay = run_env("replay", (), "127.0.0.1", 8080, tmp_path, {})
    assert replay[ADC_VARIABLE] == env[ADC_VARIABLE]
    assert ADC_VARIABLE not in run_env("auto", (), "127.0.0.1", 8080, tmp_path, {})
    assert ADC_VARIABLE not in run_env("replay", (), "127.0.0.1", 8080, tmp_path, {ADC_VARIABLE: "/mine.json"})


@pytest.mark.parametrize("own", ["", "/home/me/adc.json"])
def test_semula_env_replay_exports_the_placeholder_credentials_only_when_unset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own: str) -> None:
    import os
    import subprocess

    from click.testing import CliRunner

    from semula.cli import main

    monkeypatch.delenv(ADC_VARIABLE, raising=False)
    result = CliRunner().invoke(main, ["env", "--confdir", str(tmp_path), "--mode", "replay"])
    assert result.exit_code == 0, result.output
    shell_env = {k: v for k, v in os.environ.items() if k != ADC_VARIABLE}
    if own:
        shell_env[ADC_VARIABLE] = own
    shell = subprocess.run(["bash", "-c", f'{result.output}\necho "${ADC_VARIABLE}"'], capture_output=True, text=True,
                           env=shell_env, check=True)
    expected = own or str(tmp_path / "semula-google-placeholder-credentials.json")
    assert shell.stdout.strip() == expected
    assert json.loads((tmp_path / "semula-google-placeholder-credentials.json").read_text()) == PLACEHOLDER_ADC
