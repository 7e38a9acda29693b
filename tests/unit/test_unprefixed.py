"""Secrets without a prefix: AWS secret access keys and STS session tokens, by label, beside an access
key id, or by shape; and what must never be taken for one (SHAs, UUIDs, identifiers, images)."""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

import pytest

from semula.core import unprefixed
from semula.core.redact import FingerprintKey, clean_headers, redact_bytes, redact_json, redact_query, redact_text
from semula.core.unprefixed import is_secret_label, looks_random

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12"  # AWS's documented example, made 40 with digits
ACCESS_ID = "AKIAIOSFODNN7EXAMPLE"
TEMP_ID = "ASIAY34FZKBOKMUTVV7A"
# A real STS token's opening (the base64 of its binary header), then random base64.
STS = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD" + "kX9pQ2Lm7Rt/Vw+Yb3Nc8Hs1Jf0Ga4" * 12 + "=="
STS_OLD = "FwoGZXIvYXdzEBYaDHqa0AP6pXqY3oJQ8yKGAb" + "h7Lq2Wx9Pv/Tn+4Ms0Rk1Yc6Ze3Bf5Ud8Ja" * 8
STS_OLDEST = "AQoDYXdzEJr" + "Qm3Xo7Kp/Wd9Ln2Rb+Ty6Hc8Vz1Ef4Gj0Us5Ia" * 6
assert len(SECRET) == 40


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a label, in each form users paste: INI, env, export, JSON, YAML, header, code, quotes, any case
        (f"aws_secret_access_key = {SECRET}", "aws_secret_access_key = [REDACTED]"),
        (f"AWS_SECRET_ACCESS_KEY={SECRET}", "AWS_SECRET_ACCESS_KEY=[REDACTED]"),
        (f'export AWS_SECRET_ACCESS_KEY="{SECRET}"', 'export AWS_SECRET_ACCESS_KEY="[REDACTED]"'),
        (f'{{"SecretAccessKey": "{SECRET}"}}', '{"SecretAccessKey": "[REDACTED]"}'),
        (f'{{\\"secretAccessKey\\":\\"{SECRET}\\"}}', '{\\"secretAccessKey\\":\\"[REDACTED]\\"}'),
        (f"secret_access_key: '{SECRET}'", "secret_access_key: '[REDACTED]'"),
        (f"SecretAccessKey:\n  {SECRET}", "SecretAccessKey:\n  [REDACTED]"),
        (f"X-Aws-Secret-Access-Key: {SECRET}", "X-Aws-Secret-Access-Key: [REDACTED]"),
        (f"'aws_secret_key' => '{SECRET}'", "'aws_secret_key' => '[REDACTED]'"),
        (f"AWS_SECRET={SECRET}", "AWS_SECRET=[REDACTED]"),
        # a label takes a short or oddly shaped value too (a fixture's fake secret)
        ("aws_secret_access_key=notarealsecretvalue", "aws_secret_access_key=[REDACTED]"),
        (f"aws_session_token = {STS}", "aws_session_token = [REDACTED]"),
        (f'"SessionToken": "{STS_OLD}"', '"SessionToken": "[REDACTED]"'),
        ("X-Amz-Security-Token: FwoGZXIvYXdzEJrshortish123", "X-Amz-Security-Token: [REDACTED]"),
        # beside an access key id: a credentials CSV, whatever the run's shape
        (f"User,Access key ID,Secret access key\nbob,{ACCESS_ID},{SECRET}",
         "User,Access key ID,Secret access key\nbob,[REDACTED],[REDACTED]"),
        (f"{ACCESS_ID} abcdefghijklmnopqrstuvwxyzabcdefghijklmn", "[REDACTED] [REDACTED]"),
        (f"abcdefghijklmnopqrstuvwxyzabcdefghijklmn and {TEMP_ID}", "[REDACTED] and [REDACTED]"),
        # by shape alone
        (f"here it is: {SECRET}.", "here it is: [REDACTED]."),
        (f"key={SECRET}&x=1", "key=[REDACTED]&x=1"),
        # session tokens by their start, raw or quoted in a URL
        (f"token {STS} end", "token [REDACTED] end"),
        (f"t={STS_OLDEST}", "t=[REDACTED]"),
        ("u?X=" + STS.replace("/", "%2F").replace("+", "%2B").replace("=", "%3D"), "u?X=[REDACTED]"),
    ],
)
def test_unprefixed_secrets_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_bytes(text.encode()) == expected.encode()


PNG = "data:image/png;base64," + base64.b64encode(random.Random(7).randbytes(30_000)).decode()
WRAPPED = base64.encodebytes(random.Random(8).randbytes(57 * 4 + 30)).decode()  # MIME lines, last one 40 chars


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f2a9c1d0e8b7a6f5e4d3c2b1a0f9e8d7c6b5a49 fixed it",  # git SHA
        "3F2A9C1D0E8B7A6F5E4D3C2B1A0F9E8D7C6B5A49",
        "3F2a9C1d0E8b7A6f5E4d3C2b1A0f9E8d7C6b5A49",  # mixed-case hex
        "id 123e4567-e89b-12d3-a456-426614174000 and 9b2c1f0e-4a3d-4c5b-8e7f-6a5b4c3d2e1f",
        "BetaAsyncAbstractComputerToolset20260801",  # identifiers, paths from real code
        "fontInfoOpenTypeOS2CodePageRangesOptions",
        "see github.com/HypothesisWorks/hypothesis/pull/4266",
        "hg.python.org/cpython/file/603b4d593758/Lib/socket.py",
        "V1OrganizationExternalKeysPostRequestAws",
        f"prefix_{SECRET}", f"{SECRET}-suffix", f"{SECRET}=",  # not isolated
        SECRET[:39], SECRET + "Q",  # 39, 41 characters
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN",  # no digit
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaAAAAAAAAAA11",  # low entropy
        PNG,
        WRAPPED,
        "The session token expires after an hour; rotate the secret key weekly.",
        "aws_secret_access_key = ${AWS_SECRET}",  # a reference, not a value
        "secret_key_base: 42",
        "Paris is the capital of France, and AKIA is how AWS access key ids start.",
    ],
)
def test_near_misses_are_left_alone(text: str) -> None:
    assert redact_text(text) == text
    assert redact_bytes(text.encode()) == text.encode()


def test_the_wrapped_base64_guard_really_sees_a_40_character_last_line() -> None:
    assert len(WRAPPED.splitlines()[-1]) == 40 and looks_random(WRAPPED.splitlines()[-1])


def test_an_access_key_id_reaches_only_so_far() -> None:
    far = f"{ACCESS_ID} " + "word " * 60 + "abcdefghijklmnopqrstuvwxyzabcdefghijklmn"
    assert redact_text(far) == "[REDACTED] " + "word " * 60 + "abcdefghijklmnopqrstuvwxyzabcdefghijklmn"


def test_json_members_named_as_secrets_and_beside_an_id() -> None:
    value = {"Credentials": {"AccessKeyId": TEMP_ID, "SecretAccessKey": "shortButNamed12345",
                             "SessionToken": STS, "Expiration": "2030-01-01T00:00:00Z"},
             "pair": {"id": ACCESS_ID, "s": "abcdefghijklmnopqrstuvwxyzabcdefghijklmn", "sha": "a" * 40},
             "x-amz-security-token": "IQoJshortvalue1234", "note": "secret key rotation"}
    out = redact_json(value)
    assert out["Credentials"] == {"AccessKeyId": "[REDACTED]", "SecretAccessKey": "[REDACTED]",
                                  "SessionToken": "[REDACTED]", "Expiration": "2030-01-01T00:00:00Z"}
    assert out["pair"] == {"id": "[REDACTED]", "s": "[REDACTED]", "sha": "a" * 40}
    assert out["x-amz-security-token"] == "[REDACTED]" and out["note"] == "secret key rotation"


@pytest.mark.parametrize(("name", "is_label"), [
    ("SecretAccessKey", True), ("aws_secret_access_key", True), ("AWS_SECRET", True), ("sessionToken", True),
    ("x-amz-security-token", True), ("secret", False), ("session", False), ("secret_key_base", False),
])
def test_secret_labels(name: str, is_label: bool) -> None:
    assert is_secret_label(name) is is_label


def test_tags_are_deterministic_and_tell_secrets_apart() -> None:
    key = FingerprintKey(b"s" * 32)
    other = SECRET[::-1]
    a, b, c = (redact_text(f"creds {s}", key) for s in (SECRET, SECRET, other))
    assert a == b != c and SECRET not in a and a.startswith("creds [REDACTED:")
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG}}]}]}
    assert redact_json(body, key) == body  # an image's bytes, so its fingerprint, are untouched


def test_query_and_header_values_are_redacted() -> None:
    assert redact_query([("key", "x"), ("creds", SECRET), ("alt", "sse")]) == [("creds", "[REDACTED]"), ("alt", "sse")]
    assert clean_headers([("X-Debug", f"aws_session_token={STS}")]) == [("x-debug", "aws_session_token=[REDACTED]")]


def test_random_keys_are_found_by_shape_alone() -> None:
    rng = random.Random(34)
    alphabet = string.ascii_letters + string.digits + "+/"
    keys = ["".join(rng.choice(alphabet) for _ in range(40)) for _ in range(5000)]
    missed = [k for k in keys if redact_text(f"the key is {k} ok") == f"the key is {k} ok"]
    assert len(missed) / len(keys) < 0.01, missed[:5]  # ~0.5 %: no digit, or many lowercase pairs


def _strings(value: object):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_no_false_positive_over_the_prompt_corpora() -> None:
    data = Path(__file__).resolve().parents[1] / "data"
    texts = [s for f in sorted(data.glob("*.jsonl")) for line in f.read_text("utf-8").splitlines()
             for s in _strings(json.loads(line))]
    assert len(texts) > 10_000
    changed = [t[:120] for t in texts if redact_text(t) != t]
    assert changed == []


@pytest.mark.slow
@pytest.mark.timeout(120)  # a backtracking pattern would take hours on these; linear ones take seconds
def test_multi_megabyte_adversarial_bodies_stay_linear() -> None:
    shapes = ["a" * 1_000_000, ("A1b/" * 10 + " ") * 25_000, "secret_access_key=" * 60_000,
              ("aws_session_token: " + "a" * 15 + " ") * 29_000, "IQoJb3JpZ2lu" * 90_000,
              (ACCESS_ID + " abcdefghijklmnopqrstuvwxyzabcdefghijklmn ") * 17_000, PNG * 25,
              ("x" * 39 + "/") * 25_000]
    calls = 0
    original = unprefixed.looks_random

    def counted(run: str) -> bool:
        nonlocal calls
        calls += 1
        return original(run)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(unprefixed, "looks_random", counted)
        for body in shapes:
            assert len(body) >= 1_000_000
            redact_text(body)
            redact_bytes(body.encode())
    # the per-run Python check runs once per isolated 40-character run, never per character
    assert calls <= 2 * sum(len(b) // 41 + 1 for b in shapes)
