"""OpenTelemetry spans (semula_otel) received by a real OTLP/HTTP receiver started in the test.

A real `semula proxy` with the standard OTEL_* variables and the option, the HTTPS fake provider and the
OpenAI SDK: a call recorded then replayed sends one span each (decision miss then hit), the GenAI
conventions' model and usage and semula's own attributes; a key planted in the Authorization header and
in the prompt is in no byte the receiver got, nor is the prompt's text (unless semula_otel_content, and
then redacted). A receiver that is down costs one line: calls are answered and the proxy stops.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from conftest import ProxyFactory
from e2e_helpers import (
    clean_env, closed_port, openai_client, proxy_test_args, read_call_log, semula_cmd, uniq,
)

pytestmark = pytest.mark.e2e

PLANTED_KEY = "sk-live-PLANTED" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4"
SECRET_WORDS = "zebra-marmalade-quasar"  # prompt text that must not reach a span


class Receiver:
    """A tiny OTLP/HTTP collector on loopback: POST /v1/traces, protobuf, every body kept."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver.cond:
                    receiver.paths.append(self.path)
                    receiver.bodies.append(body + str(self.headers).encode())  # headers too: grep them all
                    receiver.requests.append(ExportTraceServiceRequest.FromString(body))
                    receiver.cond.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[dict[str, Any]]:
        """Every span received: its name, status code, times and attributes as plain values."""
        out = []
        with self.cond:
            requests = list(self.requests)
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.append({"name": span.name, "status": span.status.code, "kind": span.kind,
                                    "start": span.start_time_unix_nano, "end": span.end_time_unix_nano,
                                    "resource": resource,
                                    "attributes": {a.key: _value(a.value) for a in span.attributes}})
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def otel_env(endpoint: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "semula-e2e",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-token=collector-secret-1234"}


def ask(proxy: Any, prompt: str) -> Any:
    client = openai_client(proxy.proxy_url, proxy.ca_path, api_key=PLANTED_KEY)
    return client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])


def planted_prompt(run: str) -> str:
    return f"{run} {SECRET_WORDS} my key is {PLANTED_KEY} please keep it"


def test_a_recorded_then_replayed_call_sends_one_span_each_without_key_or_prompt(
        proxy_factory: ProxyFactory, receiver: Receiver) -> None:
    data_dir = proxy_factory.new_data_dir()
    run = uniq("otel")
    folder = data_dir.parent / "recordings"
    proxy = proxy_factory("auto", data_dir, env=otel_env(receiver.url),
                          extra_args=("--set", "semula_otel=on", "--set", f"semula_recordings={folder}"))
    first, second = ask(proxy, planted_prompt(run)), ask(proxy, planted_prompt(run))
    assert first.choices[0].message.content == second.choices[0].message.content
    assert proxy.stop() == 0
    assert "semula: OpenTelemetry spans on: OTLP/HTTP to http://127.0.0.1:" in proxy.output()

    spans = receiver.spans()  # the proxy flushed them at `done`, before it exited
    assert set(receiver.paths) == {"/v1/traces"}
    assert [s["attributes"]["semula.decision"] for s in spans] == ["miss", "hit"], spans
    miss, hit = (s["attributes"] for s in spans)
    for span, attrs in zip(spans, (miss, hit), strict=True):
        assert span["name"] == "chat gpt-4o-mini" and span["kind"] == 3  # SPAN_KIND_CLIENT
        assert span["status"] != 2 and span["end"] >= span["start"] > 0  # not STATUS_CODE_ERROR
        assert span["resource"]["service.name"] == "semula-e2e"
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.system"] == "openai"
        assert attrs["gen_ai.request.model"] == "gpt-4o-mini" and attrs["gen_ai.response.model"] == "gpt-4o-mini"
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["semula.mode"] == "auto" and attrs["semula.project"] == "default"
        assert attrs["semula.recording"].startswith("default/openai/v1-chat-completions/*-")
    assert miss["semula.replayed"] is False and miss["semula.recorded"] is True and miss["semula.tier"] == "none"
    assert hit["semula.replayed"] is True and hit["semula.tier"] == "exact" and hit["semula.score"] == 1.0
    assert hit["semula.recording"] == miss["semula.recording"]
    assert (hit["gen_ai.usage.input_tokens"], hit["gen_ai.usage.output_tokens"]) == (
        miss["gen_ai.usage.input_tokens"], miss["gen_ai.usage.output_tokens"])
    [recorded] = [f for f in folder.rglob("*.json")
                  if f.name.endswith(miss["semula.recording"].rsplit("*", 1)[1])]
    assert recorded.is_file()

    everything = b"".join(receiver.bodies)
    for secret in (PLANTED_KEY, "PLANTED", SECRET_WORDS, "zebra", "Bearer", "authorization"):
        assert secret.encode() not in everything, secret
    assert b"collector-secret-1234" in everything  # the user's own OTLP headers reached the collector only


def test_content_opt_in_exports_the_prompt_and_answer_redacted(proxy_factory: ProxyFactory,
                                                               receiver: Receiver) -> None:
    run = uniq("otel-content")
    data_dir = proxy_factory.new_data_dir()
    proxy = proxy_factory("auto", data_dir, env=otel_env(receiver.url), extra_args=(
        "--set", "semula_otel=on", "--set", "semula_otel_content=true",
        "--set", f"semula_recordings={data_dir.parent / 'recordings'}"))
    answer = ask(proxy, planted_prompt(run)).choices[0].message.content or ""
    assert proxy.stop() == 0
    [span] = receiver.spans()
    attrs = span["attributes"]
    assert SECRET_WORDS in attrs["gen_ai.input.messages"] and '"role": "user"' in attrs["gen_ai.input.messages"]
    assert answer and answer[:20] in attrs["gen_ai.output.messages"]
    assert not attrs["semula.recording"].count("*")  # the real file name, its prompt slug in it
    assert b"PLANTED" not in b"".join(receiver.bodies)  # the key redacted out of the text


def test_a_collector_that_is_down_costs_one_line_and_no_call(proxy_factory: ProxyFactory) -> None:
    data_dir = proxy_factory.new_data_dir()
    proxy = proxy_factory("auto", data_dir, env=otel_env(f"http://127.0.0.1:{closed_port()}"),
                          extra_args=("--set", "semula_otel=on"))
    runs = [uniq(f"otel-down-{i}") for i in range(3)]
    answers = [ask(proxy, f"{run} hello") for run in runs]
    assert all(a.choices[0].message.content for a in answers)
    asked_to_stop = time.monotonic()
    assert proxy.stop() == 0
    stopped_in = time.monotonic() - asked_to_stop
    out = proxy.output()
    # the exporter would retry for its 10 s timeout; `done` gives up after 1 s and says so, once
    assert out.count("were not sent to http://127.0.0.1:") == 1, out
    assert out.count("semula: OpenTelemetry: spans could not be sent") <= 1
    assert "Traceback" not in out and "Failed to export" not in out
    assert [r["decision"] for r in read_call_log(data_dir)] == ["miss"] * 3
    print(f"stop with the collector down: {stopped_in:.2f} s")


def test_mcp_calls_name_their_server_and_method(proxy_factory: ProxyFactory, receiver: Receiver,
                                                tmp_path: Path) -> None:
    from test_e2e_mcp import run_session, start_mcp_server

    server = start_mcp_server(tmp_path / "certs", json_answers=True)
    try:
        proxy = proxy_factory("auto", env=otel_env(receiver.url), extra_args=(
            "--mcp-server", f"127.0.0.1:{server.port}", "--set", "semula_otel=on"))
        seen = run_session(proxy, server.url, "legacy", [("tool", ("add", {"a": 1, "b": 2}))])
        assert seen.results and not seen.errors
        assert proxy.stop() == 0
    finally:
        server.stop()
    [call] = [s for s in receiver.spans() if s["attributes"].get("semula.mcp.method") == "tools/call"]
    assert call["name"] == "tools/call" and call["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert call["attributes"]["semula.mcp.server"] == f"127.0.0.1:{server.port}"
    assert call["attributes"]["gen_ai.provider.name"] == "mcp" and call["attributes"]["semula.decision"] == "miss"
    assert b"mcp-secret-token" not in b"".join(receiver.bodies)


EXEC_CALL = """
import sys, openai
client = openai.OpenAI(api_key="sk-test-not-a-real-key", max_retries=0)
print("ANSWER", client.chat.completions.create(model="gpt-4o-mini",
      messages=[{"role": "user", "content": sys.argv[1]}]).choices[0].message.content)
"""


def test_semula_exec_passes_the_option_to_its_proxy(receiver: Receiver, mitm_confdir: Path,
                                                    fake_provider: Any, tmp_path: Path) -> None:
    argv = [*semula_cmd(), "exec", "--mode", "auto", "--data-dir", str(tmp_path / "data"), "--no-recordings",
            "--set", "semula_otel=on", *proxy_test_args(mitm_confdir, fake_provider.port),
            "--", sys.executable, "-c", EXEC_CALL, uniq("otel-exec")]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=tmp_path,
                         env=clean_env(**otel_env(receiver.url)))
    assert res.returncode == 0 and "ANSWER " in res.stdout, res.stdout + res.stderr
    [span] = receiver.spans()  # exec stopped its proxy, which sent the span before it exited
    assert span["name"] == "chat gpt-4o-mini" and span["attributes"]["semula.decision"] == "miss"


@pytest.mark.parametrize(("value", "says"), [
    ("on", "neither is set"),  # no OTLP endpoint variable
    ("ftp://user:hunter2@collector", "expected off, on"),
    ("yes\n\x1b[31m", "expected off, on"),
])
def test_a_bad_option_is_one_line_before_anything_starts(tmp_path: Path, value: str, says: str) -> None:
    env = {k: v for k, v in clean_env().items() if not k.startswith("OTEL_")}
    res = subprocess.run([*semula_cmd(), "exec", "--data-dir", str(tmp_path / "data"), "--set", f"semula_otel={value}",
                          "--", sys.executable, "-c", "print('RAN')"], capture_output=True, text=True, timeout=60,
                         env=env, cwd=tmp_path)
    assert res.returncode != 0 and "RAN" not in res.stdout and says in res.stderr + res.stdout, res
    assert "Traceback" not in res.stderr and "hunter2" not in res.stderr + res.stdout


def test_a_replay_refusal_is_an_error_span(proxy_factory: ProxyFactory, receiver: Receiver) -> None:
    import openai

    proxy = proxy_factory("replay", env=otel_env(receiver.url), extra_args=("--set", "semula_otel=on"))
    with pytest.raises(openai.APIStatusError):
        ask(proxy, uniq("otel-refused") + " never recorded")
    assert proxy.stop() == 0
    [span] = receiver.spans()
    assert span["status"] == 2  # STATUS_CODE_ERROR
    attrs = span["attributes"]
    assert attrs["semula.refused"] is True and attrs["error.type"] == "refused" and attrs["semula.mode"] == "replay"
    assert attrs["semula.replayed"] is False and "semula.recording" not in attrs
