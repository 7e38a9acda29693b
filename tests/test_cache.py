"""The cache over a real store: index, admin operations, re-fingerprinting on settings changes."""

from __future__ import annotations

import json

import pytest

from semula.cache import Cache
from semula.canonical import normalised_fingerprint, request_fingerprint
from semula.operations import run_operation
from semula.providers import adapter_for
from semula.providers.base import RawRequest
from semula.settings import SettingsError
from semula.store import NewEntry, Store


def canonical(text: str, **params):
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": text}], **params}
    raw = RawRequest("POST", "api.openai.com", "/v1/chat/completions", (), {}, json.dumps(body).encode())
    return adapter_for(raw.host, raw.path).canonicalise(raw)


def record(cache: Cache, text: str, project: str = "p", **params) -> int:
    c = canonical(text, **params)
    settings = cache.settings_for(project)
    return cache.record(NewEntry(
        project, c.provider, "api.openai.com", c.method, c.endpoint, c.model, request_fingerprint(c),
        normalised_fingerprint(c, *settings.fingerprint_inputs), c.to_json(), c.last_text(), 200,
        [("content-type", "application/json")], b'{"ok": true}', False, 1, 2, 3.0))


def lookup(cache: Cache, text: str, project: str = "p", **params):
    c = canonical(text, **params)
    settings = cache.settings_for(project)
    return cache.match(project, request_fingerprint(c), normalised_fingerprint(c, *settings.fingerprint_inputs))


@pytest.fixture
def cache(tmp_path):
    cache = Cache(Store.open(tmp_path))
    yield cache
    cache.close()


def test_tiers_and_projects(cache):
    entry = record(cache, "Summarise run 4711 please")
    assert lookup(cache, "Summarise run 4711 please").tier == "exact"
    assert lookup(cache, "summarise   RUN 4711 please.").tier == "normalised"
    assert lookup(cache, "Summarise run 4711 please", project="other") is None
    assert lookup(cache, "Summarise run 4711 please", temperature=0.5) is None
    assert cache.entry(entry).body == b'{"ok": true}'


def test_scrub_pattern_refingerprints_recordings(cache):
    record(cache, "Summarise run-4711 please")
    assert lookup(cache, "Summarise run-9999 please") is None
    result = cache.config_set("p", "scrub_patterns", '["run-\\\\d+"]')
    assert result["refingerprinted"] == 1
    assert lookup(cache, "Summarise run-9999 please").tier == "normalised"
    # and it survives a restart: the new fingerprints are stored, not only indexed
    assert lookup(Cache(cache.store), "Summarise run-1 please").tier == "normalised"


def test_ignore_params_refingerprints(cache):
    record(cache, "hello", seed=1)
    assert lookup(cache, "hello", seed=2) is None
    cache.config_set("p", "ignore_params", "seed")
    assert lookup(cache, "hello", seed=2).tier == "normalised"


def test_operations_table_and_errors(cache):
    entry = record(cache, "hello")
    assert run_operation(cache, "entries.list", {"project": "p"})[0]["id"] == entry
    assert run_operation(cache, "entries.show", {"id": entry})["request"]["model"] == "gpt-4o"
    with pytest.raises(SettingsError, match="valid settings"):
        run_operation(cache, "config.set", {"project": "p", "key": "nope", "value": "1"})
    with pytest.raises(SettingsError, match="invalid project name"):
        run_operation(cache, "config.show", {"project": "x'; DROP TABLE entries; --"})
    with pytest.raises(ValueError, match="unknown operation"):
        run_operation(cache, "entries.nuke", {})
    assert run_operation(cache, "entries.delete", {"id": entry}) is True
    assert lookup(cache, "hello") is None
