"""Secrets in prompts: different secrets never share a fingerprint, and none reaches the store.

Each secret is redacted to a tag keyed by the store's salt (`FingerprintKey`); the salt lives
in the store's `meta` table (migration 004_meta), and a store fingerprinted under fp1 is
re-fingerprinted when an engine opens it.
"""

from __future__ import annotations

import json

import pytest
from entries import TEST_KEY, chat, fingerprints, new_entry

from semula.core.request.canonical import FINGERPRINT_VERSION, normalised_fingerprint, request_fingerprint
from semula.core.redact import REDACTED, FingerprintKey, redact_text
from semula.engine.engine import Engine
from semula.recordings.entry import Answer, recording_of
from semula.core.settings import ProjectSettings
from semula.store.duckdb.store import STORE_FILE, DuckDBStore

# Two JWTs of the same shape (header.payload.signature), differing only in the payload's subject.
JWT_A = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSIsImlhdCI6MTcwMDAwMDAwMH0.c2lnbmF0dXJlLWFsaWNlLTAwMQ"
JWT_B = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2JieSIsImlhdCI6MTcwMDAwMDAwMH0.c2lnbmF0dXJlLWJvYmJ5LTAwMQ"
SK_A = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
SK_B = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2


def prompt(secret: str) -> str:
    return f"Decode this token and tell me who it is for: {secret}"


@pytest.mark.parametrize(("a", "b"), [(JWT_A, JWT_B), (SK_A, SK_B)])
def test_different_secrets_never_share_a_fingerprint(a: str, b: str) -> None:
    fp_a, nfp_a = fingerprints(chat(prompt(a)))
    fp_b, nfp_b = fingerprints(chat(prompt(b)))
    assert fp_a != fp_b and nfp_a != nfp_b
    assert (fp_a, nfp_a) == fingerprints(chat(prompt(a)))  # the same secret still matches itself
    # also where the secret is a bearer token in the text, and in a second position of the prompt
    assert fingerprints(chat(f"curl -H 'Authorization: Bearer {a}'")) != fingerprints(
        chat(f"curl -H 'Authorization: Bearer {b}'"))
    assert fingerprints(chat(f"{a} then {a}")) != fingerprints(chat(f"{a} then {b}"))


def test_the_fingerprint_version_is_2() -> None:
    c = chat(prompt(JWT_A))
    assert FINGERPRINT_VERSION == "fp2"
    assert request_fingerprint(c).startswith("fp2:") and normalised_fingerprint(c).startswith("nfp2:")


def test_the_salt_changes_fingerprints_of_requests_with_a_secret_only() -> None:
    other = FingerprintKey(bytes(range(1, 33)))
    assert fingerprints(chat(prompt(JWT_A))) != fingerprints(chat(prompt(JWT_A), key=other))
    assert fingerprints(chat("no secret here")) == fingerprints(chat("no secret here", key=other))


def test_the_placeholder_holds_a_keyed_tag_not_the_secret() -> None:
    c = chat(prompt(JWT_A))
    tag = TEST_KEY.tag(JWT_A)
    assert c.last_user_text() == prompt(tag)
    assert tag.startswith("[REDACTED:") and len(tag) == len("[REDACTED:]") + 16
    assert JWT_A not in json.dumps(c.to_json())
    # Logs and the console keep the plain placeholder; the key's repr never shows the salt.
    assert redact_text(prompt(JWT_A)) == prompt(REDACTED)
    assert bytes(range(32)).hex() not in repr(TEST_KEY) and "salt" not in repr(TEST_KEY)
    with pytest.raises(ValueError):
        FingerprintKey(b"short")


def test_the_normalised_tier_keeps_the_tag_unless_a_scrub_pattern_takes_it() -> None:
    a, b = chat(prompt(JWT_A)), chat(prompt(JWT_B))
    # The tag is not hex, so no volatile-value rule scrubs it as an id.
    assert normalised_fingerprint(a) != normalised_fingerprint(b)
    # A test that mints a new token per run scrubs the placeholder to match again (normalised tier).
    pattern = [r"\[REDACTED:[a-z2-7]+\]"]
    assert normalised_fingerprint(a, pattern) == normalised_fingerprint(b, pattern)


def test_the_store_makes_one_salt_and_keeps_it(tmp_path) -> None:
    store = DuckDBStore.open(tmp_path / "one")
    salt = store.fingerprint_salt()
    assert len(salt) == 32
    engine = Engine.open(store)
    assert engine.fingerprint_key == FingerprintKey(salt)
    engine.close()
    again = DuckDBStore.open(tmp_path / "one")
    assert again.fingerprint_salt() == salt
    assert DuckDBStore.open(tmp_path / "two").fingerprint_salt() != salt
    again.close()
    # A caller may bring its own key (the salt will move into a committed recordings folder).
    assert Engine.open(DuckDBStore.open(tmp_path / "three"), key=TEST_KEY).fingerprint_key is TEST_KEY


def test_recording_with_a_secret_hits_only_with_that_secret_and_stores_no_secret(tmp_path) -> None:
    engine = Engine.open(DuckDBStore.open(tmp_path))
    key = engine.fingerprint_key
    stored = chat(prompt(JWT_A), key=key)
    engine.record(recording_of("p", stored, ProjectSettings(), Answer(host="api.openai.com", body=b'{"answer": "alice"}')))
    assert engine.match("p", *fingerprints(chat(prompt(JWT_A), key=key))).tier == "exact"
    assert engine.match("p", *fingerprints(chat(prompt(JWT_B), key=key))) is None
    assert engine.match("p", *fingerprints(chat(f"  decode this token and tell me who it is for: {JWT_A}.",
                                                key=key))).tier == "normalised"
    canonical, last_text = engine.store.con.execute("SELECT canonical, last_text FROM entries").fetchone()
    assert key.tag(JWT_A) in canonical and JWT_A not in canonical and JWT_A not in last_text
    engine.close()
    raw = (tmp_path / STORE_FILE).read_bytes()
    for part in JWT_A.split("."):
        assert part.encode() not in raw


def test_an_fp1_store_is_refingerprinted_on_open(tmp_path) -> None:
    store = DuckDBStore.open(tmp_path)
    key = FingerprintKey(store.fingerprint_salt())
    plain = chat("no secret in here", key=key)
    secret = chat(prompt(JWT_A), key=key)
    # As fp1 stored them: the secret a bare [REDACTED], the fingerprints under the old prefixes.
    old = json.loads(json.dumps(secret.to_json()).replace(key.tag(JWT_A), REDACTED))
    plain_id = store.upsert_entry(new_entry(plain, request_fp="fp1:plain", normalised_fp="nfp1:plain"))
    secret_id = store.upsert_entry(new_entry(secret, request_fp="fp1:secret", normalised_fp="nfp1:secret",
                                             canonical=old))
    store.add_candidates("p", "fp1:x", "nfp1:x", plain.to_json(), "no secret in here",
                         [("lexical", 0.9, None, None, secret_id)])
    store.replace_aliases("p", [("nfp1:alias", plain_id, chat("alias request", key=key).to_json())])
    assert store.fingerprint_version() is None
    engine = Engine.open(store)
    assert store.fingerprint_version() == FINGERPRINT_VERSION
    assert engine.match("p", *fingerprints(plain)).entry_id == plain_id
    assert engine.match("p", *fingerprints(secret)) is None  # its secret is gone: it cannot be told apart
    assert {fp[:4] for _, _, fp, nfp in store.index_rows() for fp in (fp, nfp)} == {"fp2:", "nfp2"}
    assert store.candidates("p")[0].request_normalised_fp == fingerprints(plain)[1]
    assert engine.match("p", "fp2:none", fingerprints(chat("alias request", key=key))[1]).entry_id == plain_id
    assert engine.recordings.upgrade_fingerprints() == 0  # once only
    engine.close()


# A recorded answer's secrets are tagged under the recording's key, so a client that echoes what it
# was served (a tool's result, a key the model wrote) sends back what the recorded follow-up carried.
ANSWERS = [
    pytest.param(json.dumps({"choices": [{"message": {"content": prompt(SK_A)}}]}).encode(), id="json"),
    pytest.param(("data: " + json.dumps({"delta": {"content": prompt(SK_A)}}) + "\n\ndata: [DONE]\n\n").encode(),
                 id="sse"),
    pytest.param(json.dumps({"content": f"curl -H 'Authorization: Bearer {JWT_A}'"}).encode(), id="bearer"),
]


@pytest.mark.parametrize("body", ANSWERS)
def test_a_recorded_answer_tags_its_secrets_under_the_recordings_key(body: bytes) -> None:
    secret = JWT_A if b"Bearer" in body else SK_A
    entry = recording_of("p", chat("hi"), ProjectSettings(), Answer(host="api.openai.com", body=body), key=TEST_KEY)
    assert secret.encode() not in entry.body and TEST_KEY.tag(secret).encode() in entry.body
    # Without a key (and in logs), the plain placeholder; a tagged one is left as it is.
    assert REDACTED.encode() in recording_of("p", chat("hi"), ProjectSettings(),
                                             Answer(host="api.openai.com", body=body)).body
    assert recording_of("p", chat("hi"), ProjectSettings(), Answer(host="h", body=entry.body), key=TEST_KEY).body \
        == entry.body


def test_a_follow_up_echoing_a_replayed_answer_fingerprints_as_the_recorded_one() -> None:
    answer = json.dumps({"output": f"weather: sunny, token {SK_A} (call 1)"}).encode()
    served = recording_of("p", chat("hi"), ProjectSettings(), Answer(host="h", body=answer), key=TEST_KEY).body
    echoed = json.loads(served)["output"]
    assert SK_A not in echoed
    # Recording: the client sent the real token back; replay: it sends the tagged one it was served.
    assert fingerprints(chat(f"tool said: weather: sunny, token {SK_A} (call 1)")) == fingerprints(
        chat(f"tool said: {echoed}"))
    # An old recording's plain placeholder still loads and stays as it was.
    old = json.dumps({"output": f"token {REDACTED}"}).encode()
    assert recording_of("p", chat("hi"), ProjectSettings(), Answer(host="h", body=old), key=TEST_KEY).body == old
