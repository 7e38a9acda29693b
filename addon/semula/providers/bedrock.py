"""AWS Bedrock Runtime: Converse, ConverseStream, InvokeModel and InvokeModelWithResponseStream.

The model and the streaming choice are in the path (``/model/{modelId}/converse-stream``), the
model id URL-encoded (an ARN or an inference profile id holds ``:`` and ``/``). Converse has one
body shape for every model; InvokeModel carries the model family's own body, read in
``bedrock_invoke.py``. Streams are AWS event-stream messages (``eventstream.py``), not SSE.

The request is signed with SigV4: its headers (``authorization``, ``x-amz-date``,
``x-amz-security-token``, ``x-amz-content-sha256``, ``amz-sdk-*``) change on every call and
never enter a fingerprint (no behaviour header is read here) nor a file (``core.redact``).

Hosts: one exact name per region (``bedrock-runtime.<region>.amazonaws.com`` and the FIPS
``bedrock-runtime-fips.<region>.amazonaws.com``); ``*.amazonaws.com`` would intercept S3 and
every other AWS service. A region added later is read as Bedrock too when the project intercepts
it (``_REGIONAL``, anchored at both ends, so a look-alike host never is).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from semula.core.request.canonical import CanonicalRequest
from semula.providers.auth import Auth, NotResendable
from semula.providers.base import Adapter, RawRequest, Usage, bare_host, host_matches
from semula.providers.jsonbody import BodyShapeError, as_int
from semula.providers.bedrock_bodies import read_converse, read_invoke
from semula.providers.eventstream import EventStreamError, Message, event_type, map_payloads, parse_message

__all__ = ["BEDROCK_HOSTS", "BedrockAdapter", "redacted_stream"]

# Regions with Bedrock Runtime (AWS's endpoint table); FIPS endpoints exist in the US and Canada.
_REGIONS = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "us-gov-east-1", "us-gov-west-1",
    "ca-central-1", "ca-west-1", "sa-east-1", "mx-central-1",
    "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3",
    "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-south-2",
    "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5", "ap-southeast-7",
    "me-central-1", "me-south-1", "il-central-1", "af-south-1",
)
_FIPS_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "us-gov-east-1", "us-gov-west-1", "ca-central-1")
BEDROCK_HOSTS: tuple[str, ...] = (
    *(f"bedrock-runtime.{r}.amazonaws.com" for r in _REGIONS),
    *(f"bedrock-runtime-fips.{r}.amazonaws.com" for r in _FIPS_REGIONS),
)
_REGIONAL = re.compile(r"^bedrock-runtime(?:-fips)?\.[a-z]{2}(?:-[a-z]+)+-\d{1,2}\.amazonaws\.com$")
_PATH = re.compile(r"^/model/([^/]+)/(converse|converse-stream|invoke|invoke-with-response-stream)$")
_STREAMING = ("converse-stream", "invoke-with-response-stream")
# ConverseStream's last two events: the model's stop, then the usage and metrics.
_STOP, _METADATA = "messageStop", "metadata"
# What Bedrock adds to the last chunk of an InvokeModelWithResponseStream answer (every model family).
_METRICS = "amazon-bedrock-invocationMetrics"


def _operation(path: str) -> tuple[str, str]:
    """(model id, operation) of a Bedrock path; BodyShapeError for any other path."""
    m = _PATH.match(path)
    if m is None:
        raise BodyShapeError(f"unknown Bedrock endpoint {path}")
    return unquote(m.group(1)), m.group(2)


def stream_messages(frames: list[bytes]) -> list[Message]:
    """The captured frames as messages; a damaged one ends the list (what follows cannot be trusted)."""
    out = []
    for frame in frames:
        try:
            out.append(parse_message(frame))
        except EventStreamError:
            break
    return out


def chunk_json(message: Message) -> Any:
    """The model's own JSON inside an InvokeModelWithResponseStream ``chunk`` (base64 ``bytes``), else None."""
    try:
        return json.loads(base64.b64decode(json.loads(message.payload)["bytes"], validate=True))
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def redacted_stream(body: bytes, redact: Callable[[bytes], bytes]) -> bytes | None:
    """An event-stream answer with `redact` applied to each payload, and to the model's JSON inside a
    ``chunk``'s base64 ``bytes`` (where a key-like string is not visible as text); lengths and CRCs
    recomputed. None when `body` is not an event stream."""

    def payload(raw: bytes) -> bytes:
        raw = redact(raw)
        try:
            value = json.loads(raw)
            inner = base64.b64decode(value["bytes"], validate=True)
        except (ValueError, KeyError, TypeError, RecursionError):
            return raw
        if (cleaned := redact(inner)) == inner:
            return raw
        return json.dumps({**value, "bytes": base64.b64encode(cleaned).decode("ascii")}, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")

    return map_payloads(body, payload)


def invoke_complete(chunk: Any) -> bool:
    """Whether a model's stream chunk is its last: Anthropic's ``message_stop``; for the other families
    the chunk Bedrock adds its invocation metrics to, or the family's own end marker."""
    if not isinstance(chunk, dict):
        return False
    if "type" in chunk:  # Anthropic: nothing follows message_stop
        return chunk["type"] == "message_stop"
    if _METRICS in chunk or chunk.get("is_finished") is True or _METADATA in chunk:  # Cohere, Nova
        return True
    outputs = chunk.get("outputs")  # Mistral
    last = outputs[-1] if isinstance(outputs, list) and outputs and isinstance(outputs[-1], dict) else chunk
    return any(last.get(key) for key in ("stop_reason", "completionReason"))  # Meta, Titan


def invoke_usage(values: list[Any]) -> Usage:
    """Token counts of InvokeModel answers or stream chunks: Bedrock's invocation metrics, else the model's own."""
    prompt = completion = None
    for value in values:
        if not isinstance(value, dict):
            continue
        if isinstance(metrics := value.get(_METRICS), dict):
            return Usage(as_int(metrics.get("inputTokenCount")), as_int(metrics.get("outputTokenCount")))
        if value.get("type") == "message_start" and isinstance(value.get("message"), dict):
            value = value["message"]
        usage = value.get("usage")
        if isinstance(usage, dict):  # Anthropic (snake_case), Nova (camelCase)
            prompt = as_int(usage.get("input_tokens", usage.get("inputTokens"))) or prompt
            completion = as_int(usage.get("output_tokens", usage.get("outputTokens"))) or completion
        elif "prompt_token_count" in value:  # Meta
            prompt = as_int(value.get("prompt_token_count"))
            completion = as_int(value.get("generation_token_count"))
    return Usage(prompt, completion)


class BedrockAdapter(Adapter):
    name = "bedrock"
    hosts = BEDROCK_HOSTS

    def auth(self) -> Auth:
        return NotResendable("AWS-signed")

    def redact_answer(self, body: bytes, redact: Callable[[bytes], bytes]) -> bytes | None:
        """An AWS event-stream answer redacted message by message (a chunk's base64 model JSON too) and
        re-encoded, so its lengths and CRCs stay right. Any recording's answer is offered: an event
        stream's first byte is 0 (a message under 16 MiB), which no JSON or SSE body starts with."""
        if body[:1] != b"\x00":
            return None
        return redacted_stream(body, redact) or None

    def handles(self, host: str, path: str) -> bool:
        return self.serves_host(host) and _PATH.match(path) is not None

    def serves_host(self, host: str) -> bool:
        host = bare_host(host)
        return host_matches(host, self.hosts) or _REGIONAL.match(host) is not None

    def _read(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        model, operation = _operation(raw.path)
        fields = read_converse(body) if operation.startswith("converse") else read_invoke(raw, model, body)
        return CanonicalRequest(**self.common(raw), model=model, **fields, stream=operation in _STREAMING,
                                body=body)

    def unparsed(self, raw: RawRequest, body: dict[str, Any]) -> CanonicalRequest:
        m = _PATH.match(raw.path)
        plain = super().unparsed(raw, body)
        return plain if m is None else replace(plain, model=unquote(m.group(1)))

    def streams(self, raw: RawRequest, body: Mapping[str, Any]) -> bool:
        return raw.path.endswith(tuple(f"/{op}" for op in _STREAMING))

    # ---------------------------------------------------------------- responses

    def stream_complete(self, frames: list[bytes]) -> bool:
        """ConverseStream: a ``messageStop`` and then the ``metadata`` event (always sent last, with
        the usage). InvokeModelWithResponseStream: the last ``chunk`` is the model's final one. A
        stream that ends with an exception event (throttling, a model error) is not complete."""
        messages = stream_messages(frames)
        if not messages or messages[-1].header(":message-type") != "event":
            return False
        kinds = [event_type(m) for m in messages]
        if kinds[-1] == _METADATA:
            return _STOP in kinds
        return kinds[-1] == "chunk" and invoke_complete(chunk_json(messages[-1]))

    def usage_from_body(self, body: bytes) -> Usage:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return Usage()
        if not isinstance(value, dict):
            return Usage()
        usage = value.get("usage")
        if isinstance(usage, dict) and "inputTokens" in usage:  # Converse
            return Usage(as_int(usage.get("inputTokens")), as_int(usage.get("outputTokens")))
        return invoke_usage([value])

    def usage_from_frames(self, frames: list[bytes]) -> Usage:
        messages = stream_messages(frames)
        for message in reversed(messages):
            if event_type(message) == _METADATA:
                try:
                    usage = json.loads(message.payload).get("usage")
                except (ValueError, AttributeError, RecursionError):
                    return Usage()
                if isinstance(usage, dict):
                    return Usage(as_int(usage.get("inputTokens")), as_int(usage.get("outputTokens")))
                return Usage()
        return invoke_usage([chunk_json(m) for m in messages if event_type(m) == "chunk"])

    def error_body(self, status: int, message: str, code: str = "semula_no_recording") -> bytes:
        """Bedrock's error shape: ``{"message": …}``; the error's name is in ``x-amzn-ErrorType``."""
        return json.dumps({"message": message}).encode()

    def error_headers(self, status: int) -> dict[str, str]:
        return {**super().error_headers(status), "x-amzn-ErrorType": _ERROR_TYPES.get(status, "ValidationException")}


# botocore names the ClientError after x-amzn-ErrorType; these are Bedrock Runtime's error names.
_ERROR_TYPES = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
                429: "ThrottlingException", 500: "InternalServerException", 503: "ServiceUnavailableException"}
