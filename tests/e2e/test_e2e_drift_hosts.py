"""`semula drift` sends a user's key only to the recording's provider's own hosts, whatever a file says.

A recordings folder comes from pull requests. Here an "attacker" HTTPS server listens on a free port
with its own CA, which drift is told to trust (`--ca-bundle`, as any attacker's domain has a
certificate the trust store accepts), and one file per hostile form points a recording at it: a host
`127.0.0.1:<port>`, `localhost:<port>` under provider anthropic, a real host with the endpoint
`@localhost:<port>/…`, `//localhost:<port>/…`, a host with user info. `semula drift`, run as a process with
planted keys in the environment, must reach it with nothing; `semula recordings check` names each file,
and the good recording beside them still loads. A generic recording (a host the user added to the proxy)
goes to its host only when the user names it again with `--allow-host`, and then with no key.
"""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e_helpers import clean_env, closed_port, run_semula
from fakeprovider import ensure_certs

pytestmark = pytest.mark.e2e

OPENAI_KEY = "sk-proj-PLANTEDleakKEY0123456789abcdefABCDEFghijklmn"
ANTHROPIC_KEY = "sk-ant-api03-PLANTEDleakKEY0123456789abcdefABCDEFghijkl"


class Attacker(http.server.ThreadingHTTPServer):
    """Counts every connection it accepts and keeps every request it reads."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context = context
        self.connections = 0
        self.requests: list[dict[str, Any]] = []

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        self.connections += 1
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gives up mid-handshake is not this test's concern


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Attacker

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _any(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                     "body": body})
        data = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _any


@pytest.fixture
def attacker(tmp_path: Path) -> Iterator[tuple[Attacker, Path]]:
    certs = ensure_certs(tmp_path / "attacker-certs")  # its own CA, not the fake provider's
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert, certs.key)
    server = Attacker(context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, certs.ca
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def har_entry(url: str, request: dict[str, Any], answer: dict[str, Any], headers: list[dict[str, str]]) -> dict[str, Any]:
    return {"startedDateTime": "2025-01-01T00:00:00Z", "time": 5,
            "request": {"method": "POST", "url": url, "headers": headers,
                        "postData": {"mimeType": "application/json", "text": json.dumps(request)}},
            "response": {"status": 200, "headers": [{"name": "content-type", "value": "application/json"}],
                         "content": {"mimeType": "application/json", "text": json.dumps(answer)}}}


def good_recordings(tmp: Path) -> dict[str, dict[str, Any]]:
    """One OpenAI and one Anthropic recording, written by `semula import` as a user would get them."""
    entries = [
        har_entry("https://api.openai.com/v1/chat/completions",
                  {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "leak probe openai"}]},
                  {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini", "choices": [
                      {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}, []),
        har_entry("https://api.anthropic.com/v1/messages",
                  {"model": "claude-3-5-haiku-latest", "max_tokens": 16,
                   "messages": [{"role": "user", "content": "leak probe anthropic"}]},
                  {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-latest",
                   "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 3, "output_tokens": 1}},
                  [{"name": "anthropic-version", "value": "2023-06-01"}]),
    ]
    (tmp / "calls.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    res = run_semula("import", "--from", "har", str(tmp / "calls.har"), "--recordings", str(tmp / "good"))
    assert res.returncode == 0 and "2 recording(s) written" in res.stdout, res.stdout + res.stderr
    found = {json.loads(p.read_text())["provider"]: json.loads(p.read_text()) for p in (tmp / "good").rglob("*.json")
             if not p.name.startswith(("_", "."))}
    assert set(found) == {"openai", "anthropic"}, found
    return found


def hostile_forms(good: dict[str, dict[str, Any]], port: int) -> dict[str, dict[str, Any]]:
    """File name -> a recording pointing its request (and so, before the fix, the key) at the attacker."""
    def variant(provider: str, **fields: Any) -> dict[str, Any]:
        data = json.loads(json.dumps(good[provider]))
        if "endpoint" in fields:
            data["request"]["endpoint"] = fields["endpoint"]
        if fields.pop("generic", False):
            data["provider"] = data["request"]["provider"] = "generic"
        return {**data, **fields}

    return {
        "ip-port-host.json": variant("openai", host=f"127.0.0.1:{port}"),
        "localhost-anthropic.json": variant("anthropic", host=f"localhost:{port}"),
        "at-endpoint.json": variant("anthropic", endpoint=f"@localhost:{port}/v1/messages"),
        "slashes-endpoint.json": variant("openai", endpoint=f"//localhost:{port}/v1/chat/completions"),
        "backslash-endpoint.json": variant("openai", endpoint=f"/\\localhost:{port}/v1/chat/completions"),
        "userinfo-host.json": variant("openai", host=f"api.openai.com@localhost:{port}"),
        "real-host-other-port.json": variant("openai", host=f"api.openai.com:{port}"),
        "lookalike-host.json": variant("openai", host="api.openai.com.localhost"),
    }


def write_folder(folder: Path, files: dict[str, dict[str, Any]]) -> None:
    for name, data in files.items():
        where = folder / "default" / data["provider"] / "hostile"
        where.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(json.dumps(data, indent=2))


def drift(folder: Path, ca: Path, *args: str) -> Any:
    env = clean_env(OPENAI_API_KEY=OPENAI_KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY, SEMULA_RECORDINGS=str(folder))
    env.pop("SEMULA_MODE", None)
    return run_semula("drift", "--recordings", str(folder), "--ca-bundle", str(ca), *args, env=env, timeout=120)


def test_drift_sends_no_key_where_a_file_points(attacker: tuple[Attacker, Path], tmp_path: Path) -> None:
    server, ca = attacker
    port = server.server_address[1]
    good = good_recordings(tmp_path)
    hostile = hostile_forms(good, port)
    folder = tmp_path / "rec"
    write_folder(folder, hostile)

    for args in ((), ("--base-url", f"https://127.0.0.1:{closed_port()}")):  # a gateway: the endpoint still counts
        res = drift(folder, ca, *args)
        assert server.connections == 0 and not server.requests, (args, server.requests, res.stdout, res.stderr)
        assert res.returncode == 0, res.stdout + res.stderr
        for name in hostile:
            assert name in res.stderr, f"{name} not named as not loadable:\n{res.stderr}"

    check = run_semula("recordings", "check", str(folder))
    assert check.returncode != 0
    for name, data in hostile.items():
        lines = [line for line in (check.stdout + check.stderr).splitlines() if name in line]
        assert lines and any(word in lines[0] for word in ("host", "endpoint")), (name, check.stdout, check.stderr)

    for provider, data in good.items():  # a hostile file costs only itself: the good ones beside it load
        write_folder(folder, {f"good-{provider}.json": data})
    check = run_semula("recordings", "check", str(folder))
    assert "good-openai" not in check.stdout + check.stderr and "good-anthropic" not in check.stdout + check.stderr
    for name in hostile:
        assert name in check.stdout + check.stderr


def test_a_generic_recording_goes_only_to_a_host_named_again_and_with_no_key(
        attacker: tuple[Attacker, Path], tmp_path: Path) -> None:
    server, ca = attacker
    host = f"localhost:{server.server_address[1]}"
    generic = json.loads(json.dumps(good_recordings(tmp_path)["openai"]))
    generic.update(provider="generic", host=host)
    generic["request"]["provider"] = "generic"
    folder = tmp_path / "rec"
    write_folder(folder, {"extra-host.json": generic})
    check = run_semula("recordings", "check", str(folder))
    assert check.returncode == 0, check.stdout + check.stderr  # a host the user added to the proxy loads

    res = drift(folder, ca, "--json", str(tmp_path / "report.json"))
    assert server.connections == 0, res.stdout + res.stderr
    [row] = json.loads((tmp_path / "report.json").read_text())["rows"]
    assert row["outcome"] == "skipped" and f"--allow-host {host}" in row["reason"], row

    res = drift(folder, ca, "--allow-host", host)
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(server.requests) == 1, (server.requests, res.stdout, res.stderr)
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert not {"authorization", "x-api-key", "x-goog-api-key", "api-key"} & set(sent["headers"])
    assert OPENAI_KEY not in json.dumps(sent["headers"]) and ANTHROPIC_KEY not in json.dumps(sent["headers"])
