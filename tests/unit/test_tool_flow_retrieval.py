"""Lexical retrieval indexes and queries the text the near-match score compares: the last user text.

A tool flow ends in a tool result; indexing that (as the stored `last_text` once did) meant a
paraphrased question in a tool flow was never proposed. Stores written that way are re-indexed
when opened.
"""

from __future__ import annotations

import json

import pytest
from entries import TEST_KEY, fingerprints

from semula.core.request.canonical import CanonicalRequest
from semula.core.cascade import NearQuery
from semula.core.settings import ProjectSettings
from semula.engine.engine import Engine
from semula.recordings.entry import Answer, recording_of
from semula.engine.upkeep import SEARCHABLE_TEXT
from semula.providers import adapter_for
from semula.providers.base import RawRequest
from semula.store.duckdb.store import DuckDBStore

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
RESULT = json.dumps({"conditions": "drizzle", "max": 14, "min": 9})  # no word of the question


def openai(body: dict) -> CanonicalRequest:
    raw = RawRequest("POST", "api.openai.com", "/v1/chat/completions", (), {}, json.dumps(body).encode())
    return adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)


def tool_flow(question: str) -> CanonicalRequest:
    return openai({"model": "gpt-4o-mini", "tools": TOOLS, "messages": [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
    ]})


def plain(question: str) -> CanonicalRequest:
    return openai({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}]})


STORED = "Will I need an umbrella in Paris tomorrow, and how warm will it get there"
PARAPHRASE = "Do I need an umbrella in Paris tomorrow, and how warm will it be there"


@pytest.fixture
def engine(tmp_path):
    engine = Engine.open(DuckDBStore.open(tmp_path))
    yield engine
    engine.close()


def record(engine: Engine, request: CanonicalRequest, project: str = "p") -> int:
    return engine.record(recording_of(project, request, ProjectSettings(), Answer(host="api.openai.com", body=b"{}")))


def near(engine: Engine, request: CanonicalRequest, project: str = "p"):
    return engine.searcher.search(NearQuery(project, request, *fingerprints(request), ProjectSettings()))


@pytest.mark.parametrize("build", [tool_flow, plain], ids=["tool_flow", "plain_chat"])
@pytest.mark.parametrize("rebuilt", [False, True], ids=["fresh_scan", "fts_index"])
def test_a_paraphrased_last_user_message_is_proposed_and_queued(engine, build, rebuilt):
    entry = record(engine, build(STORED))
    if rebuilt:
        engine.lexical.maybe_rebuild(wait=True)
    result = near(engine, build(PARAPHRASE))
    assert result.best is not None and result.best.entry_id == entry
    assert result.served is None and [c.entry_id for c in result.queued] == [entry]


def test_the_searchable_text_is_the_last_user_text(engine):
    entry = record(engine, tool_flow(STORED))
    assert engine.store.get_entry(entry).last_text == STORED


def test_an_older_store_is_reindexed_on_open(tmp_path):
    engine = Engine.open(DuckDBStore.open(tmp_path))
    entry = record(engine, tool_flow(STORED))
    # As an older version wrote it: the tool result as the searchable text, no version mark.
    engine.store.set_last_texts([(entry, RESULT)])
    engine.store.set_meta("searchable_text", "1")
    engine.close()
    reopened = Engine.open(DuckDBStore.open(tmp_path))
    try:
        assert reopened.store.get_entry(entry).last_text == STORED
        assert reopened.store.meta("searchable_text") == SEARCHABLE_TEXT
        reopened.lexical.maybe_rebuild(wait=True)
        assert near(reopened, tool_flow(PARAPHRASE)).best.entry_id == entry
    finally:
        reopened.close()
