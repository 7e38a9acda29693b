"""Non-JSON request bodies (uploads): matched by a descriptor of their bytes, never by the boundary."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import pytest

from semula.core.request.canonical import canonical_json, request_fingerprint
from semula.providers import AdapterError, RawRequest, adapter_for
from semula.providers.rawbody import DESCRIPTOR_KEY, VALUE_CHARS, is_raw_body, media_type
from semula.recordings import format as recording_format
from semula.recordings.entry import Answer, recording_of
from semula.core.settings import ProjectSettings
from entries import TEST_KEY

BINARY = os.urandom(3000) + b"\r\n--not-the-boundary\r\n\n\r" + bytes(range(256))
KEY_TEXT = "sk-proj-" + "A1b2C3d4" * 5


def form(boundary: str, parts: list[tuple[str, str | None, str | None, bytes]]) -> bytes:
    """A multipart/form-data body as an SDK writes it: (name, filename, content type, bytes) each."""
    out = b""
    for name, filename, content_type, data in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        if content_type:
            out += f"Content-Type: {content_type}\r\n".encode()
        out += b"\r\n" + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def upload(body: bytes, content_type: str | None, host: str = "api.openai.com", path: str = "/v1/files"):
    headers = {"content-type": content_type} if content_type else {}
    raw = RawRequest(method="POST", host=host, path=path, query=(), headers=headers, body=body)
    return adapter_for(host, path).canonicalise(raw, TEST_KEY)


FILE_PARTS = [("purpose", None, None, b"assistants"), ("file", "notes.bin", "application/octet-stream", BINARY)]


def test_a_multipart_upload_is_described_part_by_part() -> None:
    c = upload(form("a1b2c3", FILE_PARTS), "multipart/form-data; boundary=a1b2c3")
    assert c.parsed is False and c.messages == ()
    assert c.body == {DESCRIPTOR_KEY: {"media_type": "multipart/form-data", "parts": [
        {"name": "purpose", "value": "assistants"},
        {"name": "file", "filename": "notes.bin", "content_type": "application/octet-stream",
         "size": len(BINARY), "sha256": hashlib.sha256(BINARY).hexdigest()},
    ]}}


def test_the_boundary_never_changes_the_fingerprint() -> None:
    fingerprints = {
        request_fingerprint(upload(form(b, FILE_PARTS), f"multipart/form-data; boundary={b}"))
        for b in ("a1b2c3", "----WebKitFormBoundary7MA4YWxkTrZu0gW", "x" * 60)
    }
    assert len(fingerprints) == 1


@pytest.mark.parametrize(
    "other",
    [
        [("purpose", None, None, b"assistants"), ("file", "notes.bin", "application/octet-stream", BINARY + b"!")],
        [("purpose", None, None, b"batch"), FILE_PARTS[1]],
        [("purpose", None, None, b"assistants"), ("file", "other.bin", "application/octet-stream", BINARY)],
        [FILE_PARTS[1], FILE_PARTS[0]],  # the order of the parts is part of the request
    ],
    ids=["content", "field", "filename", "order"],
)
def test_a_different_form_is_a_different_request(other: list[Any]) -> None:
    same = request_fingerprint(upload(form("b", FILE_PARTS), "multipart/form-data; boundary=b"))
    assert request_fingerprint(upload(form("b", other), "multipart/form-data; boundary=b")) != same


def test_raw_bytes_are_described_by_size_and_hash() -> None:
    c = upload(BINARY, "application/octet-stream", host="generativelanguage.googleapis.com",
               path="/upload/v1beta/files")
    assert c.parsed is False
    assert c.body == {DESCRIPTOR_KEY: {"media_type": "application/octet-stream", "size": len(BINARY),
                                       "sha256": hashlib.sha256(BINARY).hexdigest()}}
    assert request_fingerprint(c) != request_fingerprint(upload(BINARY[:-1], "application/octet-stream"))


def test_audio_transcription_keeps_its_model_and_stream_fields() -> None:
    parts = [("model", None, None, b"whisper-1"), ("stream", None, None, b"true"),
             ("file", "hello.wav", "audio/wav", b"RIFF\x00\x01wave")]
    c = upload(form("q", parts), "multipart/form-data; boundary=q", path="/v1/audio/transcriptions")
    assert (c.model, c.stream, c.parsed) == ("whisper-1", True, False)


def test_secrets_in_parts_are_redacted_and_tagged() -> None:
    parts = [("note", None, None, f"use {KEY_TEXT}".encode()),
             ("file", "batch.jsonl", "application/jsonl", f'{{"key": "{KEY_TEXT}"}}\n'.encode() * 3)]
    c = upload(form("z", parts), "multipart/form-data; boundary=z")
    text = canonical_json(c.body)
    assert KEY_TEXT not in text and "[REDACTED:" in text
    file_part = c.body[DESCRIPTOR_KEY]["parts"][1]
    assert file_part["redacted"] is True  # the hash is of the redacted text, not of the key
    other_key = upload(form("z", [(n, f, t, d.replace(b"A1b2", b"Z9y8")) for n, f, t, d in parts]),
                       "multipart/form-data; boundary=z")
    assert request_fingerprint(other_key) != request_fingerprint(c)


def test_a_long_text_field_is_hashed_not_inlined() -> None:
    long = b"word " * VALUE_CHARS
    c = upload(form("l", [("instructions", None, None, long)]), "multipart/form-data; boundary=l")
    part = c.body[DESCRIPTOR_KEY]["parts"][0]
    assert "value" not in part and part["size"] == len(long) and part["sha256"] == hashlib.sha256(long).hexdigest()


def test_a_non_ascii_filename_stays_readable_text() -> None:
    body = form("n", [("file", "café-é.txt", "text/plain", b"bonjour")])
    c = upload(body, "multipart/form-data; boundary=n")
    assert c.body[DESCRIPTOR_KEY]["parts"][0]["filename"] == "café-é.txt"
    canonical_json(c.body).encode("utf-8")  # no surrogate escapes left


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data", form("b", FILE_PARTS)),  # no boundary parameter
        ("multipart/form-data; boundary=other", form("b", FILE_PARTS)),  # the boundary is not in the body
        ("multipart/form-data; boundary=b", b"--b\r\nno headers and no end"),
        ("multipart/form-data; boundary=b", b"\x00\xff" * 50),
    ],
)
def test_a_broken_form_is_hashed_whole(content_type: str, body: bytes) -> None:
    c = upload(body, content_type)
    descriptor = c.body[DESCRIPTOR_KEY]
    assert descriptor["media_type"] == "multipart/form-data" and "parts" not in descriptor
    assert descriptor["size"] == len(body)


@pytest.mark.parametrize(
    ("content_type", "body", "raw"),
    [
        ("application/json", b'{"a": 1}', False),
        (None, b'{"a": 1}', False),
        ("text/plain; charset=utf-8", b'{"a": 1}', False),  # JSON under another label is still read as JSON
        ("application/x-www-form-urlencoded", b'{"model": "m"}', False),  # curl -d
        ("application/vnd.api+json", b'{"a": 1}', False),
        ("application/octet-stream", b"\x89PNG\r\n", True),
        ("text/plain", b"[1, 2]", True),
        ("application/x-www-form-urlencoded", b"a=1&b=2", True),
        ("application/json", b"", True),  # an empty body (a cancel POST) has nothing to parse
        (None, b"", True),
    ],
)
def test_which_bodies_are_matched_by_bytes(content_type: str | None, body: bytes, raw: bool) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    assert is_raw_body(body, headers) is raw


@pytest.mark.parametrize("body", [b"not json", b"\xff\xfe\x00", b"[1]", b"  \n", b'{"cut": '])
@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/problem+json"])
def test_a_body_labelled_json_that_is_not_a_json_object_is_matched_by_its_bytes(body: bytes, content_type: str) -> None:
    # google-genai's file-search upload sends the file's raw text as application/json
    c = upload(body, content_type, host="generativelanguage.googleapis.com",
               path="/upload/v1beta/fileSearchStores/s1:uploadToFileSearchStore")
    assert c.parsed is False
    assert c.body == {DESCRIPTOR_KEY: {"media_type": content_type.split(";")[0], "size": len(body),
                                       "sha256": hashlib.sha256(body).hexdigest()}}
    other = upload(body + b"!", content_type, host="generativelanguage.googleapis.com",
                   path="/upload/v1beta/fileSearchStores/s1:uploadToFileSearchStore")
    assert request_fingerprint(other) != request_fingerprint(c)  # other bytes, another request


def test_a_key_in_text_labelled_json_is_hashed_redacted() -> None:
    body = f"notes: {KEY_TEXT}\n".encode()
    c = upload(body, "application/json")
    assert c.body[DESCRIPTOR_KEY]["redacted"] is True and KEY_TEXT not in canonical_json(c.to_json())


@pytest.mark.parametrize("body", [b"not json", b"[1]"])
def test_a_body_without_a_type_that_is_not_json_still_says_why(body: bytes) -> None:
    with pytest.raises(AdapterError, match="body is"):
        upload(body, None)


@pytest.mark.parametrize("body", [b'{"a": "\\ud800"}', b'{"a": ' * 300 + b"1" + b"}" * 300])
def test_a_json_object_that_cannot_be_matched_still_says_why_whatever_its_label(body: bytes) -> None:
    with pytest.raises(AdapterError, match="surrogate|nested too deeply"):
        upload(body, "application/json")


def test_media_type_drops_parameters() -> None:
    assert media_type({"Content-Type": "Multipart/Form-Data; boundary=x"}) == "multipart/form-data"
    assert media_type({}) is None


def test_the_descriptor_round_trips_through_a_recording_file() -> None:
    c = upload(form("r", FILE_PARTS), "multipart/form-data; boundary=r")
    binary_answer = bytes(range(256)) * 4
    new = recording_of("default", c, ProjectSettings(), Answer(host="api.openai.com", body=binary_answer,
                       headers=[("content-type", "application/octet-stream")]))
    recording = recording_format.Recording(**new.call_fields(), request=new.canonical, recorded_at=None)
    text = recording_format.dumps(recording)
    assert len(text) < 3000, "the uploaded bytes must not be inlined"
    loaded = recording_format.loads(text)
    assert loaded.body == binary_answer and loaded.request == json.loads(json.dumps(new.canonical))
