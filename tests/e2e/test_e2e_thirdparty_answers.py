"""Two answers a third-party suite (pydantic-ai's cassettes) lost, end to end: a redirect from an extra
host, and an upload whose raw text is labelled `application/json` (google-genai's file-search upload).

An auto proxy with a CDN named by `--extra-host` (mapped to the fake provider) records a `GET /go/<name>`
that the CDN answers `302 Found` with a `Location` (httpx follows it to the image), and a file-search
upload of plain text labelled JSON. A replay proxy with the provider gone then serves both: the same
302 and `Location`, the same image after it, the same upload answer, with 0 calls reaching the fake.
Other text in the upload is another request: a miss. A 304 is never recorded by default (unit tests,
tests/unit/test_errorpolicy.py, say why).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, semula_meta, ssl_context, uniq
from fake_thirdparty import CDN_HOST, SIGNING_KEY_ID
from fakeprovider import media_bytes

pytestmark = pytest.mark.e2e

CDN = CDN_HOST
UPLOAD = ("https://generativelanguage.googleapis.com/upload/v1beta/fileSearchStores/store-1"
          ":uploadToFileSearchStore")


def cdn_args(upstream_port: int, recordings: Path) -> tuple[str, ...]:
    return ("--extra-host", CDN, "--set", f"map_remote=|//{CDN}/|//127.0.0.1:{upstream_port}/",
            "--recordings", str(recordings))


def client(proxy: ProxyHandle) -> httpx.Client:
    return httpx.Client(proxy=proxy.proxy_url, verify=ssl_context(proxy.ca_path), trust_env=False, timeout=30,
                        follow_redirects=True)


def upload(proxy: ProxyHandle, text: str) -> httpx.Response:
    with client(proxy) as c:  # google-genai labels the file's raw text application/json
        return c.post(UPLOAD, content=text.encode(), headers={"content-type": "application/json",
                                                              "x-goog-api-key": "AIza-test-not-a-real-key-0000000000"})


def test_a_redirect_and_text_labelled_json_are_recorded_and_replayed_offline(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path) -> None:
    recordings = tmp_path / "recordings"
    name = f"cat-{uuid.uuid4().hex[:8]}.png"
    text = f"{uniq('file search')}\nplain notes, not JSON {{\n"
    auto = proxy_factory("auto", extra_args=cdn_args(fake_provider.port, recordings))
    with client(auto) as c:
        followed = c.get(f"https://{CDN}/go/{name}")
    assert followed.status_code == 200 and followed.content == media_bytes(name)
    (redirect,) = followed.history
    assert redirect.status_code == 302 and redirect.headers["location"] == f"/media/{name}"
    assert semula_meta(redirect.headers)["x-semula-decision"] == "miss"
    assert redirect.headers.get("x-semula-entry"), f"the redirect was not recorded\n{auto.describe()}"
    uploaded = upload(auto, text)
    assert uploaded.status_code == 200, uploaded.text
    assert uploaded.headers.get("x-semula-entry"), f"the upload was not recorded\n{auto.describe()}"
    assert uploaded.json()["response"]["sizeBytes"] == str(len(text.encode()))
    auto.stop()

    count = fake_provider.count()
    replay = proxy_factory("replay", upstream="gone", extra_args=cdn_args(1, recordings))
    with client(replay) as c:
        again = c.get(f"https://{CDN}/go/{name}")
    assert again.status_code == 200 and again.content == followed.content
    (replayed_redirect,) = again.history
    assert replayed_redirect.status_code == 302 and replayed_redirect.headers["location"] == f"/media/{name}"
    assert [semula_meta(r.headers)["x-semula-decision"] for r in (replayed_redirect, again)] == ["hit", "hit"]
    replayed_upload = upload(replay, text)
    assert replayed_upload.status_code == 200 and replayed_upload.content == uploaded.content
    assert semula_meta(replayed_upload.headers)["x-semula-decision"] == "hit"
    other = upload(replay, text + "one more line\n")
    assert other.status_code == 404 and semula_meta(other.headers)["x-semula-decision"] == "miss", other.text
    assert fake_provider.count() == count, "replay reached the provider"


def test_a_redirect_to_a_presigned_url_keeps_its_signature_out_of_every_file(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, tmp_path: Path) -> None:
    """S3 sends a download to a presigned URL (credential, signature, a new one each time): the recorded
    `Location` keeps its path and its other parameters, the secret ones become `[REDACTED]` and the userinfo
    goes; the follow-up's key drops those parameters, so replay follows the recorded redirect to a hit."""
    recordings = tmp_path / "recordings"
    name = f"song-{uuid.uuid4().hex[:8]}.png"
    auto = proxy_factory("auto", extra_args=cdn_args(fake_provider.port, recordings))
    with client(auto) as c:
        followed = c.get(f"https://{CDN}/signed/{name}")
    assert followed.status_code == 200 and followed.content == media_bytes(name)
    signature = followed.history[0].headers["location"].rsplit("X-Amz-Signature=", 1)[1]
    assert len(signature) == 64, followed.history[0].headers["location"]  # the live answer, as it came
    auto.stop()

    planted = (signature, SIGNING_KEY_ID, "pa55w0rd")
    written = [p for root in (recordings, auto.data_dir) for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in written)
    for path in written:
        data = path.read_bytes()
        assert not [s for s in planted if s.encode() in data], f"a secret of the presigned URL reached {path}"

    replay = proxy_factory("replay", upstream="gone", extra_args=cdn_args(1, recordings))
    with client(replay) as c:
        replayed = c.get(f"https://{CDN}/signed/{name}")
    assert replayed.status_code == 200 and replayed.content == followed.content, replay.describe()
    (redirect,) = replayed.history
    location = redirect.headers["location"]
    assert location.startswith(f"https://{CDN}/media/{name}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%5BREDACTED%5D")
    assert "X-Amz-Expires=300&X-Amz-Signature=%5BREDACTED%5D" in location
    assert [semula_meta(r.headers)["x-semula-decision"] for r in (redirect, replayed)] == ["hit", "hit"]
