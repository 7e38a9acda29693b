"""Keep credentials out of recordings, logs and the console.

Everything semula stores or prints passes through here first: headers lose
credentials and the hop-by-hop fields that describe one connection rather than
the request, query strings lose API keys (Gemini sends ``?key=``), and text
loses anything shaped like a provider API key. Organisation and project ids
(``openai-organization``, ``openai-project``) are kept: they are not secrets and
they can select a different fine-tune or policy.

What reaches a fingerprint is redacted with a :class:`FingerprintKey`: each
secret becomes ``[REDACTED:<tag>]``, the tag a truncated HMAC-SHA256 of the
secret under the store's salt. Two different secrets then give different
fingerprints, the same secret gives the same one, and the secret itself never
reaches disk. Recorded answers are tagged under the same key (a client echoes
what it was served into its next request). Logs and the console use the plain
``[REDACTED]``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, AnyStr
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from semula.core.unprefixed import (
    has_access_key_id,
    is_key_shaped,
    is_secret_label,
    redact_unprefixed,
    runs_near_ids,
    secret_label_value,
)

__all__ = [
    "FINGERPRINT_SALT_BYTES",
    "HOP_BY_HOP_HEADERS",
    "FingerprintKey",
    "REDACTED",
    "SECRET_HEADERS",
    "SECRET_QUERY_PARAMS",
    "SIGNING_HEADERS",
    "clean_headers",
    "clean_query",
    "redact_bytes",
    "redact_json",
    "redact_query",
    "redact_text",
    "redact_url",
]

REDACTED = "[REDACTED]"
FINGERPRINT_SALT_BYTES = 32
# 16 base32 characters = 80 bits of the HMAC: enough that two secrets never share a tag, and
# lowercase letters and digits 2-7, so no volatile-value rule scrubs it as a hex id.
_TAG_BYTES = 10


@dataclass(frozen=True)
class FingerprintKey:
    """The salt that keys the hash of every redacted secret (one per store).

    An explicit input, never a global: the store hands it to whoever canonicalises requests.
    """

    salt: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.salt, bytes) or len(self.salt) < 16:
            raise ValueError("a fingerprint salt is at least 16 bytes")

    @classmethod
    def generate(cls) -> FingerprintKey:
        return cls(secrets.token_bytes(FINGERPRINT_SALT_BYTES))

    @classmethod
    def from_hex(cls, salt_hex: str) -> FingerprintKey:
        return cls(bytes.fromhex(salt_hex))

    def tag(self, secret: str | bytes) -> str:
        """The placeholder a secret becomes in anything fingerprinted or stored."""
        data = secret.encode("utf-8") if isinstance(secret, str) else secret
        digest = hmac.new(self.salt, data, hashlib.sha256).digest()[:_TAG_BYTES]
        return f"[REDACTED:{base64.b32encode(digest).decode('ascii').lower()}]"

SECRET_HEADERS: frozenset[str] = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",  # Anthropic
        "api-key",  # Azure OpenAI
        "x-goog-api-key",  # Gemini
        "cookie",
        "set-cookie",
        "x-auth-token",
        "ocp-apim-subscription-key",  # Azure API Management gateways
        "x-amz-security-token",  # AWS SigV4: the session token
        "mcp-session-id",  # MCP: one connection's session, a bearer of it (replay makes its own)
    }
)

# AWS SigV4 signs every request (`authorization` carries the signature, above); these change on
# every call (the time, the body's hash, the SDK's retry counters) and never belong in a file.
SIGNING_HEADERS: frozenset[str] = frozenset({"x-amz-date", "x-amz-content-sha256", "x-amz-user-agent"})
SIGNING_HEADER_PREFIXES = ("amz-sdk-",)  # amz-sdk-invocation-id, amz-sdk-request

# content-length and content-encoding describe the bytes on the wire; semula
# stores decoded bodies, so replaying them would be wrong.
HOP_BY_HOP_HEADERS: frozenset[str] = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "content-length",
        "content-encoding",
    }
)

# x-amz-*, x-goog-*, sig (Azure SAS), Signature (CloudFront): a presigned URL carries its signature, credential
# and session token in the query.
SECRET_QUERY_PARAMS = frozenset({"key", "api_key", "api-key", "access_token", "token",
                                 "x-amz-signature", "x-amz-security-token", "x-amz-credential",
                                 "x-goog-signature", "x-goog-credential", "sig", "signature"})
# Response headers whose value is a URL: a redirect to a presigned download.
_URL_HEADERS = frozenset({"location", "content-location"})

# Each pattern needs a long run of key characters after its prefix, so prose
# such as "sk-learn" or "Bearer tokens expire" is left alone. A key starts a word (`\b` before it), and
# `_keys_in` finds one in linear time: re skips to the next of the prefixes (`_KEY_STARTS`), the word's
# start is checked there, and only then are the patterns matched at that place. A leading `\b` in the
# pattern made re try every alternative at every position (~0.2 µs a byte, 35-45 ms for a 200 KB answer,
# against 3-6 ms now); searching the patterns whole and then checking the word's start made a body of
# `ask-ask-…` quadratic.
_KEY_PATTERNS = (
    # OpenAI (sk-..., sk-proj-..., sk-svcacct-...), Anthropic (sk-ant-api03-...),
    # OpenRouter (sk-or-v1-...), DeepSeek (sk-...).
    r"sk-[A-Za-z0-9_\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{35,}",  # Google API keys: 39 characters in all
    r"gsk_[A-Za-z0-9]{20,}",  # Groq
    r"xai-[A-Za-z0-9]{20,}",  # xAI
    r"hf_[A-Za-z0-9]{20,}",  # Hugging Face
    r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]+",  # JWTs
    r"(?:AKIA|ASIA)[A-Z0-9]{16}\b",  # AWS access key ids (long-term, temporary)
    r"ya29\.[A-Za-z0-9_\-]{20,}",  # Google OAuth access tokens (Vertex AI), outside a Bearer header too
)
_KEY_STARTS = ("sk-", "AIza", "gsk_", "xai-", "hf_", "eyJ", "AKIA", "ASIA", "ya29.")  # each pattern's, in order
_JWT_START = "eyJ"
_JWT_RUN = r"[A-Za-z0-9_\-]*"  # the characters of a JWT's part (a failed one fails on for the whole run)
# An AWS SigV4 signature quoted in an error (`Signature=` kept, the hex tagged): its own pass, before the
# keys (a key pattern's run may end at its `Signature`, and would take the word the signature is found by).
_SIGNATURE = r"(Signature=)[0-9a-f]{64}\b"
# A bearer token: keep the word, drop the token. It must be long and hold a
# digit, so "Bearer authentication" stays readable.
_BEARER = r"(?i:(bearer\s+))(?=[A-Za-z0-9._~+/\-]*[0-9])[A-Za-z0-9._~+/\-]{16,}=*"

_TEXT_KEYS = re.compile("|".join(_KEY_PATTERNS))
_TEXT_STARTS = re.compile("|".join(map(re.escape, _KEY_STARTS)))
_TEXT_JWT_RUN = re.compile(_JWT_RUN)
_TEXT_BEARER = re.compile(_BEARER)
_TEXT_SIGNATURE = re.compile(_SIGNATURE)
_TEXT_WORD = re.compile(r"\w")
_BYTES_KEYS = re.compile("|".join(_KEY_PATTERNS).encode())
_BYTES_STARTS = re.compile("|".join(map(re.escape, _KEY_STARTS)).encode())
_BYTES_JWT_RUN = re.compile(_JWT_RUN.encode())
_BYTES_BEARER = re.compile(_BEARER.encode())
_BYTES_SIGNATURE = re.compile(_SIGNATURE.encode())
_BYTES_WORD = re.compile(rb"\w")
# In a JSON body a key may follow an escape (`"…:\\nsk-…"`): its `n` is a word character, so on bytes a
# word's start alone misses the key that the decoded text's redaction finds (and the key would reach the file).
_BYTES_ESCAPE = re.compile(rb"\\[nrtbf]")
_REDACTED_BYTES = REDACTED.encode()
# No pattern here or in `core.unprefixed` matches fewer characters (an access key id has 20, a labelled
# secret 16 after its label): most strings of a JSON body (roles, model names) are returned as they are.
_SHORTEST_SECRET = 16


def _starts_word(s: AnyStr, at: int) -> bool:
    """Whether a key found at `at` starts a word, as `\b` says (every key starts with a word character);
    in bytes (a JSON body), after a `\n`-style escape too."""
    if at == 0:
        return True
    if isinstance(s, str):
        return _TEXT_WORD.match(s, at - 1) is None
    return _BYTES_WORD.match(s, at - 1) is None or (at >= 2 and _BYTES_ESCAPE.match(s, at - 2) is not None)


def _substitute(s: AnyStr, found: Iterator[re.Match[AnyStr]], replace: Callable[[re.Match[AnyStr]], AnyStr]) -> AnyStr:
    """`s` with each match `found` yields (left to right, none overlapping) replaced."""
    parts: list[AnyStr] = []
    done = 0
    for m in found:
        parts += (s[done:m.start()], replace(m))
        done = m.end()
    if not parts:
        return s
    parts.append(s[done:])
    return s[:0].join(parts)


def _keys_in(s: AnyStr) -> Iterator[re.Match[AnyStr]]:
    """The matches of `\\b(?:<_KEY_PATTERNS>)` in `s`, leftmost first, in time linear in `s`.

    Every place a prefix starts is looked at (not only those after the last match's end: a key may start
    within another word's run, after a `-` or a `.`). A JWT that fails at one place fails at every later
    `eyJ` of the same run of its characters (each meets the same character where the run ends): those
    are passed over, or `-eyJ-eyJ-…` would be quadratic."""
    if isinstance(s, str):
        starts, keys, jwt_run, jwt = _TEXT_STARTS, _TEXT_KEYS, _TEXT_JWT_RUN, _JWT_START
    else:
        starts, keys, jwt_run, jwt = _BYTES_STARTS, _BYTES_KEYS, _BYTES_JWT_RUN, _JWT_START.encode()
    at = 0
    no_jwt_before = 0  # a JWT failed at an `eyJ` whose run ends here
    while (start := starts.search(s, at)) is not None:
        pos = start.start()
        at = pos + 1
        is_jwt = start.group() == jwt
        if (is_jwt and pos < no_jwt_before) or not _starts_word(s, pos):
            continue
        found = keys.match(s, pos)
        if found is None:
            if is_jwt:
                run = jwt_run.match(s, pos + len(jwt))  # `*`: it always matches
                no_jwt_before = run.end() if run is not None else pos
            continue
        yield found
        at = found.end()


def _bearers_in(pattern: re.Pattern[AnyStr], s: AnyStr) -> Iterator[re.Match[AnyStr]]:
    """The matches of `\\b` + the bearer pattern in `s`: a match that does not start a word is passed over
    one character at a time. Linear: a token's run holds no whitespace, so no other bearer word starts
    inside the part of the text one match attempt reads."""
    at = 0
    while (m := pattern.search(s, at)) is not None:
        if not _starts_word(s, m.start()):
            at = m.start() + 1
            continue
        yield m
        at = m.end()


def _redact_prefixed(s: AnyStr, placeholder: Callable[[AnyStr], AnyStr]) -> AnyStr:
    """Signatures, prefixed keys and JWTs, bearer tokens, in that order, each replaced by its placeholder."""
    signature, bearer = (_TEXT_SIGNATURE, _TEXT_BEARER) if isinstance(s, str) else (_BYTES_SIGNATURE, _BYTES_BEARER)
    s = signature.sub(_after_word(placeholder), s)
    s = _substitute(s, _keys_in(s), lambda m: placeholder(m.group()))
    return _substitute(s, _bearers_in(bearer, s), _after_word(placeholder))


def _after_word(placeholder: Callable[[AnyStr], AnyStr]) -> Callable[[re.Match[AnyStr]], AnyStr]:
    """The replacement of a secret after its word (`Bearer `, `Signature=`): the word kept, the rest tagged."""
    return lambda m: m.group(1) + placeholder(m.group()[len(m.group(1)):])


def _placeholder(key: FingerprintKey | None) -> Callable[[str], str]:
    return key.tag if key is not None else (lambda _secret: REDACTED)


def redact_text(s: str, key: FingerprintKey | None = None) -> str:
    """Replace API-key-like strings with ``[REDACTED]``, or ``[REDACTED:<tag>]`` under ``key``.

    Prefixed keys, JWTs and bearer tokens first (their tags are those of earlier stores), then the
    secrets without a prefix (`core.unprefixed`: AWS secret keys and session tokens)."""
    if len(s) < _SHORTEST_SECRET:
        return s
    placeholder = _placeholder(key)
    near_ids = runs_near_ids(s)  # before the access key ids themselves are replaced
    return redact_unprefixed(_redact_prefixed(s, placeholder), placeholder, near_ids)


def redact_bytes(b: bytes, key: FingerprintKey | None = None) -> bytes:
    """Like :func:`redact_text` for arbitrary bytes (keys are ASCII).

    A recorded answer is redacted under the recording's `key`: a client that echoes a replayed
    ``[REDACTED:<tag>]`` back then sends what the recorded follow-up request fingerprinted to."""
    if len(b) < _SHORTEST_SECRET:
        return b
    placeholder = _placeholder_bytes(key)
    near_ids = runs_near_ids(b)
    return redact_unprefixed(_redact_prefixed(b, placeholder), placeholder, frozenset(r.encode("ascii") for r in near_ids))


def _placeholder_bytes(key: FingerprintKey | None) -> Callable[[bytes], bytes]:
    return (lambda secret: key.tag(secret).encode("ascii")) if key is not None else (lambda _secret: _REDACTED_BYTES)


def redact_json(value: Any, key: FingerprintKey | None = None) -> Any:
    """Apply :func:`redact_text` to every string in a JSON value, keys included.

    A string under a secret's name (``"SecretAccessKey"``, ``"aws_session_token"``) is redacted whole,
    and so is a 40-character run beside an access key id in the same object (``{"id": "AKIA…", "secret": …}``)."""
    if isinstance(value, str):
        return redact_text(value, key)
    if isinstance(value, dict):
        beside_id = any(isinstance(v, str) and has_access_key_id(v) for v in value.values())
        return {redact_text(k, key) if isinstance(k, str) else k: _member(k, v, key, beside_id)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, key) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_json(v, key) for v in value)
    return value


def _member(name: Any, value: Any, key: FingerprintKey | None, beside_id: bool) -> Any:
    if isinstance(value, str) and (
        (isinstance(name, str) and is_secret_label(name) and secret_label_value(value))
        or (beside_id and is_key_shaped(value))
    ):
        return _placeholder(key)(value)
    return redact_json(value, key)


def redact_query(pairs: Iterable[tuple[str, str]], key: FingerprintKey | None = None) -> list[tuple[str, str]]:
    """:func:`clean_query`, then each remaining name and value redacted like text (a key in ``?q=``)."""
    return [(redact_text(k, key), redact_text(v, key)) for k, v in clean_query(pairs)]


def _is_dropped_header(name: str) -> bool:
    return (
        name in SECRET_HEADERS
        or name in SIGNING_HEADERS
        or name.startswith(SIGNING_HEADER_PREFIXES)
        or name in HOP_BY_HOP_HEADERS
        or name.startswith("proxy-")
        or name.startswith("x-semula-")
    )


def clean_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Lowercase names; drop credentials, hop-by-hop fields and semula's own headers; redact the rest's values."""
    cleaned = []
    for name, value in headers:
        lower = name.lower()
        if not _is_dropped_header(lower):
            cleaned.append((lower, redact_url(value) if lower in _URL_HEADERS else redact_text(value)))
    return cleaned


def redact_url(url: str) -> str:
    """A URL without its userinfo, the values of its secret query parameters replaced, then redacted as text.

    The rest keeps its place and spelling (only a query with a secret in it is re-encoded), so a client that
    follows a recorded redirect reaches the same path; the follow-up's own key drops those parameters anyway.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]  # user:password@ dropped: a client could not parse a placeholder there
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k.lower() in SECRET_QUERY_PARAMS for k, _ in pairs):
        query = urlencode([(k, REDACTED if k.lower() in SECRET_QUERY_PARAMS else v) for k, v in pairs])
    return redact_text(urlunsplit(parts._replace(netloc=netloc, query=query)))


def clean_query(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop query parameters that carry credentials (Gemini's ``key``)."""
    return [(k, v) for k, v in pairs if k.lower() not in SECRET_QUERY_PARAMS]
