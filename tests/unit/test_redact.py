from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semula.core.redact import (
    _KEY_PATTERNS,
    _KEY_STARTS,
    HOP_BY_HOP_HEADERS,
    SECRET_HEADERS,
    SECRET_QUERY_PARAMS,
    FingerprintKey,
    _redact_prefixed,
    clean_headers,
    clean_query,
    redact_bytes,
    redact_json,
    redact_text,
    redact_url,
)

OPENAI_KEY = "sk-proj-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7d"  # 40 chars after the prefix
OPENAI_LEGACY_KEY = "sk-" + "T3BlbkFJ" * 6
ANTHROPIC_KEY = "sk-ant-api03-" + "Xy9_Zw8-Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7" + "-AbCdEfGhAA"
GOOGLE_KEY = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"  # 35 chars after the prefix
GROQ_KEY = "gsk_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

assert len(GOOGLE_KEY) == 39


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"my key is {OPENAI_KEY}", "my key is [REDACTED]"),
        (f"key={OPENAI_LEGACY_KEY}&x=1", "key=[REDACTED]&x=1"),
        (f'"x-api-key": "{ANTHROPIC_KEY}"', '"x-api-key": "[REDACTED]"'),
        (f"https://x/y?key={GOOGLE_KEY}", "https://x/y?key=[REDACTED]"),
        (f"groq {GROQ_KEY}.", "groq [REDACTED]."),
        (f"Authorization: Bearer {OPENAI_KEY}", "Authorization: Bearer [REDACTED]"),
        ("Authorization: Bearer abc123def456ghi789jkl", "Authorization: Bearer [REDACTED]"),
        (f"token {JWT}", "token [REDACTED]"),
        (f"{OPENAI_KEY}\n{GOOGLE_KEY}", "[REDACTED]\n[REDACTED]"),
    ],
)
def test_redact_text_removes_planted_keys(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "prose",
    [
        "Use sk-learn or scikit-learn for this.",
        "Bearer tokens expire after an hour.",
        "The bearer authentication scheme is simple",
        "ask-me-anything threads and task-1234 tickets",
        "AIza is a prefix of Google keys",
        "sk-short",
        "",
    ],
)
def test_redact_text_leaves_prose_alone(prose: str) -> None:
    assert redact_text(prose) == prose


@pytest.mark.parametrize("key", [OPENAI_KEY, ANTHROPIC_KEY, GOOGLE_KEY, GROQ_KEY])
def test_redact_bytes_works_on_arbitrary_bytes(key: str) -> None:
    body = b"\x00\xff binary " + key.encode() + b" \xfe tail"
    out = redact_bytes(body)
    assert key.encode() not in out
    assert out == b"\x00\xff binary [REDACTED] \xfe tail"


def test_redact_bytes_bearer() -> None:
    assert redact_bytes(b"authorization: Bearer abcdef0123456789xyz") == b"authorization: Bearer [REDACTED]"


@pytest.mark.parametrize("escape", ["\n", "\t", "\r"])
def test_redact_bytes_finds_a_key_after_a_json_escape(escape: str) -> None:
    """`"…\\nsk-…"` in a JSON answer: the escape's letter is a word character, yet the key is found, and
    tagged as the decoded text's redaction tags it (a client echoing it sends that text)."""
    from semula.core.redact import FingerprintKey

    key = FingerprintKey(bytes(range(32)))
    text = f"here it is:{escape}{OPENAI_KEY}{escape}Bearer abc123def456ghi789jkl{escape}AKIAABCDEFGHIJKLMNOP"
    body = json.dumps({"content": text}).encode()
    assert json.loads(redact_bytes(body)) == {"content": redact_text(text)}
    assert json.loads(redact_bytes(body, key)) == {"content": redact_text(text, key)}
    assert OPENAI_KEY.encode() not in redact_bytes(body) and b"AKIA" not in redact_bytes(body)


def test_redact_json_recurses_into_keys_and_values() -> None:
    value = {"a": [OPENAI_KEY, {"b": GOOGLE_KEY}], OPENAI_KEY: 1, "n": 3, "t": None, "ok": "plain"}
    assert redact_json(value) == {
        "a": ["[REDACTED]", {"b": "[REDACTED]"}],
        "[REDACTED]": 1,
        "n": 3,
        "t": None,
        "ok": "plain",
    }


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([("Authorization", "Bearer x"), ("Content-Type", "application/json")], [("content-type", "application/json")]),
        ([("x-api-key", "k"), ("anthropic-version", "2023-06-01")], [("anthropic-version", "2023-06-01")]),
        ([("api-key", "k"), ("x-goog-api-key", "k"), ("Cookie", "c"), ("Set-Cookie", "c")], []),
        ([("Content-Length", "10"), ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")], []),
        ([("Connection", "keep-alive"), ("Proxy-Connection", "x"), ("Proxy-Whatever", "y")], []),
        ([("X-Semula-Mode", "replay"), ("x-semula-project", "p")], []),
        ([("OpenAI-Organization", "org-1"), ("OpenAI-Project", "proj_1")], [("openai-organization", "org-1"), ("openai-project", "proj_1")]),
        ([("Accept", "a"), ("accept", "b")], [("accept", "a"), ("accept", "b")]),
    ],
)
def test_clean_headers(headers: list[tuple[str, str]], expected: list[tuple[str, str]]) -> None:
    assert clean_headers(headers) == expected


def test_header_sets_are_lowercase() -> None:
    for name in SECRET_HEADERS | HOP_BY_HOP_HEADERS:
        assert name == name.lower()
    assert "openai-organization" not in SECRET_HEADERS


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([("key", GOOGLE_KEY), ("alt", "sse")], [("alt", "sse")]),
        ([("api-version", "2024-10-21"), ("api-key", "k")], [("api-version", "2024-10-21")]),
        ([("api_key", "k"), ("access_token", "t"), ("token", "t"), ("Key", "k")], []),
        ([("a", "1"), ("b", "2")], [("a", "1"), ("b", "2")]),
    ],
)
def test_clean_query(pairs: list[tuple[str, str]], expected: list[tuple[str, str]]) -> None:
    assert clean_query(pairs) == expected
    assert SECRET_QUERY_PARAMS == {"key", "api_key", "api-key", "access_token", "token",
                                   "x-amz-signature", "x-amz-security-token", "x-amz-credential",  # presigned AWS
                                   "x-goog-signature", "x-goog-credential", "sig", "signature"}  # GCS, Azure, CloudFront


@pytest.mark.parametrize(("url", "expected"), [
    ("https://b.s3.amazonaws.com/a/b.mp3?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2026"
     "&X-Amz-Signature=0f1e2d&x=1",
     "https://b.s3.amazonaws.com/a/b.mp3?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%5BREDACTED%5D"
     "&X-Amz-Signature=%5BREDACTED%5D&x=1"),
    ("https://u:p4ss@cdn.example/x?sig=zzz&se=2026-12-05", "https://cdn.example/x?sig=%5BREDACTED%5D&se=2026-12-05"),
    ("https://storage.googleapis.com/b/o?X-Goog-Signature=abc&X-Goog-Date=20261205",
     "https://storage.googleapis.com/b/o?X-Goog-Signature=%5BREDACTED%5D&X-Goog-Date=20261205"),
    ("https://d111.cloudfront.net/v.mp4?Expires=1&Signature=q~w&Key-Pair-Id=K2",
     "https://d111.cloudfront.net/v.mp4?Expires=1&Signature=%5BREDACTED%5D&Key-Pair-Id=K2"),
    ("/media/cat.png?size=2&v=%2F", "/media/cat.png?size=2&v=%2F"),  # nothing secret: kept as spelled
    ("https://h/p?next=sk-proj-" + "a" * 40, "https://h/p?next=[REDACTED]"),  # a key anywhere, as text
    ("http://[::1", "http://[::1"),  # not a URL: redacted as text
])
def test_a_url_header_loses_its_secret_parameters_and_userinfo(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert clean_headers([("Location", url)]) == [("location", expected)]


# The patterns as `re.sub` applied them with a leading `\b` (before the scan checked the word's start itself):
# the reference the faster scan must agree with, key for key.
_REFERENCE_KEYS = (r"\bsk-[A-Za-z0-9_\-]{20,}", r"\bAIza[0-9A-Za-z_\-]{35,}", r"\bgsk_[A-Za-z0-9]{20,}",
                   r"\bxai-[A-Za-z0-9]{20,}", r"\bhf_[A-Za-z0-9]{20,}",
                   r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]+",
                   r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", r"(?<=Signature=)[0-9a-f]{64}\b", r"\bya29\.[A-Za-z0-9_\-]{20,}")
_REFERENCE_BEARER = r"(?i:\b(bearer\s+))(?=[A-Za-z0-9._~+/\-]*[0-9])[A-Za-z0-9._~+/\-]{16,}=*"
_ESCAPED = r"(?:\b|(?<=\\[nrtbf]))"


def _reference(s, placeholder, escaped: bool):
    keys = "|".join(_ESCAPED + p[2:] if escaped and p.startswith(r"\b") else p for p in _REFERENCE_KEYS)
    bearer = _REFERENCE_BEARER.replace(r"\b(", _ESCAPED + "(", 1) if escaped else _REFERENCE_BEARER
    if isinstance(s, bytes):
        keys, bearer = keys.encode(), bearer.encode()
    s = re.sub(keys, lambda m: placeholder(m.group()), s)
    return re.sub(bearer, lambda m: m.group(1) + placeholder(m.group()[len(m.group(1)):]), s)


_PIECES = ["sk-", "AIza", "gsk_", "xai-", "hf_", "eyJ", "AKIA", "ASIA", "ya29.", "Signature=", "Bearer ", "bearer\t",
           "a" * 20, "Ab3" * 7, "f0" * 32, "1234567890ABCDEF", ".", "-", "_", "x", "é", "日", " ", "\\n", "\\", "n", "=", "9"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=24))
def test_the_scan_finds_what_a_word_anchored_pattern_finds(pieces):
    """Keys inside a word, after a `-` or a `.` inside another key's run, after an escape, beside a
    signature: the scan that skips to the keys' prefixes replaces exactly what `\\b` + the pattern did."""
    text = "".join(pieces)
    tag = FingerprintKey(b"k" * 16).tag
    assert _redact_prefixed(text, tag) == _reference(text, tag, escaped=False)
    data = text.encode()
    btag = lambda secret: tag(secret).encode()  # noqa: E731
    assert _redact_prefixed(data, btag) == _reference(data, btag, escaped=True)


@pytest.mark.parametrize("before", ["eyJ" + "a" * 12 + " ", "-eyJ" + "a" * 12 + "-", "eyJ" + "a" * 12 + ".",
                                    "eyJ" + "a" * 12 + ".eyJ" + "b" * 12 + " ", "xeyJ" + "a" * 3 + "/"])
def test_a_jwt_just_after_a_run_that_is_not_one_is_redacted(before):
    text = before + JWT + " " + before
    assert JWT not in redact_text(text) and JWT.encode() not in redact_bytes(text.encode())
    assert redact_text(text) == _reference(text, lambda _secret: "[REDACTED]", escaped=False)


def test_each_key_pattern_starts_with_its_prefix():
    """The scan only looks where a prefix starts: a pattern without its own would never be matched."""
    starts = iter(_KEY_STARTS)
    for pattern in _KEY_PATTERNS:
        if pattern.startswith("(?:AKIA|ASIA)"):
            assert (next(starts), next(starts)) == ("AKIA", "ASIA")
        else:
            assert pattern.replace("\\", "").startswith(next(starts)), pattern
    assert next(starts, None) is None


@pytest.mark.slow
@pytest.mark.timeout(120)  # quadratic scanning would take hours on these; a linear one takes seconds
@pytest.mark.parametrize("unit", ["ask-", "-sk-", "xeyJ", "-eyJ", "eyJ" + "a" * 12 + ".", "aBearer 1", "Bearer\t",
                                  "xAKIA", "AIza", "Signature=", "ya29.", "\\nsk-"])
def test_a_megabyte_of_near_keys_redacts_in_linear_time(unit):
    body = unit * (1_000_000 // len(unit))
    assert redact_text(body) and redact_bytes(body.encode())
