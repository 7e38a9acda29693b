"""AWS Bedrock: hosts, Converse and InvokeModel bodies, event-stream ends and usage, files, env."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semula.session.aws_env import AWS_PLACEHOLDER, aws_placeholders
from semula.core.redact import FingerprintKey, clean_headers, redact_bytes
from semula.providers import DEFAULT_PROVIDER_HOSTS, adapter_for, host_matches, redacted_answer, stream_framer
from semula.providers.base import RawRequest, Usage
from semula.providers.bedrock import BedrockAdapter
from semula.providers.eventstream import Header, Message, encode, parse_stream
from semula.recordings.format import RecordingFileError, body_fields, body_from

KEY = FingerprintKey(b"k" * 32)
HOST = "bedrock-runtime.us-east-1.amazonaws.com"
BEDROCK = BedrockAdapter()


def event(kind: str, payload: Any, message_type: str = "event") -> bytes:
    type_header = ":exception-type" if message_type == "exception" else ":event-type"
    return encode(Message((Header(type_header, "string", kind), Header(":content-type", "string", "application/json"),
                           Header(":message-type", "string", message_type)),
                          json.dumps(payload, separators=(",", ":")).encode()))


def chunk(model_json: Any) -> bytes:
    inner = base64.b64encode(json.dumps(model_json, separators=(",", ":")).encode()).decode()
    return event("chunk", {"bytes": inner, "p": "abcdefgh"})


CONVERSE_STREAM = [
    event("messageStart", {"role": "assistant", "p": "abc"}),
    event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello "}, "p": "ab"}),
    event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "there"}, "p": "ab"}),
    event("contentBlockStop", {"contentBlockIndex": 0}),
    event("messageStop", {"stopReason": "end_turn"}),
    event("metadata", {"usage": {"inputTokens": 7, "outputTokens": 2, "totalTokens": 9}, "metrics": {"latencyMs": 5}}),
]
INVOKE_STREAM = [
    chunk({"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 1}}}),
    chunk({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
    chunk({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
    chunk({"type": "message_stop", "amazon-bedrock-invocationMetrics": {"inputTokenCount": 7, "outputTokenCount": 3}}),
]


def raw(path: str, body: Any, host: str = HOST) -> RawRequest:
    return RawRequest("POST", host, path, (), {"content-type": "application/json",
                                              "authorization": "AWS4-HMAC-SHA256 Credential=x, Signature=" + "a" * 64,
                                              "x-amz-date": "20260101T000000Z"}, json.dumps(body).encode())


@pytest.mark.parametrize(("host", "bedrock"), [
    (HOST, True), ("bedrock-runtime.eu-west-3.amazonaws.com", True), ("bedrock-runtime-fips.us-west-2.amazonaws.com", True),
    ("BEDROCK-RUNTIME.us-east-1.amazonaws.com.:443", True),
    ("bedrock-runtime.xx-newplace-9.amazonaws.com", True),  # a region added later, when intercepted
    ("bedrock-runtime.us-east-1.amazonaws.com.evil.net", False), ("evilbedrock-runtime.us-east-1.amazonaws.com", False),
    ("bedrock.us-east-1.amazonaws.com", False), ("s3.us-east-1.amazonaws.com", False),
])
def test_hosts_are_exact(host: str, bedrock: bool) -> None:
    assert (adapter_for(host, "/model/m/converse").name == "bedrock") is bedrock


def test_default_hosts_list_regions_not_all_of_aws() -> None:
    assert HOST in DEFAULT_PROVIDER_HOSTS and "bedrock-runtime-fips.us-east-1.amazonaws.com" in DEFAULT_PROVIDER_HOSTS
    assert not host_matches("s3.amazonaws.com", DEFAULT_PROVIDER_HOSTS)
    assert adapter_for(HOST, "/model/m/other").name == "generic"


def test_converse_reads_into_the_canonical_request() -> None:
    body = {
        "messages": [{"role": "user", "content": [{"text": "What is 2+2?"}, {"cachePoint": {"type": "default"}},
                                                  {"image": {"format": "png", "source": {"bytes": "AAAA"}}}]},
                     {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "calc", "input": {}}}]},
                     {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "4"}]}}]}],
        "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "calc"}}, {"cachePoint": {"type": "default"}}],
                       "toolChoice": {"auto": {}}},
        "inferenceConfig": {"maxTokens": 50, "temperature": 0.0},
        "additionalModelRequestFields": {"top_k": 5}, "requestMetadata": {"run": "x"},
    }
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku"
    path = "/model/" + arn.replace(":", "%3A").replace("/", "%2F") + "/converse-stream"
    c = BEDROCK.canonicalise(raw(path, body), KEY)
    assert c.parsed and c.provider == "bedrock" and c.model == arn and c.stream
    assert c.system == "Be brief." and c.messages[0].text == "What is 2+2?"
    assert c.messages[0].parts == ({"image": {"format": "png", "source": {"bytes": "AAAA"}}},)
    assert "toolUse" in c.messages[1].parts[0] and "toolResult" in c.messages[2].parts[0]
    assert c.tools == ({"toolSpec": {"name": "calc"}},)
    assert c.params == {"toolConfig": {"toolChoice": {"auto": {}}}, "inferenceConfig": {"maxTokens": 50, "temperature": 0.0},
                        "additionalModelRequestFields": {"top_k": 5}}
    assert c.headers == ()  # SigV4 never reaches a fingerprint
    assert not BEDROCK.canonicalise(raw("/model/m/converse", body), KEY).stream


@pytest.mark.parametrize(("body", "texts", "system"), [
    ({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10, "system": "S",
      "messages": [{"role": "user", "content": "hi"}]}, ["hi"], "S"),
    ({"prompt": "<s>[INST] hi [/INST]", "max_gen_len": 10}, ["<s>[INST] hi [/INST]"], None),
    ({"schemaVersion": "messages-v1", "system": [{"text": "S"}], "messages": [{"role": "user", "content": [{"text": "hi"}]}],
      "inferenceConfig": {"maxTokens": 5}}, ["hi"], "S"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}, ["hi"], None),  # Mistral chat
    ({"message": "now", "chat_history": [{"role": "USER", "message": "before"}], "preamble": "S"}, ["before", "now"], "S"),
    ({"texts": ["a", "b"], "input_type": "search_document"}, ["a", "b"], None),
    ({"inputText": "hi", "textGenerationConfig": {}}, ["hi"], None),
])
def test_invoke_reads_each_model_family(body: dict[str, Any], texts: list[str], system: str | None) -> None:
    c = BEDROCK.canonicalise(raw("/model/some.model-v1%3A0/invoke", body), KEY)
    assert c.parsed and c.model == "some.model-v1:0" and not c.stream
    assert [m.text for m in c.messages] == texts and c.system == system


def test_an_unknown_invoke_body_is_exact_only() -> None:
    c = BEDROCK.canonicalise(raw("/model/ai21.jamba/invoke-with-response-stream", {"weird": 1}), KEY)
    assert not c.parsed and c.model == "ai21.jamba" and c.stream


@pytest.mark.parametrize(("frames", "complete"), [
    (CONVERSE_STREAM, True),
    (CONVERSE_STREAM[:-1], False),  # messageStop but the metadata (always last) never came
    (CONVERSE_STREAM[:3] + CONVERSE_STREAM[-1:], False),  # metadata without a stop
    (CONVERSE_STREAM[:3] + [event("modelStreamErrorException", {"message": "x"}, "exception")], False),
    (INVOKE_STREAM, True),
    (INVOKE_STREAM[:-1], False),
    ([chunk({"generation": "x", "stop_reason": "stop", "amazon-bedrock-invocationMetrics": {}})], True),  # Meta
    ([chunk({"generation": "x", "stop_reason": None})], False),
    ([], False),
])
def test_stream_complete(frames: list[bytes], complete: bool) -> None:
    assert BEDROCK.stream_complete(frames) is complete


def test_usage_from_bodies_and_frames() -> None:
    converse = json.dumps({"output": {"message": {"content": [{"text": "x"}]}}, "usage": {"inputTokens": 3, "outputTokens": 4}})
    assert BEDROCK.usage_from_body(converse.encode()) == Usage(3, 4)
    assert BEDROCK.usage_from_frames(CONVERSE_STREAM).completion_tokens == 2
    assert BEDROCK.usage_from_frames(INVOKE_STREAM).completion_tokens == 3
    anthropic = json.dumps({"content": [], "usage": {"input_tokens": 5, "output_tokens": 6}}).encode()
    assert BEDROCK.usage_from_body(anthropic).prompt_tokens == 5
    assert BEDROCK.usage_from_body(b"\x00not json").prompt_tokens is None


def test_error_in_bedrock_shape() -> None:
    assert json.loads(BEDROCK.error_body(404, "no recording")) == {"message": "no recording"}
    assert BEDROCK.error_headers(404) == {"content-type": "application/json", "x-amzn-ErrorType": "ResourceNotFoundException"}


def test_stream_framer_by_content_type() -> None:
    framer = stream_framer("application/vnd.amazon.eventstream")
    assert framer is not None and framer(b"".join(CONVERSE_STREAM)) == CONVERSE_STREAM
    assert stream_framer("text/event-stream; charset=utf-8") is not None and stream_framer("application/json") is None


def test_sigv4_headers_are_dropped() -> None:
    headers = [("Authorization", "AWS4-HMAC-SHA256 ..."), ("X-Amz-Date", "d"), ("X-Amz-Security-Token", "t"),
               ("x-amz-content-sha256", "h"), ("amz-sdk-invocation-id", "i"), ("amz-sdk-request", "attempt=1"),
               ("x-amz-user-agent", "u"), ("x-amzn-requestid", "r")]
    assert clean_headers(headers) == [("x-amzn-requestid", "r")]


# ---------------------------------------------------------------- recording files


@pytest.mark.parametrize("frames", [CONVERSE_STREAM, INVOKE_STREAM])
def test_files_show_frames_readably_and_rebuild_exactly(frames: list[bytes]) -> None:
    body = b"".join(frames)
    fields = body_fields(body, streamed=True)
    messages = fields["body_eventstream"]
    assert messages[0]["headers"][":content-type"] == "application/json"
    assert fields["answer_text"] in ("Hello there", "Hi")
    if frames is INVOKE_STREAM:
        assert messages[1]["bytes_json"] and messages[1]["payload"]["bytes"]["delta"]["text"] == "Hi"
    assert body_from(json.loads(json.dumps(fields))) == body


def test_a_hand_edited_payload_gets_its_crcs_recomputed() -> None:
    fields = json.loads(json.dumps(body_fields(b"".join(CONVERSE_STREAM), streamed=True)))
    fields["body_eventstream"][1]["payload"]["delta"]["text"] = "Edited, and longer "
    messages = parse_stream(body_from(fields))
    assert json.loads(messages[1].payload)["delta"]["text"] == "Edited, and longer "


def test_typed_headers_round_trip() -> None:
    body = encode(Message((Header(":event-type", "string", "x"), Header("n", "long", 5), Header("raw", "bytes", b"\x00"),
                           Header("u", "uuid", "ab" * 16), Header("ok", "true", True)), b"\xff\xfe binary"))
    fields = json.loads(json.dumps(body_fields(body, streamed=True)))
    assert isinstance(fields["body_eventstream"][0]["headers"], list) and "payload_base64" in fields["body_eventstream"][0]
    assert body_from(fields) == body


@pytest.mark.parametrize(("message", "says"), [
    ({"headers": [{"name": "a", "type": "float", "value": 1}], "payload": {}}, "not one of"),
    ({"headers": [{"name": "a", "type": "string", "value": "x" * 70000}], "payload": {}}, "at most 65535"),
    ({"headers": [{"name": "a", "type": "byte", "value": 999}], "payload": {}}, "does not fit"),
    ({"headers": {"a": 5}, "payload": {}}, "is not text"),
    ({"headers": {}, "payload_base64": "%%%"}, "not base64"),
    ({"headers": {}}, "one is needed"),
    ({"headers": {}, "payload": {}, "crc": 1}, "unknown field"),
    ("not an object", "not an object"),
])
def test_hostile_messages_are_refused_clearly(message: Any, says: str) -> None:
    with pytest.raises((RecordingFileError, ValueError), match=says):
        body_from({"body_eventstream": [message]})


def test_a_hostile_file_is_refused_by_the_loader() -> None:
    from semula.recordings.format import loads

    good = {"format": "semula-recording/1", "project": "default", "provider": "bedrock", "host": HOST,
            "method": "POST", "endpoint": "/model/m/converse-stream", "model": "m", "streamed": True,
            "request": {"provider": "bedrock", "method": "POST", "endpoint": "/model/m/converse-stream", "model": "m",
                        "query": [], "headers": [], "system": None, "messages": [], "tools": [], "params": {},
                        "stream": True, "body": {}, "parsed": False},
            "response": {"status": 200, "headers": [], "body_eventstream": [{"headers": [{"name": "a", "type": "nope",
                                                                                          "value": 1}], "payload": {}}]}}
    with pytest.raises(RecordingFileError, match="response body: .*not one of"):
        loads(json.dumps(good))
    good["response"]["body_eventstream"] = "frames"
    with pytest.raises(RecordingFileError, match="not a list of message objects"):
        loads(json.dumps(good))


def _redacted_body(body: bytes) -> bytes:
    """An answer as a recording keeps it (recordings.entry.recording_of)."""
    return redacted_answer(body, redact_bytes)


def test_redaction_keeps_the_stream_valid() -> None:
    leaky = event("contentBlockDelta", {"delta": {"text": "key sk-" + "a" * 30}})
    redacted = _redacted_body(b"".join([CONVERSE_STREAM[0], leaky]))
    messages = parse_stream(redacted)  # CRCs recomputed
    assert b"sk-aaaa" not in redacted and b"[REDACTED]" in messages[1].payload


# ---------------------------------------------------------------- replay env


def test_aws_placeholders_only_without_credentials(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    out = aws_placeholders(home)
    assert out["AWS_ACCESS_KEY_ID"] == AWS_PLACEHOLDER and out["AWS_EC2_METADATA_DISABLED"] == "true"
    assert out["AWS_REGION"] == out["AWS_DEFAULT_REGION"] == "us-east-1"
    assert "AWS_ACCESS_KEY_ID" not in aws_placeholders({**home, "AWS_PROFILE": "dev"})
    assert "AWS_REGION" not in aws_placeholders({**home, "AWS_DEFAULT_REGION": "eu-west-1"})
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text("[default]\nregion = eu-west-1\n")
    assert aws_placeholders(home) == {}


def test_redaction_reaches_into_a_chunks_base64() -> None:
    hidden = chunk({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "sk-" + "b" * 30}})
    assert b"sk-bbbb" not in hidden  # invisible to a plain scan
    messages = parse_stream(_redacted_body(b"".join([hidden, INVOKE_STREAM[-1]])))
    inner = base64.b64decode(json.loads(messages[0].payload)["bytes"])
    assert b"sk-bbbb" not in inner and b"[REDACTED]" in inner
    assert BEDROCK.stream_complete([encode(m) for m in messages])


def test_tagged_redaction_keeps_the_stream_valid() -> None:
    """Under the recording's key each secret becomes a longer `[REDACTED:<tag>]`: frames re-encoded, CRCs right."""
    secret = "sk-" + "c" * 30
    hidden = chunk({"type": "content_block_delta", "delta": {"type": "text_delta", "text": secret}})
    leaky = event("contentBlockDelta", {"delta": {"text": f"key {secret}"}})
    redacted = redacted_answer(b"".join([leaky, hidden, INVOKE_STREAM[-1]]), lambda b: redact_bytes(b, KEY))
    messages = parse_stream(redacted)
    inner = base64.b64decode(json.loads(messages[1].payload)["bytes"])
    assert secret.encode() not in redacted and secret.encode() not in inner
    assert KEY.tag(secret).encode() in messages[0].payload and KEY.tag(secret).encode() in inner


def test_boto3_trusts_semulas_ca(tmp_path: Path) -> None:
    from semula.session.clientenv import client_env

    env = client_env(8080, tmp_path)
    assert env["AWS_CA_BUNDLE"] == env["CURL_CA_BUNDLE"] and Path(str(env["AWS_CA_BUNDLE"])).is_file()


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)
_message_like = st.fixed_dictionaries({"headers": st.one_of(
    st.dictionaries(st.text(max_size=8), _json, max_size=3),
    st.lists(st.fixed_dictionaries({"name": _json, "type": st.sampled_from(
        ["true", "false", "byte", "short", "integer", "long", "bytes", "string", "timestamp", "uuid", "x"]),
        "value": _json}), max_size=3), _json)},
    optional={"payload": _json, "payload_text": _json, "payload_base64": _json, "bytes_json": _json})


@settings(max_examples=60)
@given(st.lists(_message_like, max_size=3) | _json)
def test_any_file_content_loads_or_is_refused_clearly(messages: Any) -> None:
    try:
        body = body_from({"body_eventstream": messages})
    except ValueError:
        return
    assert parse_stream(body)  # what loads is a valid stream
