"""The raw-request fast path's pure rules (`core.fasthit`): key, eligibility, what is remembered, when it stands."""

from __future__ import annotations

import pytest

from semula.core.cascade import Outcome
from semula.core.decision import Bypass, Match, decide
from semula.core.request.ignore import IgnoreRules
from semula.core.fasthit import FastHit, fast_key, fast_outcome, fast_path_off, remember, still_stands
from semula.core.modes import Mode

BODY = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
BASE = dict(project="default", method="POST", host="api.openai.com", path="/v1/chat/completions", query=(),
            headers=(), body=BODY)
INPUTS = (("\\d+",), (), ())


@pytest.mark.parametrize("change", [
    {"project": "other"},
    {"project": "default.k0123456789ab"},  # namespace_by_key: another API key
    {"method": "PUT"},
    {"host": "api.anthropic.com"},
    {"path": "/v1/responses"},
    {"query": (("api-version", "2024-10-21"),)},
    {"headers": (("openai-beta", ("assistants=v2",)),)},
    {"body": BODY + b" "},
    {"body": BODY.replace(b"hi", b"ho")},
])
def test_every_input_of_the_canonical_request_changes_the_key(change):
    assert fast_key(**{**BASE, **change}) != fast_key(**BASE)


def test_the_key_is_stable_and_holds_no_secret():
    secret = b'{"api_key":"sk-live-abcdefghijklmnop"}'
    key = fast_key(**{**BASE, "body": secret})
    assert key == fast_key(**{**BASE, "body": secret})
    assert key[0] == "default" and b"sk-live" not in key[1] and len(key[1]) == 20


def test_parts_cannot_slide_into_each_other():
    assert fast_key(**{**BASE, "path": "/a", "body": b"b"}) != fast_key(**{**BASE, "path": "/ab", "body": b""})
    one = fast_key(**{**BASE, "headers": (("anthropic-beta", ("a", "b")),)})
    assert one != fast_key(**{**BASE, "headers": (("anthropic-beta", ("a,b",)),)})


OFF = dict(no_cache=False, sequence_repeats=False, content_encoding="", body_bytes=100, max_body_bytes=1000)


@pytest.mark.parametrize("mode, change, why", [
    (Mode.AUTO, {}, None),
    (Mode.REPLAY, {}, None),
    (Mode.RECORD, {}, "record mode"),
    (Mode.PASSTHROUGH, {}, "passthrough mode"),
    (Mode.REPLAY, {"no_cache": True}, "bypass header"),
    (Mode.AUTO, {"sequence_repeats": True}, "ordered repeats"),
    (Mode.AUTO, {"content_encoding": "gzip"}, "encoded body"),
    (Mode.AUTO, {"content_encoding": "  "}, None),
    (Mode.AUTO, {"body_bytes": 1001}, "large body"),
])
def test_when_the_fast_path_is_off(mode, change, why):
    assert fast_path_off(mode, **{**OFF, **change}) == why


def hit(tier: str = "exact", entry: int = 7, normalised: str | None = None, **extra) -> Outcome:
    return Outcome(decide(Mode.REPLAY, Match(tier, entry)), "fp2:a", normalised, **extra)


@pytest.mark.parametrize("mode, outcome, remembered", [
    (Mode.REPLAY, hit(), True),
    (Mode.AUTO, hit("normalised", normalised="nfp2:b"), True),
    (Mode.REPLAY, hit("alias", normalised="nfp2:b"), True),
    (Mode.REPLAY, hit("lexical", normalised="nfp2:b"), False),  # near tiers: never
    (Mode.REPLAY, hit("embedding", normalised="nfp2:b"), False),
    (Mode.REPLAY, hit(occurrence=2), False),  # a sequence's later answer
    (Mode.REPLAY, hit(exhausted="past the last answer"), False),
    (Mode.RECORD, hit(), False),
    (Mode.REPLAY, Outcome(decide(Mode.REPLAY, None, Bypass("no_cache_header", "header")), "fp2:a"), False),
    (Mode.AUTO, Outcome(decide(Mode.AUTO, None), "fp2:a", "nfp2:b"), False),  # a miss
    (Mode.AUTO, Outcome(decide(Mode.AUTO, Match("exact", 7), None, "disk gone"), "fp2:a"), False),  # store problem
    (Mode.REPLAY, Outcome(decide(Mode.REPLAY, Match("exact", 7)), None), False),
])
def test_what_is_remembered(mode, outcome, remembered):
    got = remember(mode, outcome, "openai", "gpt-4o", INPUTS)
    assert (got is not None) == remembered
    if got is not None:
        assert (got.match.tier, got.match.entry_id, got.request_fp) == (outcome.decision.tier, 7, "fp2:a")
        assert got.normalised_fp == outcome.normalised_fp
        assert got.fingerprint_inputs == INPUTS


EXACT = FastHit(Match("exact", 7), "fp2:a", None, INPUTS, "openai", "gpt-4o")
NORMALISED = FastHit(Match("normalised", 7), "fp2:a", "nfp2:b", INPUTS, "openai", "gpt-4o")


@pytest.mark.parametrize("remembered, current, inputs, stands", [
    (EXACT, Match("exact", 7), INPUTS, True),
    (EXACT, Match("exact", 7), ((), (), (), IgnoreRules(("run.id",))), False),  # `ignore` feeds the exact one
    (EXACT, None, INPUTS, False),  # the entry was deleted
    (EXACT, Match("exact", 8), INPUTS, False),  # re-recorded under a new id
    (NORMALISED, Match("normalised", 7), INPUTS, True),
    (NORMALISED, Match("exact", 9), INPUTS, False),  # a new exact recording shadows it
    (NORMALISED, Match("normalised", 7), ((), ("seed",), ()), False),  # the project's fingerprint inputs changed
    (FastHit(Match("alias", 7), "fp2:a", "nfp2:b", INPUTS, "openai", None), None, INPUTS, False),  # alias removed
])
def test_a_remembered_hit_stands_only_while_the_canonical_lookup_agrees(remembered, current, inputs, stands):
    assert still_stands(remembered, current, inputs) is stands


def test_the_fast_outcome_is_the_cascades_decision_on_the_same_match():
    for mode in (Mode.AUTO, Mode.REPLAY):
        outcome = fast_outcome(mode, NORMALISED)
        assert outcome.decision == decide(mode, Match("normalised", 7))
        assert (outcome.request_fp, outcome.normalised_fp, outcome.occurrence) == ("fp2:a", "nfp2:b", 1)
