"""The fake provider must fool the real SDKs, or the e2e tests prove nothing.

Each test points an official SDK (or a raw HTTP client for Gemini) straight at the
fake, without semula in between, and checks that JSON and streamed answers parse and
that the call counter moves exactly once per call.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from e2e_helpers import FakeProvider, sdk_http_client, ssl_context
from fakeprovider import iter_json_lines, make_server


def direct_openai(fake: FakeProvider, **kwargs: Any) -> openai.OpenAI:
    base = kwargs.pop("base_url", f"{fake.base}/v1")
    client = sdk_http_client(None, fake.ca_path, openai)  # type: ignore[arg-type]
    return openai.OpenAI(api_key="sk-test", base_url=base, max_retries=0, http_client=client, **kwargs)


def direct_anthropic(fake: FakeProvider) -> anthropic.Anthropic:
    client = sdk_http_client(None, fake.ca_path, anthropic)  # type: ignore[arg-type]
    return anthropic.Anthropic(api_key="sk-ant-test", base_url=fake.base, max_retries=0, http_client=client)


def raw_client(fake: FakeProvider) -> Any:
    import httpx

    return httpx.Client(base_url=fake.base, verify=ssl_context(fake.ca_path), trust_env=False, timeout=10)


# --- OpenAI ---------------------------------------------------------------------------------


def test_openai_chat_json(fake_provider: FakeProvider) -> None:
    before = fake_provider.count()
    resp = direct_openai(fake_provider).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "Hello fake"}],
    )
    completion = resp.parse()
    n = before + 1
    assert completion.choices[0].message.content == f"fake answer #{n} to: Hello fake"
    assert resp.headers["x-fake-count"] == str(n)
    assert completion.usage and completion.usage.total_tokens > 0
    assert fake_provider.count() == n


def test_openai_chat_stream_with_usage(fake_provider: FakeProvider) -> None:
    before = fake_provider.count()
    stream = direct_openai(fake_provider).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Stream to me please"}],
        stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == f"fake answer #{before + 1} to: Stream to me please"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 3, "should arrive in pieces"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert any(c.choices and c.choices[0].finish_reason == "stop" for c in chunks)
    assert fake_provider.count() == before + 1


def test_openai_responses_json_and_stream(fake_provider: FakeProvider) -> None:
    client = direct_openai(fake_provider)
    before = fake_provider.count()
    resp = client.responses.create(model="gpt-4.1-mini", input="Respond please")
    assert resp.output_text == f"fake answer #{before + 1} to: Respond please"

    events = list(client.responses.create(model="gpt-4.1-mini", input=[{"role": "user", "content": "Stream a response"}], stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert "response.output_text.delta" in types
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == f"fake answer #{before + 2} to: Stream a response"

    # The accumulating helper is stricter about event order and identities.
    with client.responses.stream(model="gpt-4.1-mini", input="Helper stream") as stream:
        final = stream.get_final_response()
    assert final.output_text == f"fake answer #{before + 3} to: Helper stream"
    assert fake_provider.count() == before + 3


def test_openai_embeddings_float_and_base64(fake_provider: FakeProvider) -> None:
    client = direct_openai(fake_provider)
    default = client.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"])  # SDK asks for base64
    floats = client.embeddings.create(model="text-embedding-3-small", input=["alpha"], encoding_format="float")
    assert len(default.data) == 2 and len(default.data[0].embedding) == 8
    assert default.data[0].embedding == pytest.approx(floats.data[0].embedding, abs=1e-6)
    assert default.data[0].embedding != default.data[1].embedding


@pytest.mark.parametrize("kind", ["azure", "openrouter"])
def test_openai_compatible_paths(fake_provider: FakeProvider, kind: str) -> None:
    before = fake_provider.count()
    if kind == "azure":
        client: Any = openai.AzureOpenAI(
            api_key="azure-test", api_version="2024-10-21", azure_endpoint=fake_provider.base, max_retries=0,
            http_client=sdk_http_client(None, fake_provider.ca_path, openai),  # type: ignore[arg-type]
        )
        model = "my-deployment"
    else:
        client = direct_openai(fake_provider, base_url=f"{fake_provider.base}/api/v1")
        model = "openai/gpt-4o-mini"
    completion = client.chat.completions.create(model=model, messages=[{"role": "user", "content": f"via {kind}"}])
    assert completion.choices[0].message.content == f"fake answer #{before + 1} to: via {kind}"
    last = fake_provider.last()
    expected_path = "/openai/deployments/my-deployment/chat/completions" if kind == "azure" else "/api/v1/chat/completions"
    assert last["path"] == expected_path


# --- Anthropic ------------------------------------------------------------------------------


def test_anthropic_json_and_stream(fake_provider: FakeProvider) -> None:
    client = direct_anthropic(fake_provider)
    before = fake_provider.count()
    msg = client.messages.create(model="claude-haiku-5-5", max_tokens=64, messages=[{"role": "user", "content": "Hi Claude"}])
    assert msg.content[0].text == f"fake answer #{before + 1} to: Hi Claude"
    assert msg.stop_reason == "end_turn" and msg.usage.output_tokens > 0

    with client.messages.stream(model="claude-haiku-5-5", max_tokens=64,
                                messages=[{"role": "user", "content": [{"type": "text", "text": "Stream Claude"}]}]) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == f"fake answer #{before + 2} to: Stream Claude"
    assert len(pieces) >= 3 and final.content[0].text == "".join(pieces)

    raw_events = list(client.messages.create(model="claude-haiku-5-5", max_tokens=64, stream=True,
                                             messages=[{"role": "user", "content": "raw events"}]))
    assert [e.type for e in raw_events][:2] == ["message_start", "content_block_start"]
    assert [e.type for e in raw_events][-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert fake_provider.count() == before + 3


# --- Gemini (no SDK installed: raw HTTP, as curl users do) ------------------------------------


def test_gemini_generate_and_sse(fake_provider: FakeProvider) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "Hello Gemini"}]}]}
    before = fake_provider.count()
    with raw_client(fake_provider) as http:
        r = http.post("/v1beta/models/gemini-2.0-flash:generateContent", params={"key": "AIza-test"}, json=body)
        r.raise_for_status()
        candidate = r.json()["candidates"][0]
        assert candidate["content"]["parts"][0]["text"] == f"fake answer #{before + 1} to: Hello Gemini"
        assert candidate["finishReason"] == "STOP" and r.json()["usageMetadata"]["totalTokenCount"] > 0

        r = http.post("/v1beta/models/gemini-2.0-flash:streamGenerateContent", params={"alt": "sse", "key": "k"}, json=body)
        assert r.headers["content-type"].startswith("text/event-stream")
        chunks = list(iter_json_lines(r.text))
        assert "event:" not in r.text, "Gemini SSE is data-only"
        text = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
        assert text == f"fake answer #{before + 2} to: Hello Gemini"
        assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and "candidatesTokenCount" in chunks[-1]["usageMetadata"]
        assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])

        r = http.post("/v1beta/models/gemini-2.0-flash:streamGenerateContent", json=body)  # no alt=sse: JSON array
        assert isinstance(r.json(), list)
    last = fake_provider.last()
    assert last["path"].endswith(":streamGenerateContent") and last["query"] == {}


# --- Controls ---------------------------------------------------------------------------------

ERROR_CASES = [
    # (provider, control word, expected status, expected error type/status field)
    ("openai", "FAIL500", 500, "server_error"),
    ("openai", "RATE429", 429, "rate_limit_exceeded"),
    ("anthropic", "FAIL500", 500, "api_error"),
    ("anthropic", "RATE429", 429, "rate_limit_error"),
    ("gemini", "FAIL500", 500, "INTERNAL"),
    ("gemini", "RATE429", 429, "RESOURCE_EXHAUSTED"),
]


@pytest.mark.parametrize(("provider", "word", "status", "kind"), ERROR_CASES)
def test_error_controls_use_provider_error_shape(fake_provider: FakeProvider, provider: str, word: str,
                                                 status: int, kind: str) -> None:
    before = fake_provider.count()
    prompt = f"please {word} now"
    if provider == "openai":
        with pytest.raises(openai.APIStatusError) as exc:
            direct_openai(fake_provider).chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
        assert exc.value.status_code == status and exc.value.body["type"] == kind  # type: ignore[index]
    elif provider == "anthropic":
        with pytest.raises(anthropic.APIStatusError) as exc2:
            direct_anthropic(fake_provider).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": prompt}])
        assert exc2.value.status_code == status
        assert exc2.value.body["type"] == "error" and exc2.value.body["error"]["type"] == kind  # type: ignore[index]
    else:
        with raw_client(fake_provider) as http:
            r = http.post("/v1beta/models/g:generateContent", json={"contents": [{"parts": [{"text": prompt}]}]})
        assert r.status_code == status and r.json()["error"]["status"] == kind and r.json()["error"]["code"] == status
    assert fake_provider.count() == before + 1, "max_retries=0: exactly one call"


def test_breakstream_cuts_streams(fake_provider: FakeProvider) -> None:
    """The SDKs surface a cut stream as a transport error (which class varies by SDK version)."""
    with pytest.raises(Exception, match="(?i)incomplete|peer closed|connection"):
        list(direct_openai(fake_provider).chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "BREAKSTREAM please"}]))
    with pytest.raises(Exception, match="(?i)incomplete|peer closed|connection"):
        with direct_anthropic(fake_provider).messages.stream(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "BREAKSTREAM please"}]) as s:
            list(s.text_stream)


def test_slow_delays_answer(fake_provider: FakeProvider) -> None:
    start = time.monotonic()
    direct_openai(fake_provider).chat.completions.create(model="m", messages=[{"role": "user", "content": "SLOW down"}])
    assert time.monotonic() - start >= 0.5


@pytest.mark.parametrize("stream", [False, True])
def test_gzip_only_when_accepted(fake_provider: FakeProvider, stream: bool) -> None:
    import httpx

    body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "GZIP me"}]}
    with raw_client(fake_provider) as http:
        zipped = http.post("/v1/chat/completions", json=body, headers={"accept-encoding": "gzip"})
        plain = http.post("/v1/chat/completions", json=body, headers={"accept-encoding": "identity"})
    assert zipped.headers.get("content-encoding") == "gzip" and "chatcmpl-fake" in zipped.text
    assert "content-encoding" not in plain.headers and "chatcmpl-fake" in plain.text
    # Check the bytes on the wire really are gzip (httpx decoded them above).
    with httpx.Client(verify=ssl_context(fake_provider.ca_path), trust_env=False) as http:
        with http.stream("POST", f"{fake_provider.base}/v1/chat/completions", json=body,
                         headers={"accept-encoding": "gzip"}) as r:
            raw = b"".join(r.iter_raw())
    assert b"chatcmpl-fake" in gzip.decompress(raw)


def test_last_request_records_headers_and_query(fake_provider: FakeProvider) -> None:
    with raw_client(fake_provider) as http:
        http.post("/v1beta/models/g:generateContent?key=abc", json={"contents": [{"parts": [{"text": "hi"}]}]},
                  headers={"x-probe": "yes"})
    last = fake_provider.last()
    assert last["headers"]["x-probe"] == "yes" and last["query"] == {"key": ["abc"]}
    assert last["count"] == fake_provider.count()
    assert fake_provider.requests()[-1] == last


def test_unknown_route_is_404_and_not_counted(fake_provider: FakeProvider) -> None:
    before = fake_provider.count()
    with raw_client(fake_provider) as http:
        r = http.post("/v1/nope", json={})
    assert r.status_code == 404 and fake_provider.count() == before


def test_reset_and_concurrency_in_process(tmp_path: Path) -> None:
    """A private in-process server, so resetting cannot disturb the shared session fake."""
    server = make_server(tmp_path / "certs")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        import httpx

        base = f"https://localhost:{server.server_address[1]}"
        verify = ssl_context(tmp_path / "certs" / "fake-ca.pem")
        body = {"model": "m", "messages": [{"role": "user", "content": "count me"}]}

        def call() -> None:
            with httpx.Client(verify=verify, trust_env=False) as http:
                http.post(f"{base}/v1/chat/completions", json=body).raise_for_status()

        workers = [threading.Thread(target=call) for _ in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        with httpx.Client(verify=verify, trust_env=False) as http:
            assert http.get(f"{base}/__count").json() == {"count": 8}
            texts = {json.dumps(r["count"]) for r in http.get(f"{base}/__requests").json()}
            assert len(texts) == 8, "every call gets its own number"
            http.post(f"{base}/__reset")
            assert http.get(f"{base}/__count").json() == {"count": 0}
            assert http.get(f"{base}/__last").json() == {}
    finally:
        server.shutdown()
        server.server_close()
