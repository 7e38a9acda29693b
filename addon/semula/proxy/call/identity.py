"""Who is calling: the project from the proxy user name, and the API key's hash for namespacing."""

from __future__ import annotations

import base64
import binascii
import hashlib

from semula.providers.base import RawRequest

KEY_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")


def proxy_user(header_value: str | None) -> str | None:
    """The user name of a Basic Proxy-Authorization header (no password needed)."""
    return proxy_credentials(header_value)[0]


def proxy_credentials(header_value: str | None) -> tuple[str | None, str | None]:
    """User name and password of a Basic Proxy-Authorization header; None for what is missing."""
    if not header_value or not header_value.lower().startswith("basic "):
        return None, None
    try:
        decoded = base64.b64decode(header_value[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    user, _, password = decoded.partition(":")
    return user or None, password or None


def keyed_project(project: str, raw: RawRequest, namespace_by_key: bool) -> str:
    """The project a call is recorded under: with `namespace_by_key`, a hash of its API key appended."""
    if namespace_by_key and (key_hash := api_key_hash(raw)):
        return f"{project}.k{key_hash}"
    return project


def api_key_hash(raw: RawRequest) -> str | None:
    for name in KEY_HEADERS:
        if value := raw.headers.get(name):
            return hashlib.sha256(value.removeprefix("Bearer ").encode()).hexdigest()[:12]
    for name, value in raw.query:
        if name == "key":
            return hashlib.sha256(value.encode()).hexdigest()[:12]
    return None
