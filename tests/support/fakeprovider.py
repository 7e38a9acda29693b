"""A local HTTPS stand-in for the OpenAI, Anthropic and Gemini APIs.

semula's end-to-end tests must run without the internet and must be able to tell a
replayed answer from a fresh one. This server speaks the providers' real wire formats
(JSON and SSE streams) closely enough that the official SDKs parse its answers, and it
stamps every answer with a global call counter (in the text and in `x-fake-count`), so a
test can prove that a replay never reached "upstream".

Prompt text drives failure modes, because that is what survives a trip through the
proxy unchanged: FAIL500, RATE429, AUTH401, BREAKSTREAM, SLOW, GZIP (see `Controls`). OpenAI chat
answers 400 for a negative temperature and 404 for a model named `no-such-model…`, as OpenAI does.
Uploads: POST /v1/files (multipart) and /upload/v1beta/files (raw bytes); GET /v1/files/{id}/content
answers binary bytes.

Run standalone: `python tests/support/fakeprovider.py --port 0 --cert-dir DIR`; it prints
`fakeprovider ready port=<port>` and serves until SIGTERM/SIGINT.
Test hooks: GET /__count, POST /__reset, GET /__last (last model call's method, path,
query, headers, body), GET /__requests (all model calls since the last reset).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import gzip
import hashlib
import http.server
import ipaddress
import json
import re
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

READY_PREFIX = "fakeprovider ready port="
HISTORY_LIMIT = 500
# Pause between a stream's terminal event and the end of its body, as real servers can.
STREAM_END_PAUSE_SECONDS = 0.3

# ---------------------------------------------------------------------------
# Certificates


@dataclass(frozen=True)
class CertPaths:
    """Where the fake's TLS material lives; `ca` is what clients pass as `verify=`."""

    ca: Path
    cert: Path  # leaf + CA chain, served by the fake
    key: Path


def ensure_certs(cert_dir: Path) -> CertPaths:
    """Create (once) a private CA and a leaf for 127.0.0.1/localhost signed by it.

    A separate CA rather than a bare self-signed leaf because strict X.509 checks
    (Python 3.13+, Node) reject a leaf used as its own trust anchor.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    cert_dir.mkdir(parents=True, exist_ok=True)
    paths = CertPaths(cert_dir / "fake-ca.pem", cert_dir / "fake-cert.pem", cert_dir / "fake-key.pem")
    if paths.ca.exists() and paths.cert.exists() and paths.key.exists():
        return paths

    now = dt.datetime.now(dt.timezone.utc)
    not_before, not_after = now - dt.timedelta(days=1), now + dt.timedelta(days=3650)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "semula fake provider CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    leaf_key = ec.generate_private_key(ec.SECP256R1())
    # The provider names are included so a client may also reach the fake directly
    # with a resolver override; the proxy itself uses ssl_insecure.
    dns_names = ["localhost", "api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com"]
    leaf_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in dns_names]
                + [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=True, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    paths.key.write_bytes(
        leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    paths.cert.write_bytes(leaf_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    paths.ca.write_bytes(ca_cert.public_bytes(pem))  # written last: its presence means "complete"
    return paths


# ---------------------------------------------------------------------------
# Request model and shared state


@dataclass(frozen=True)
class Controls:
    """Failure modes requested through the prompt text (the raw request body)."""

    fail500: bool
    rate429: bool
    break_stream: bool
    slow: bool
    gzip: bool
    auth401: bool = False

    @classmethod
    def from_request(cls, body_text: str, accept_encoding: str) -> Controls:
        return cls(
            fail500="FAIL500" in body_text,
            rate429="RATE429" in body_text,
            break_stream="BREAKSTREAM" in body_text,
            slow="SLOW" in body_text,
            gzip="GZIP" in body_text and "gzip" in accept_encoding.lower(),
            auth401="AUTH401" in body_text,
        )


@dataclass(frozen=True)
class Call:
    """One model call as the route handlers see it."""

    count: int
    path: str
    query: dict[str, list[str]]
    body: dict[str, Any]
    controls: Controls
    path_params: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""  # the body's bytes (what an upload route reads)
    content_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names (Bedrock checks its SigV4 header)


class State:
    """The counter and request history, shared by all handler threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.history: list[dict[str, Any]] = []
        self.responses: dict[str, Any] = {}  # OpenAI Responses answers by id: GET /v1/responses/{id}

    def next_call(self, record: dict[str, Any]) -> int:
        with self._lock:
            self.count += 1
            record = {**record, "count": self.count}
            self.history.append(record)
            del self.history[:-HISTORY_LIMIT]
            return self.count

    def reset(self) -> None:
        with self._lock:
            self.count = 0
            self.history.clear()

    def snapshot(self) -> tuple[int, list[dict[str, Any]]]:
        with self._lock:
            return self.count, list(self.history)


# ---------------------------------------------------------------------------
# Prompt helpers


def _text_of(content: Any) -> str:
    """Flatten the many shapes a message's content can take into plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        for key in ("text", "content", "input_text"):
            if key in content:
                return _text_of(content[key])
    return ""


def last_user_text(body: dict[str, Any]) -> str:
    """The last thing the user said, whichever provider format the body is in."""
    messages = body.get("messages")
    if isinstance(messages, list):  # OpenAI chat, Anthropic messages
        for msg in reversed(messages):
            if isinstance(msg, dict) and msg.get("role", "user") == "user":
                return _text_of(msg.get("content"))
    contents = body.get("contents")
    if isinstance(contents, list):  # Gemini
        for item in reversed(contents):
            if isinstance(item, dict) and item.get("role", "user") == "user":
                return _text_of(item.get("parts"))
    inp = body.get("input")  # OpenAI responses / embeddings
    if isinstance(inp, str):
        return inp
    if isinstance(inp, list):
        for item in reversed(inp):
            if isinstance(item, str):
                return item
            if isinstance(item, dict) and item.get("role", "user") == "user":
                return _text_of(item.get("content"))
    return ""


def answer_text(call: Call) -> str:
    return f"fake answer #{call.count} to: {last_user_text(call.body)[:40]}"


def word_count(text: str) -> int:
    return max(1, len(text.split()))


def prompt_tokens(call: Call) -> int:
    return word_count(json.dumps(call.body.get("messages") or call.body.get("contents") or call.body.get("input") or ""))


def deltas(text: str) -> list[str]:
    """Split an answer into word-sized stream deltas that concatenate back to it."""
    return re.findall(r"\S+\s*", text) or [text]


def fake_id(prefix: str, call: Call) -> str:
    return f"{prefix}fake{call.count:06d}"


# ---------------------------------------------------------------------------
# Responses: what a route returns


@dataclass
class Reply:
    """A complete JSON answer."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamReply:
    """An SSE answer; `frames` are complete wire frames (already `data:`-encoded)."""

    frames: list[str]
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    # How many frames survive when BREAKSTREAM asks for a cut: everything but the terminal part.
    keep_on_break: int = 2


def sse(data: Any, event: str | None = None, eol: str = "\n") -> str:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}{eol}" if event else ""
    return f"{head}data: {payload}{eol}{eol}"


# --- errors, in each provider's own shape --------------------------------------------

ERROR_KINDS: dict[int, dict[str, str]] = {
    500: {"openai": "server_error", "anthropic": "api_error", "gemini": "INTERNAL"},
    429: {"openai": "rate_limit_exceeded", "anthropic": "rate_limit_error", "gemini": "RESOURCE_EXHAUSTED"},
    404: {"openai": "invalid_request_error", "anthropic": "not_found_error", "gemini": "NOT_FOUND"},
    400: {"openai": "invalid_request_error", "anthropic": "invalid_request_error", "gemini": "INVALID_ARGUMENT"},
    401: {"openai": "invalid_api_key", "anthropic": "authentication_error", "gemini": "UNAUTHENTICATED"},
}


class BadBody(ValueError):
    """A request body no real provider could read: answered 400 with the provider's JSON error."""


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON object of a request body (empty: {}); raises BadBody as a real server would refuse it."""
    try:
        text = raw.decode("utf-8")
        body = json.loads(text) if text.strip() else {}
    except UnicodeDecodeError as e:
        raise BadBody(f"the body is not UTF-8: {e}") from e
    except json.JSONDecodeError as e:
        raise BadBody(f"we could not parse the JSON body of your request: {e}") from e
    except RecursionError as e:
        raise BadBody("the JSON body is nested too deeply") from e
    if not isinstance(body, dict):
        raise BadBody(f"the body must be a JSON object, not {type(body).__name__}")
    return body


def error_reply(provider: str, status: int, message: str, count: int | None = None) -> Reply:
    kind = ERROR_KINDS[status][provider]
    if provider == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    elif provider == "gemini":
        body = {"error": {"code": status, "message": message, "status": kind}}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return Reply(status, body)


# --- OpenAI chat completions -------------------------------------------------------------


def openai_chat(call: Call) -> Reply | StreamReply:
    model = call.path_params.get("deployment") or call.body.get("model", "gpt-fake")
    if (refused := openai_chat_refusal(call, model)) is not None:
        return refused
    text = answer_text(call)
    usage = {
        "prompt_tokens": prompt_tokens(call),
        "completion_tokens": word_count(text),
        "total_tokens": prompt_tokens(call) + word_count(text),
    }
    base = {"id": fake_id("chatcmpl-", call), "created": int(time.time()), "model": model, "system_fingerprint": "fp_fake"}
    if not call.body.get("stream"):
        return Reply(200, {
            **base,
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }],
            "usage": usage,
        })

    include_usage = bool((call.body.get("stream_options") or {}).get("include_usage"))
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        return sse({
            **base, "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        })

    frames = [chunk({"role": "assistant", "content": "", "refusal": None}, None)]
    frames += [chunk({"content": d}, None) for d in deltas(text)]
    frames.append(chunk({}, "stop"))
    if include_usage:
        frames.append(sse({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    frames.append(sse("[DONE]"))
    return StreamReply(frames, keep_on_break=3)


def openai_chat_refusal(call: Call, model: Any) -> Reply | None:
    """The errors OpenAI answers for a request it will never accept: a property of the request."""
    temperature = call.body.get("temperature")
    if isinstance(temperature, (int, float)) and temperature < 0:
        return Reply(400, {"error": {
            "message": f"Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got "
                       f"{temperature} instead.",
            "type": "invalid_request_error", "param": "temperature", "code": "decimal_below_min_value"}})
    if isinstance(model, str) and model.startswith("no-such-model"):
        return Reply(404, {"error": {
            "message": f"The model `{model}` does not exist or you do not have access to it.",
            "type": "invalid_request_error", "param": None, "code": "model_not_found"}})
    return None


# --- uploads ---------------------------------------------------------------------------------


def form_fields(call: Call) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's parts by name: (filename, bytes)."""
    import email.parser
    import email.policy

    head = f"Content-Type: {call.content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + call.raw)
    if not message.is_multipart():
        raise ValueError("the body is not a multipart/form-data form")
    return {str(part.get_param("name", header="content-disposition")): (part.get_filename(),
            part.get_payload(decode=True) or b"") for part in message.iter_parts()}


def openai_file_upload(call: Call) -> Reply:
    """POST /v1/files: a multipart form (`file`, `purpose`) answered with OpenAI's file object."""
    fields = form_fields(call)
    if "file" not in fields or "purpose" not in fields:
        return error_reply("openai", 400, "Missing required parameter: 'file' and 'purpose' are required.")
    filename, data = fields["file"]
    return Reply(200, {
        "object": "file", "id": f"file-fake{call.count:06d}{hashlib.sha256(data).hexdigest()[:8]}",
        "purpose": fields["purpose"][1].decode(), "filename": filename or "upload", "bytes": len(data),
        "created_at": int(time.time()), "expires_at": None, "status": "processed", "status_details": None,
    })


def gemini_media_upload(call: Call) -> Reply:
    """POST /upload/v1beta/files (the media protocol): the raw bytes, answered with Gemini's File."""
    digest = hashlib.sha256(call.raw)
    return Reply(200, {"file": {
        "name": f"files/fake{call.count:06d}", "mimeType": call.content_type.split(";")[0] or "application/octet-stream",
        "sizeBytes": str(len(call.raw)), "createTime": dt.datetime.now(dt.timezone.utc).isoformat(),
        "sha256Hash": base64.b64encode(digest.digest()).decode(), "state": "ACTIVE", "source": "UPLOADED",
        "uri": f"https://generativelanguage.googleapis.com/v1beta/files/fake{call.count:06d}",
    }})


FILE_CONTENT = re.compile(r"/v1/files/(?P<file_id>[^/]+)/content")


MEDIA = re.compile(r"/media/(?P<name>[^/]+)")  # a CDN's test image, for an extra host


def media_bytes(name: str) -> bytes:
    """GET /media/{name}: a PNG signature and every byte value, the same for the same name."""
    return b"\x89PNG\r\n\x1a\n" + hashlib.sha256(name.encode()).digest() + bytes(range(256)) * 4


def file_content(file_id: str) -> bytes:
    """GET /v1/files/{id}/content: binary bytes (every byte value), the same for the same id."""
    return hashlib.sha256(file_id.encode()).digest() + bytes(range(256)) * 8 + b"\r\n\x00end"


# --- OpenAI responses ----------------------------------------------------------------------


def openai_responses(call: Call) -> Reply | StreamReply:
    model = call.body.get("model", "gpt-fake")
    text = answer_text(call)
    resp_id, msg_id = fake_id("resp_", call), fake_id("msg_", call)
    usage = {
        "input_tokens": prompt_tokens(call),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": word_count(text),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens(call) + word_count(text),
    }
    part_done = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    item_done = {"id": msg_id, "type": "message", "status": "completed", "role": "assistant", "content": [part_done]}

    def response(status: str, output: list[Any], usage_: Any) -> dict[str, Any]:
        return {
            "id": resp_id, "object": "response", "created_at": int(time.time()), "status": status,
            "error": None, "incomplete_details": None, "instructions": call.body.get("instructions"),
            "max_output_tokens": None, "model": model, "output": output, "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": None, "summary": None}, "store": True,
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
            "top_p": 1.0, "truncation": "disabled", "usage": usage_, "user": None, "metadata": {},
        }

    if not call.body.get("stream"):
        return Reply(200, response("completed", [item_done], usage))

    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response("in_progress", [], None)},
        {"type": "response.in_progress", "response": response("in_progress", [], None)},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item_done, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "item_id": msg_id, "output_index": 0, "content_index": 0,
         "part": {**part_done, "text": ""}},
    ]
    events += [
        {"type": "response.output_text.delta", "item_id": msg_id, "output_index": 0, "content_index": 0,
         "delta": d, "logprobs": []}
        for d in deltas(text)
    ]
    events += [
        {"type": "response.output_text.done", "item_id": msg_id, "output_index": 0, "content_index": 0,
         "text": text, "logprobs": []},
        {"type": "response.content_part.done", "item_id": msg_id, "output_index": 0, "content_index": 0,
         "part": part_done},
        {"type": "response.output_item.done", "output_index": 0, "item": item_done},
        {"type": "response.completed", "response": response("completed", [item_done], usage)},
    ]
    frames = [sse({**e, "sequence_number": i}, event=e["type"]) for i, e in enumerate(events)]
    return StreamReply(frames, keep_on_break=5)


# --- OpenAI embeddings ---------------------------------------------------------------------

EMBEDDING_DIM = 8


def embedding_vector(text: str) -> list[float]:
    """Deterministic per input text, so equal inputs embed equally across calls."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round((b - 127.5) / 127.5, 6) for b in digest[:EMBEDDING_DIM]]


def openai_embeddings(call: Call) -> Reply:
    inputs = call.body.get("input", "")
    items = inputs if isinstance(inputs, list) else [inputs]
    data = []
    for i, item in enumerate(items):
        vector = embedding_vector(json.dumps(item))
        if call.body.get("encoding_format") == "base64":
            encoded: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        else:
            encoded = vector
        data.append({"object": "embedding", "index": i, "embedding": encoded})
    tokens = word_count(json.dumps(items))
    return Reply(200, {
        "object": "list", "data": data, "model": call.body.get("model", "text-embedding-fake"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "fake_count": call.count,  # embeddings carry no text, so the counter travels here
    })


# --- Anthropic messages --------------------------------------------------------------------


def anthropic_messages(call: Call) -> Reply | StreamReply:
    model = call.body.get("model", "claude-fake")
    text = answer_text(call)
    msg_id = fake_id("msg_", call)
    in_tokens, out_tokens = prompt_tokens(call), word_count(text)
    if not call.body.get("stream"):
        return Reply(200, {
            "id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens},
        })
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": in_tokens, "output_tokens": 1},
        }},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
    ]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}
               for d in deltas(text)]
    events += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": out_tokens}},
        {"type": "message_stop"},
    ]
    return StreamReply([sse(e, event=e["type"]) for e in events], keep_on_break=4)


# --- Gemini ----------------------------------------------------------------------------------


def gemini_generate(call: Call) -> Reply | StreamReply:
    model = call.path_params["model"]
    text = answer_text(call)
    in_tokens, out_tokens = prompt_tokens(call), word_count(text)
    usage = {"promptTokenCount": in_tokens, "candidatesTokenCount": out_tokens, "totalTokenCount": in_tokens + out_tokens}

    def chunk(piece: str, final: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0}
        out: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": fake_id("gem", call)}
        if final:
            candidate["finishReason"] = "STOP"
            out["usageMetadata"] = usage
        else:
            out["usageMetadata"] = {"promptTokenCount": in_tokens, "totalTokenCount": in_tokens}
        return out

    if call.path_params["method"] == "generateContent":
        return Reply(200, chunk(text, final=True))
    if "STREAM404" in last_user_text(call.body):  # as Gemini answers an unknown model on the stream endpoint
        err = error_reply("gemini", 404, f"models/{model} is not found for API version v1beta")
        return Reply(404, err.body, {"content-type": "text/event-stream"})
    pieces = deltas(text)
    chunks = [chunk(p, final=i == len(pieces) - 1) for i, p in enumerate(pieces)]
    if call.query.get("alt", [""])[0] == "sse":
        return StreamReply([sse(c, eol="\r\n") for c in chunks], keep_on_break=2)
    # Without alt=sse Gemini streams one JSON array, element by element.
    body = json.dumps(chunks, indent=1)
    return StreamReply([body], content_type="application/json", keep_on_break=0)


# ---------------------------------------------------------------------------
# Routing


@dataclass(frozen=True)
class Route:
    provider: str
    pattern: re.Pattern[str]
    handler: Callable[[Call], Reply | StreamReply]
    raw_body: bool = False  # an upload: the handler reads `Call.raw`, the body is not JSON


ROUTES: list[Route] = [
    Route("openai", re.compile(r"/v1/chat/completions"), openai_chat),
    Route("openai", re.compile(r"/openai/deployments/(?P<deployment>[^/]+)/chat/completions"), openai_chat),
    Route("openai", re.compile(r"/api/v1/chat/completions"), openai_chat),  # OpenRouter
    Route("openai", re.compile(r"/v1/responses"), openai_responses),
    Route("openai", re.compile(r"/v1/embeddings"), openai_embeddings),
    Route("openai", re.compile(r"/v1beta/openai/chat/completions"), openai_chat),  # Gemini's OpenAI-compatible path
    Route("openai", re.compile(r"/v1beta/openai/embeddings"), openai_embeddings),
    Route("openai", re.compile(r"/openai/deployments/(?P<deployment>[^/]+)/embeddings"), openai_embeddings),
    Route("openai", re.compile(r"/api/v1/embeddings"), openai_embeddings),
    Route("anthropic", re.compile(r"/v1/messages"), anthropic_messages),
    Route("openai", re.compile(r"/v1/files"), openai_file_upload, raw_body=True),
    Route("gemini", re.compile(r"/upload/v1beta/files"), gemini_media_upload, raw_body=True),
    Route("gemini", re.compile(r"/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)"),
          gemini_generate),
]
import fake_audio, fake_vertex  # noqa: E402,E401 - Vertex AI (token endpoint too) and OpenAI audio, in their own modules
ROUTES += fake_vertex.routes(sys.modules[__name__]) + fake_audio.routes(sys.modules[__name__])
import fake_bedrock  # noqa: E402 - AWS Bedrock Runtime (event-stream answers), in its own module
import fake_binary  # noqa: E402 - large binary answers (GET file content), for sidecar files
ROUTES += fake_bedrock.routes(sys.modules[__name__])
import fake_thirdparty  # noqa: E402 - a redirect and raw text labelled JSON, as a third-party suite met them
ROUTES += fake_thirdparty.routes(sys.modules[__name__])
import fake_drift  # noqa: E402 - answers changed on purpose, for `semula drift` (first: it wraps OpenAI chat)
ROUTES[:0] = fake_drift.routes(sys.modules[__name__])
import fake_tools  # noqa: E402 - a Responses model that calls tools (TOOLCALL in the prompt), for agents with MCP tools
ROUTES[:0] = fake_tools.routes(sys.modules[__name__])


def find_route(path: str) -> tuple[Route, dict[str, str]] | None:
    for route in ROUTES:
        if m := route.pattern.fullmatch(path):
            return route, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


# ---------------------------------------------------------------------------
# HTTP plumbing


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves model routes and the /__ test hooks over HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.server.verbose:
            sys.stderr.write("fakeprovider: " + (format % args) + "\n")

    # --- request reading -------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError, zlib.error) as e:
                raise BadBody(f"the body is not valid gzip: {e}") from e
        return raw

    # --- response writing --------------------------------------------------------------

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None,
                   compress: bool = False, truncate: bool = False) -> None:
        data = json.dumps(body).encode()
        if compress:
            data = gzip.compress(data)
        headers = dict(headers or {})
        self.send_response(status)
        self.send_header("Content-Type", headers.pop("content-type", "application/json"))  # a reply's own first
        if compress:
            self.send_header("Content-Encoding", "gzip")
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if truncate:
            self.wfile.write(data[: len(data) // 2])
            self._cut_connection()
            return
        self.wfile.write(data)

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, reply: StreamReply, headers: dict[str, str], compress: bool, cut: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        if compress:
            self.send_header("Content-Encoding", "gzip")
        for k, v in {**headers, **reply.headers}.items():
            self.send_header(k, v)
        self.end_headers()

        compressor = zlib.compressobj(wbits=31) if compress else None
        frames = reply.frames[: reply.keep_on_break] if cut else reply.frames
        if cut and reply.keep_on_break == 0:  # a single-body stream: cut it in the middle
            frames = [reply.frames[0][: len(reply.frames[0]) // 2]]
        for frame in frames:
            data = frame if isinstance(frame, bytes) else frame.encode()  # binary audio: bytes
            if compressor:
                # SYNC_FLUSH keeps each frame decodable on arrival, as real gzip streams do.
                data = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
            self._write_chunk(data)
        if cut:
            self._cut_connection()
            return
        # Real servers flush the terminal event, then end the body a moment later; a client
        # that stops reading at the terminal event (the sync openai SDK) hangs up in between.
        time.sleep(self.server.stream_end_pause)
        if compressor:
            self._write_chunk(compressor.flush(zlib.Z_FINISH))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _cut_connection(self) -> None:
        """Drop the TCP connection without a TLS close_notify or a final chunk, like a network failure."""
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --- dispatch ------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        count, history = self.server.state.snapshot()
        if path == "/__count":
            self._send_json(200, {"count": count})
        elif path == "/__last":
            self._send_json(200, history[-1] if history else {})
        elif path == "/__requests":
            self._send_json(200, history)
        elif m := MEDIA.fullmatch(path):  # counted: a replay from an extra host must not reach here
            self.server.state.next_call({"method": "GET", "path": path, "query": {}, "headers": {}, "body": {}})
            self._send_bytes(200, media_bytes(m.group("name")), "image/png")
        elif (target := fake_thirdparty.redirect_target(path)) is not None:  # counted, like the media it points to
            self.server.state.next_call({"method": "GET", "path": path, "query": {}, "headers": {}, "body": {}})
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif (big := fake_binary.big_file(path)) is not None:  # a large binary answer (tests/support/fake_binary.py)
            self.server.state.next_call({"method": "GET", "path": path, "query": {}, "headers": {}, "body": {}})
            self._send_bytes(200, big, "application/octet-stream")
        elif m := FILE_CONTENT.fullmatch(path):
            self._send_bytes(200, file_content(m.group("file_id")), "application/octet-stream")
        elif (m := re.fullmatch(r"/v1/responses/([A-Za-z0-9_-]+)", path)) is not None:
            self._read_body()
            stored = self.server.state.responses.get(m.group(1))
            if stored is None:
                self._send_error("openai", 404, f"No response found with id '{m.group(1)}'.", {})
            else:
                self._send_json(200, stored, {"x-request-id": f"req_fakeget{m.group(1)}"})
        else:
            try:
                self._read_body()
            except BadBody:
                pass
            self._send_json(404, {"error": {"message": f"fakeprovider: no GET route {path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        try:
            raw, problem = self._read_body(), ""
        except BadBody as e:
            raw, problem = b"", str(e)
        if parts.path == "/__reset":
            self.server.state.reset()
            self._send_json(200, {"count": 0})
            return
        if parts.path == "/v1/traces/ingest":  # openai-agents' trace upload: the real server answers 204
            try:
                traces = parse_body(raw)
            except BadBody:
                traces = {}
            self.server.state.next_call({"method": "POST", "path": parts.path, "query": {},
                                         "headers": {k.lower(): v for k, v in self.headers.items()}, "body": traces})
            self.send_response(204)
            self.end_headers()
            return
        found = find_route(parts.path)
        if found is None:
            self._send_json(404, {"error": {"message": f"fakeprovider: no route {parts.path}", "type": "invalid_request_error"}})
            return
        route, path_params = found
        body: dict[str, Any] = {}
        if not problem and not route.raw_body:
            try:
                body = parse_body(raw)
            except BadBody as e:
                problem = str(e)
        query = parse_qs(parts.query, keep_blank_values=True)
        count = self.server.state.next_call({
            "method": "POST", "path": parts.path, "query": query,
            "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body,
        })
        headers = {"x-fake-count": str(count), "x-request-id": f"req_fake{count:06d}"}
        if route.provider == "anthropic":
            headers["request-id"] = headers["x-request-id"]
        if problem:
            self._send_error(route.provider, 400, problem, headers)
            return
        body_text = raw.decode("utf-8", "replace")  # an upload's bytes need not be text
        controls = Controls.from_request(body_text, self.headers.get("Accept-Encoding", ""))
        call = Call(count, parts.path, query, body, controls, path_params, raw, self.headers.get("Content-Type", ""),
                    {k.lower(): v for k, v in self.headers.items()})

        if controls.slow:
            time.sleep(0.5)
        for status, wanted in ((500, controls.fail500), (429, controls.rate429), (401, controls.auth401)):
            if wanted:
                self._send_error(route.provider, status, f"fake error {status} for call #{count}", headers)
                return
        try:
            reply = route.handler(call)
        except (KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError) as e:
            # A field of the wrong shape: a real server says which, it does not drop the connection.
            self._send_error(route.provider, 400, f"invalid request: {type(e).__name__}: {e}", headers)
            return
        if isinstance(reply, StreamReply):
            self._send_stream(reply, headers, compress=controls.gzip, cut=controls.break_stream)
        else:
            if parts.path == "/v1/responses" and reply.status == 200 and isinstance(reply.body, dict):
                self.server.state.responses[str(reply.body.get("id"))] = reply.body  # `store: true`
            self._send_json(reply.status, reply.body, {**headers, **reply.headers},
                            compress=controls.gzip, truncate=controls.break_stream)

    def _send_error(self, provider: str, status: int, message: str, headers: dict[str, str]) -> None:
        err = error_reply(provider, status, message)
        self._send_json(err.status, err.body, headers)


class FakeServer(http.server.ThreadingHTTPServer):
    """ThreadingHTTPServer that does the TLS handshake in the worker thread.

    Wrapping the listening socket would handshake inside accept(), so one stalled
    client (say, a proxy that rejects our cert) would block every other connection.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], context: ssl.SSLContext, verbose: bool = False,
                 stream_end_pause: float = STREAM_END_PAUSE_SECONDS) -> None:
        super().__init__(address, Handler)
        self.stream_end_pause = stream_end_pause
        self.context = context
        self.state = State()
        self.verbose = verbose

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            if self.verbose:
                sys.stderr.write(f"fakeprovider: TLS handshake from {client_address} failed: {e}\n")
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        except (ConnectionError, ssl.SSLError, TimeoutError):
            pass  # clients hanging up mid-stream are normal
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self.verbose:
            super().handle_error(request, client_address)


def make_server(cert_dir: Path, host: str = "127.0.0.1", port: int = 0, verbose: bool = False,
                stream_end_pause: float = STREAM_END_PAUSE_SECONDS) -> FakeServer:
    certs = ensure_certs(cert_dir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.cert, certs.key)
    ctx.set_alpn_protocols(["http/1.1"])
    return FakeServer((host, port), ctx, verbose=verbose, stream_end_pause=stream_end_pause)


def iter_json_lines(text: str) -> Iterator[Any]:
    """Parse the `data:` payloads of an SSE body; a helper for tests reading raw streams."""
    for line in text.splitlines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload and payload != "[DONE]":
                yield json.loads(payload)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert-dir", type=Path, required=True)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--stream-end-pause", type=float, default=STREAM_END_PAUSE_SECONDS,
                        help="seconds between a stream's terminal event and the end of its body")
    args = parser.parse_args(argv)

    server = make_server(args.cert_dir, args.host, args.port, verbose=args.verbose,
                         stream_end_pause=args.stream_end_pause)

    def stop(signum: int, frame: Any) -> None:
        # shutdown() blocks until serve_forever returns, so it must run off the main thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"{READY_PREFIX}{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
