"""Google Vertex AI records in auto and replays offline on a machine with no Google credentials.

google-genai (`vertexai=True`) and `anthropic[vertex]` (`AnthropicVertex`) run with the environment
`semula exec` gives a run (`session.run.run_env`, set for the test only), as a user's tests do. In auto
they hold planted Google credentials (an `authorized_user` file with a refresh token and a client
secret); google-auth trades them at `oauth2.googleapis.com/token`, where the fake mints a fresh
random access token on every call. Replay then runs from a fresh proxy with every provider host
mapped to a closed port, a fresh data dir, a clean copy of the recordings folder and no
GOOGLE_APPLICATION_CREDENTIALS: semula's placeholder credentials refresh against semula itself.
The answers are the same, nothing reaches the fake, and no token, refresh token or client secret
is in any file or console line.
"""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, clean_env, uniq, wait_for_rows
from fake_vertex import TOKEN_PREFIX

pytestmark = pytest.mark.e2e

PROJECT, LOCATION = "semula-vertex-test", "us-central1"
REFRESH_TOKEN = "1//0gPLANTED-refresh-" + secrets.token_urlsafe(24)
CLIENT_SECRET = "GOCSPX-PLANTED" + secrets.token_urlsafe(16)
GOOGLE_VARIABLES = ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "CLOUDSDK_CONFIG")
CLAUDE = "claude-sonnet-4@20250514"
ARRAY_URL = (f"https://{LOCATION}-aiplatform.googleapis.com/v1/projects/{PROJECT}/locations/{LOCATION}"
             "/publishers/google/models/gemini-2.0-flash:streamGenerateContent")

def vertex_calls(run: str, try_miss: bool) -> dict[str, Any]:
    """What a test suite under semula runs; returns what the SDKs returned, and the kinds of token they held."""
    import google.auth
    import google.auth.transport.requests
    from anthropic import AnthropicVertex
    from google import genai

    out: dict[str, Any] = {}
    client = genai.Client(vertexai=True, project=PROJECT, location=LOCATION)
    answer = client.models.generate_content(model="gemini-2.0-flash", contents=f"vertex hello {run}")
    out["gemini"] = [answer.text, answer.usage_metadata.model_dump(mode="json")]
    out["gemini_stream"] = [c.text for c in client.models.generate_content_stream(
        model="gemini-2.0-flash", contents=f"vertex stream {run}")]
    tokens = [client._api_client._credentials.token]

    claude = AnthropicVertex(project_id=PROJECT, region="global", max_retries=0)
    message = claude.messages.create(model=CLAUDE, max_tokens=64,
                                     messages=[{"role": "user", "content": f"claude on vertex {run}"}])
    out["claude"] = message.model_dump(mode="json")
    with claude.messages.stream(model=CLAUDE, max_tokens=64,
                                messages=[{"role": "user", "content": f"claude streamed {run}"}]) as stream:
        out["claude_stream"] = [list(stream.text_stream), stream.get_final_message().model_dump(mode="json")]
    tokens.append(claude.credentials.token)

    # REST without alt=sse: Vertex streams one JSON array (google-auth's AuthorizedSession, as curl users do)
    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    session = google.auth.transport.requests.AuthorizedSession(credentials)
    array = session.post(ARRAY_URL, json={"contents": [{"role": "user", "parts": [{"text": f"array {run}"}]}]})
    out["array"] = [array.status_code, array.headers.get("content-type"), array.text]
    tokens.append(credentials.token)
    if try_miss:  # another project is another request: a miss, never the recording of this one
        other = genai.Client(vertexai=True, project=PROJECT + "-other", location=LOCATION)
        try:
            other.models.generate_content(model="gemini-2.0-flash", contents=f"vertex hello {run}")
            out["miss"] = "served"
        except Exception as e:  # noqa: BLE001 - the SDK's error, whatever its type
            out["miss"] = f"{type(e).__name__}: {e}"
    return {"answers": out, "token_kinds": sorted({str(t).split("-")[0] for t in tokens})}


def run_clients(proxy: ProxyHandle, monkeypatch: pytest.MonkeyPatch, run: str, credentials: Path | None,
                try_miss: bool = False) -> dict[str, Any]:
    """The calls with the environment `semula exec` gives a run (`session.run.run_env`), and only it."""
    from semula.session.clientenv import applied
    from semula.session.run import run_env

    base = {k: v for k, v in clean_env().items() if k not in GOOGLE_VARIABLES}
    if credentials is not None:
        base["GOOGLE_APPLICATION_CREDENTIALS"] = str(credentials)
    env = applied(base, run_env(proxy.mode, (), "127.0.0.1", proxy.port, proxy.confdir, base))
    with monkeypatch.context() as patch:
        for name in (*GOOGLE_VARIABLES, "HOME", "SSL_CERT_FILE"):
            patch.delenv(name, raising=False)  # no gcloud login of the developer's either
        for name, value in env.items():
            patch.setenv(name, value)
        patch.setenv("HOME", str(proxy.data_dir.parent))
        return vertex_calls(run, try_miss)


def leaks(paths: list[Path], texts: list[str], secrets_: list[str]) -> list[str]:
    """Which secret (or any token this fake minted) is in which file or console text, by raw bytes."""
    needles = [s.encode() for s in secrets_] + [TOKEN_PREFIX.encode()]
    found = []
    for root in paths:
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            found += [f"{needle[:16]!r} in {path}" for needle in needles if needle in data]
    for i, text in enumerate(texts):
        found += [f"{needle[:16]!r} in console {i}" for needle in needles if needle in text.encode()]
    return found


def test_vertex_records_in_auto_and_replays_offline_without_credentials(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    run = uniq("vertex")
    folder = tmp_path / "semula-recordings"
    credentials = tmp_path / "adc.json"
    credentials.write_text(json.dumps({"type": "authorized_user", "client_id": "planted.apps.googleusercontent.com",
                                       "client_secret": CLIENT_SECRET, "refresh_token": REFRESH_TOKEN}))
    fake_provider.reset()
    recorder = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    recorded = run_clients(recorder, monkeypatch, run, credentials)
    assert recorded["token_kinds"] == ["ya29.fake"], recorded
    calls = fake_provider.requests()
    minted = sorted({c["headers"].get("authorization", "") for c in calls if "aiplatform" in c["path"] or
                     "publishers" in c["path"]})
    assert [c["path"] for c in calls if c["path"] == "/token"], "google-auth refreshed at the fake's token endpoint"
    assert minted and all(m.startswith(f"Bearer {TOKEN_PREFIX}") for m in minted), minted
    assert {c["path"].rsplit(":", 1)[-1] for c in calls if "publishers" in c["path"]} == {
        "generateContent", "streamGenerateContent", "rawPredict", "streamRawPredict"}
    assert recorded["answers"]["array"][0] == 200 and recorded["answers"]["array"][2].lstrip().startswith("[")
    rows = wait_for_rows(recorder.data_dir, lambda r: True, at_least=len(calls))
    token_rows = [r for r in rows if r["host"] == "oauth2.googleapis.com"]
    assert token_rows and all(r["decision"] == "bypass" and not r["recorded"] for r in token_rows), token_rows
    assert "side call: Google OAuth token exchange" in (token_rows[0]["bypass_reason"] or "")
    model_rows = [r for r in rows if "publishers" in r["path"]]
    assert sorted({r["provider"] for r in model_rows}) == ["vertex-anthropic", "vertex-gemini"], model_rows
    assert all(r["recorded"] for r in model_rows), model_rows
    recorder.stop()
    files = sorted(p for p in folder.rglob("*.json") if not p.name.startswith("_"))
    assert len(files) == 5, files
    endpoints = {json.loads(p.read_text())["request"]["endpoint"] for p in files}
    assert all(f"/projects/{PROJECT}/locations/" in e for e in endpoints), endpoints

    clean = tmp_path / "clean-recordings"
    shutil.copytree(folder, clean)
    before = fake_provider.count()
    replayer = proxy_factory("replay", proxy_factory.new_data_dir("fresh"), upstream="gone",
                             extra_args=("--recordings", str(clean)))
    replayed = run_clients(replayer, monkeypatch, run, None, try_miss=True)
    miss = replayed["answers"].pop("miss")
    assert "404" in miss and "no recording" in miss, miss
    assert replayed["answers"] == recorded["answers"], "the same answers, offline"
    assert replayed["token_kinds"] == ["semula"], "the placeholder token semula's replay answered"
    assert fake_provider.count() == before, "replay never reached the provider"
    assert replayer.pump.wait_for(lambda line: "oauth2.googleapis.com/token" in line and "bypass" in line, 20), \
        replayer.describe()
    replayer.stop()
    found = leaks([folder, clean, recorder.data_dir, replayer.data_dir, replayer.confdir],
                  [recorder.output(), replayer.output()], [REFRESH_TOKEN, CLIENT_SECRET, *minted])
    assert not found, found
