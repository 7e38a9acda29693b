"""Request bodies that are not JSON: uploads, matched by their exact bytes.

`POST /v1/files` and audio transcriptions send multipart forms, Gemini's media uploads send the
file's raw bytes. Such a request is kept for the exact tier only (``parsed=False``), and what the
fingerprint hashes and the recording file holds is a small JSON *descriptor* of the bytes, never
the bytes: the media type, the size and the SHA-256, and for a multipart form each part's name,
filename, content type, size and SHA-256 (a short text field keeps its value, so
``purpose=assistants`` stays readable). The form's boundary is left out: SDKs pick a new one on
every run, and the fingerprint must not change with it.

Secrets: a text part's value is redacted under the fingerprint key as JSON bodies are, and any
part (or body) that is UTF-8 text is hashed with its secrets redacted (``"redacted": true`` then
says the hash is not the plain bytes'), so a key in an uploaded file never fingerprints as itself.

mitmproxy's own ``decode_multipart`` joins a part's lines without their line breaks (its hash would
be wrong), so the stdlib ``email`` parser splits the form: it keeps each part's bytes exactly.
Pure: bytes and headers in, a JSON value out.
"""

from __future__ import annotations

import email.parser
import email.policy
import email.utils
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

from semula.core.redact import FingerprintKey, redact_text

__all__ = ["DESCRIPTOR_KEY", "RawBody", "declares_json", "describe", "is_raw_body", "media_type"]

DESCRIPTOR_KEY = "semula_raw_body"  # the descriptor's one top-level key: a JSON body never looks like it
VALUE_CHARS = 256  # a text field (no filename) at most this long is kept as its value
_JSON_MEDIA = re.compile(r"^application/(?:[a-z0-9!#$&^_.+-]*\+)?json$")  # application/json, …/problem+json


@dataclass(frozen=True)
class RawBody:
    """A non-JSON body as the canonical request holds it."""

    descriptor: dict[str, Any]
    model: str | None = None  # a multipart form's `model` field (audio transcriptions)
    stream: bool = False  # a multipart form's `stream=true`


def media_type(headers: Mapping[str, str]) -> str | None:
    """The content type without its parameters, lower-cased (None when the request declares none)."""
    value = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    if value is None:
        return None
    return value.split(";", 1)[0].strip().lower() or None


def declares_json(headers: Mapping[str, str]) -> bool:
    """Whether the request says its body is JSON (`application/json`, `…+json`)."""
    media = media_type(headers)
    return media is not None and _JSON_MEDIA.match(media) is not None


def is_raw_body(body: bytes, headers: Mapping[str, str]) -> bool:
    """Whether a body is matched by its bytes rather than read as JSON, judged before parsing it.

    An empty body always is. A body that declares a JSON type, or no type at all, is read as JSON;
    one that then proves not to be a JSON object is matched by its bytes after all when it declared
    JSON (google-genai sends a file-search upload's raw text as `application/json`), and stays an
    error that says why when it declared nothing (`Adapter.canonicalise`). A body of any other type is
    read as JSON when it is a JSON object (clients label JSON `text/plain`; curl's `-d` says
    form-urlencoded), else by bytes.
    """
    if not body:
        return True
    media = media_type(headers)
    if media is None or _JSON_MEDIA.match(media):
        return False
    try:
        return not isinstance(json.loads(body), dict)
    except (ValueError, RecursionError):
        return True


def describe(body: bytes, headers: Mapping[str, str], key: FingerprintKey) -> RawBody:
    """The descriptor of a body `is_raw_body` accepted."""
    media = media_type(headers)
    if media == "multipart/form-data":
        content_type = next(v for k, v in headers.items() if k.lower() == "content-type")
        parts = _form_parts(content_type, body, key)
        if parts is not None:
            fields = {p["name"]: p["value"] for p in parts if isinstance(p.get("value"), str) and "name" in p}
            model = fields.get("model")
            return RawBody({DESCRIPTOR_KEY: {"media_type": media, "parts": parts}}, model=model,
                           stream=fields.get("stream", "").lower() == "true")
    return RawBody({DESCRIPTOR_KEY: {"media_type": media, **_digest(body, key)}})


def _digest(data: bytes, key: FingerprintKey) -> dict[str, Any]:
    """Size and SHA-256; UTF-8 text is hashed with its secrets redacted (and says so)."""
    out: dict[str, Any] = {"size": len(data)}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and (redacted := redact_text(text, key)) != text:
        out.update(sha256=hashlib.sha256(redacted.encode("utf-8")).hexdigest(), redacted=True)
    else:
        out["sha256"] = hashlib.sha256(data).hexdigest()
    return out


def _form_parts(content_type: str, body: bytes, key: FingerprintKey) -> list[dict[str, Any]] | None:
    """Each part of a multipart form, in order; None when the form cannot be split (no boundary, a
    nested form, a broken delimiter): the whole body is then hashed instead."""
    head = f"Content-Type: {_header_text(content_type)}\r\nMIME-Version: 1.0\r\n\r\n".encode("utf-8")
    try:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        if not message.is_multipart() or message.defects:
            return None
        parts = []
        for part in message.iter_parts():
            payload = part.get_payload(decode=True)
            if part.is_multipart() or part.defects or not isinstance(payload, bytes):
                return None
            parts.append(_part(part, payload, key))
    except (ValueError, LookupError, TypeError, IndexError, AttributeError):
        return None  # the email package raises a handful of types on hostile headers
    return parts or None


def _part(part: Message, payload: bytes, key: FingerprintKey) -> dict[str, Any]:
    out: dict[str, Any] = {}
    name = part.get_param("name", header="content-disposition")
    if isinstance(name, tuple):  # RFC 2231: name*=utf-8''…
        name = email.utils.collapse_rfc2231_value(name)
    if isinstance(name, str):
        out["name"] = redact_text(_header_text(name), key)
    filename = part.get_filename()
    if isinstance(filename, str):
        out["filename"] = redact_text(_header_text(filename), key)
    if part.get("content-type") is not None:
        out["content_type"] = part.get_content_type()
    if filename is None and len(payload) <= VALUE_CHARS * 4:  # UTF-8: at most 4 bytes a character
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and len(text) <= VALUE_CHARS:
            out["value"] = redact_text(text, key)
            return out
    out.update(_digest(payload, key))
    return out


def _header_text(value: str) -> str:
    """Header text as readable UTF-8: the parser keeps non-ASCII header bytes as surrogate escapes,
    which JSON (and so the fingerprint) cannot hold."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
