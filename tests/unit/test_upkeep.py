"""Opening a store written by an older version recomputes the data derived from stored requests."""

from __future__ import annotations

import json

from entries import TEST_KEY, fingerprints

from semula.core.settings import ProjectSettings
from semula.engine.engine import Engine
from semula.recordings.entry import Answer, recording_of
from semula.engine.upkeep import NORMALISED_VIEW
from semula.providers import adapter_for
from semula.providers.base import RawRequest
from semula.store.duckdb.store import DuckDBStore


def chat(**params):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Name a famous bridge"}], **params}
    raw = RawRequest("POST", "api.openai.com", "/v1/chat/completions", (), {}, json.dumps(body).encode())
    return adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)


def test_normalised_fingerprints_are_recomputed_when_the_view_changed(tmp_path):
    engine = Engine.open(DuckDBStore.open(tmp_path))
    entry = engine.record(recording_of("p", chat(temperature=0.0, n=1), ProjectSettings(), Answer(host="h", body=b"{}")))
    engine.store.set_normalised_fps([(entry, "nfp1:as-an-older-version-computed-it")])
    engine.store.set_meta("normalised_view", "1")
    engine.close()
    reopened = Engine.open(DuckDBStore.open(tmp_path))
    try:
        incoming = chat(temperature=0)
        match = reopened.match("p", *fingerprints(incoming))
        assert match is not None and (match.tier, match.entry_id) == ("normalised", entry)
        assert reopened.store.meta("normalised_view") == NORMALISED_VIEW
    finally:
        reopened.close()


def test_an_up_to_date_store_is_left_alone(tmp_path):
    Engine.open(DuckDBStore.open(tmp_path)).close()
    engine = Engine.open(DuckDBStore.open(tmp_path))
    try:
        entry = engine.record(recording_of("p", chat(), ProjectSettings(), Answer(host="h", body=b"{}")))
        engine.store.set_normalised_fps([(entry, "nfp1:kept")])
        engine.close()
        engine = Engine.open(DuckDBStore.open(tmp_path))
        assert engine.store.get_entry(entry).normalised_fp == "nfp1:kept"
    finally:
        engine.close()
