"""The addon's hooks with uploads and error answers (mitmproxy's taddons/tflow; no network, a real store)."""

from __future__ import annotations

import gzip
import json

from mitmproxy.test import tflow, tutils

from semula.proxy.addon import SemulaAddon
from addon_harness import run_addon

FILE = bytes(range(256)) * 16


def upload_flow(boundary: str, data: bytes = FILE, encoding: str | None = None):
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    headers = [(b"host", b"api.openai.com"), (b"content-type", f"multipart/form-data; boundary={boundary}".encode())]
    if encoding == "gzip":
        body = gzip.compress(body)
        headers.append((b"content-encoding", b"gzip"))
    request = tutils.treq(method=b"POST", scheme=b"https", host="api.openai.com", port=443, path=b"/v1/files",
                          authority=b"api.openai.com", content=body, headers=tuple(headers))
    return tflow.tflow(req=request)


def chat_flow(content: str):
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}).encode()
    request = tutils.treq(method=b"POST", scheme=b"https", host="api.openai.com", port=443,
                          path=b"/v1/chat/completions", authority=b"api.openai.com", content=body,
                          headers=((b"host", b"api.openai.com"), (b"content-type", b"application/json")))
    return tflow.tflow(req=request)


async def call(addon: SemulaAddon, flow, status: int | None = 200, body: dict | None = None):
    addon.requestheaders(flow)
    await addon.request(flow)
    if flow.response is None and status is not None:
        flow.response = tutils.tresp(status_code=status, content=json.dumps(body or {"id": "file-1"}).encode(),
                                     headers=((b"content-type", b"application/json"),))
        addon.responseheaders(flow)
        await addon.response(flow)
    return flow


def run(scenario, tmp_path, **options):
    return run_addon(lambda addon, tctx: scenario(addon), tmp_path, semula_console_calls=False, **options)


def test_a_gzipped_upload_with_a_new_boundary_is_served_from_its_recording(tmp_path):
    async def scenario(addon):
        first = await call(addon, upload_flow("first-boundary", encoding="gzip"))
        assert first.response.headers["x-semula-decision"] == "miss"
        again = await call(addon, upload_flow("another-boundary-entirely"), status=None)
        assert again.response.headers["x-semula-decision"] == "hit"
        assert json.loads(again.response.content) == {"id": "file-1"}
        other = await call(addon, upload_flow("b", FILE[::-1]), status=None)
        assert other.response is None, "other file content: a miss, forwarded"

    run(scenario, tmp_path)


def test_a_request_error_is_recorded_and_says_so_when_served(tmp_path):
    error = {"error": {"message": "The model `x` does not exist", "type": "invalid_request_error"}}

    async def scenario(addon):
        await call(addon, chat_flow("unknown model"), status=404, body=error)
        served = await call(addon, chat_flow("unknown model"), status=None)
        assert served.response.status_code == 404 and json.loads(served.response.content) == error
        assert served.response.headers["x-semula-decision"] == "hit"
        assert "replayed a recorded 404 answer" in served.comment
        failed = await call(addon, chat_flow("provider down"), status=503, body={"error": {"message": "down"}})
        assert "not recorded: upstream answered 503" in failed.comment
        retried = await call(addon, chat_flow("provider down"), status=None)
        assert retried.response is None, "a 503 is never replayed"

    run(scenario, tmp_path)
