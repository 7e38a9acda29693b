"""The normalised fingerprint against the hand-written request-pair corpus.

``format`` and ``volatile`` pairs must share a normalised fingerprint (the
tier auto-serves them); no ``different`` pair may share one (that would be a
false hit); ``paraphrase`` pairs must differ at the exact tier.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from shared_paths import corpus_file

from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
from semula.providers import RawRequest, adapter_for
from entries import TEST_KEY

CORPUS = corpus_file("dev-pairs.jsonl")
HOSTS = {
    "openai": "api.openai.com",
    "anthropic": "api.anthropic.com",
    "gemini": "generativelanguage.googleapis.com",
}


def _pairs() -> list[dict[str, Any]]:
    if not CORPUS.exists():
        return []
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


PAIRS = _pairs()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not PAIRS, reason=f"request-pair corpus not found at {CORPUS}")]


def _canonical(side: dict[str, Any]):
    host = HOSTS[side["provider"]]
    raw = RawRequest(
        method="POST",
        host=host,
        path=side["path"],
        query=(),
        headers={"content-type": "application/json"},
        body=json.dumps(side["body"], ensure_ascii=False).encode("utf-8"),
    )
    canonical = adapter_for(host, side["path"]).canonicalise(raw, TEST_KEY)
    assert canonical.parsed, f"{side['provider']} {side['path']} was not understood"
    return canonical


def _ids(category: str | None = None, expect: str | None = None) -> list[dict[str, Any]]:
    return [
        p
        for p in PAIRS
        if (category is None or p["category"] == category) and (expect is None or p["expect"] == expect)
    ]


@pytest.mark.parametrize("pair", _ids("format") + _ids("volatile"), ids=lambda p: p["id"])
def test_format_and_volatile_pairs_share_the_normalised_fingerprint(pair: dict[str, Any]) -> None:
    stored, incoming = _canonical(pair["stored"]), _canonical(pair["incoming"])
    assert normalised_fingerprint(stored) == normalised_fingerprint(incoming), pair["note"]


@pytest.mark.parametrize("pair", _ids(expect="different"), ids=lambda p: p["id"])
def test_different_pairs_never_share_the_normalised_fingerprint(pair: dict[str, Any]) -> None:
    stored, incoming = _canonical(pair["stored"]), _canonical(pair["incoming"])
    assert normalised_fingerprint(stored) != normalised_fingerprint(incoming), pair["note"]


@pytest.mark.parametrize("pair", _ids("paraphrase"), ids=lambda p: p["id"])
def test_paraphrase_pairs_differ_at_the_exact_tier(pair: dict[str, Any]) -> None:
    stored, incoming = _canonical(pair["stored"]), _canonical(pair["incoming"])
    assert request_fingerprint(stored) != request_fingerprint(incoming)


def test_corpus_has_every_category() -> None:
    categories = {p["category"] for p in PAIRS}
    assert {"format", "volatile", "paraphrase", "subtle", "shape"} <= categories
