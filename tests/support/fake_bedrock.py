"""AWS Bedrock Runtime for the fake provider: Converse, ConverseStream, InvokeModel, InvokeModelWithResponseStream.

Paths are `/model/{modelId}/{operation}`, the model id URL-encoded. Streams are AWS event-stream binary
messages (`application/vnd.amazon.eventstream`) with correct CRCs, encoded here independently of semula's
codec (so each checks the other), and written in pieces that cut messages in the middle, as TLS records
do; the terminal event comes, then the fake's pause, then the end of the body. InvokeModel answers carry
an Anthropic model's body (the model id does not matter here), its stream the base64 `bytes` of each
Anthropic event in a `chunk` event, the last with Bedrock's `amazon-bedrock-invocationMetrics`.

Like the real service, a request without a SigV4 `authorization` header (and its `x-amz-date`) is
refused 403 with `x-amzn-ErrorType`; the signature is not verified.

Registered into the fake's ROUTES by `routes(fakeprovider_module)`: the fake runs as a script, and its
reply types must be the very classes its handler checks.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_PATH = r"/model/(?P<model>[^/]+)/"


def message(event_type: str, payload: Any) -> bytes:
    """One event-stream message with string headers, as Bedrock sends its events."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    body = json.dumps(payload, separators=(",", ":")).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    data = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return data + struct.pack(">I", zlib.crc32(data))


def _pieces(messages: list[bytes]) -> list[bytes]:
    """The stream cut inside each message: a client must re-frame across chunks."""
    out = []
    for data in messages:
        out += [data[: len(data) // 2], data[len(data) // 2:]]
    return out


def _padding(n: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[: 1 + n % 20]  # Bedrock's `p` field pads events to hide their sizes


def routes(fake: Any) -> list[Any]:
    """The Bedrock routes, built with the fake's own Route, Reply and StreamReply."""

    def refused(call: Any) -> Any:
        auth = call.headers.get("authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 Credential=") or "Signature=" not in auth or "x-amz-date" not in call.headers:
            return fake.Reply(403, {"message": "Missing Authentication Token"},
                              {"x-amzn-ErrorType": "MissingAuthenticationTokenException"})
        return None

    def usage(call: Any, text: str) -> tuple[int, int]:
        return fake.prompt_tokens(call), fake.word_count(text)

    def headers(call: Any, stream: bool = False) -> dict[str, str]:
        out = {"x-amzn-RequestId": f"0000-fake-{call.count:06d}"}
        if stream:
            out["X-Amzn-Bedrock-Content-Type"] = "application/json"
        return out

    def converse(call: Any) -> Any:
        if (no := refused(call)) is not None:
            return no
        if not isinstance(call.body.get("messages"), list):
            return fake.Reply(400, {"message": "1 validation error detected: messages must not be null"},
                              {"x-amzn-ErrorType": "ValidationException"})
        text = fake.answer_text(call)
        prompt, completion = usage(call, text)
        counts = {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion}
        if not call.path.endswith("/converse-stream"):
            return fake.Reply(200, {"metrics": {"latencyMs": 12},
                                    "output": {"message": {"content": [{"text": text}], "role": "assistant"}},
                                    "stopReason": "end_turn", "usage": counts}, headers(call))
        events = [message("messageStart", {"p": _padding(0), "role": "assistant"})]
        events += [message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": d}, "p": _padding(i)})
                   for i, d in enumerate(fake.deltas(text))]
        events += [message("contentBlockStop", {"contentBlockIndex": 0, "p": _padding(1)}),
                   message("messageStop", {"p": _padding(2), "stopReason": "end_turn"}),
                   message("metadata", {"metrics": {"latencyMs": 12}, "p": _padding(3), "usage": counts})]
        return fake.StreamReply(_pieces(events), content_type=CONTENT_TYPE, headers=headers(call, True), keep_on_break=4)

    def invoke(call: Any) -> Any:
        if (no := refused(call)) is not None:
            return no
        if not isinstance(call.body.get("anthropic_version"), str):
            return fake.Reply(400, {"message": "Malformed input request: #: required key [anthropic_version] not found"},
                              {"x-amzn-ErrorType": "ValidationException"})
        text = fake.answer_text(call)
        prompt, completion = usage(call, text)
        msg_id = fake.fake_id("msg_bdrk_", call)
        if not call.path.endswith("/invoke-with-response-stream"):
            return fake.Reply(200, {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-fake",
                                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                    "stop_sequence": None, "usage": {"input_tokens": prompt, "output_tokens": completion}},
                              headers(call))
        model_events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-fake",
                                                  "content": [], "stop_reason": None,
                                                  "usage": {"input_tokens": prompt, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}
              for d in fake.deltas(text)),
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
             "usage": {"output_tokens": completion}},
            {"type": "message_stop", "amazon-bedrock-invocationMetrics": {
                "inputTokenCount": prompt, "outputTokenCount": completion, "invocationLatency": 12, "firstByteLatency": 3}},
        ]
        events = [message("chunk", {"bytes": base64.b64encode(json.dumps(e, separators=(",", ":")).encode()).decode(),
                                    "p": _padding(i)}) for i, e in enumerate(model_events)]
        return fake.StreamReply(_pieces(events), content_type=CONTENT_TYPE, headers=headers(call, True), keep_on_break=4)

    # "openai": the fake's own error shape for its control words (FAIL500 …); boto3 raises ClientError on any.
    return [
        fake.Route("openai", re.compile(_PATH + r"(?:converse|converse-stream)"), converse),
        fake.Route("openai", re.compile(_PATH + r"(?:invoke|invoke-with-response-stream)"), invoke),
    ]
