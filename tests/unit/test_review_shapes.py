"""Review never crosses a shape (issue 21): the queue rule as a table, the engine's search and
approval on a real store, and the upgrade that closes the candidates queued before the rule."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import psycopg
import pytest

from entries import TEST_KEY, chat, new_entry
from semula.core.request.canonical import CanonicalRequest, normalised_fingerprint, request_fingerprint
from semula.core.cascade import NearQuery
from semula.core.checks import Shape, shape_differs, shapes_differ
from semula.core.nearmatch import near_match
from semula.core.settings import ProjectSettings
from semula.core.pair import pipeline_outcome
from semula.engine.engine import Engine
from semula.engine.evaluate import decide_pair
from semula.providers import RawRequest, adapter_for
from semula.store.candidate_shapes import closures
from semula.store.duckdb.store import DuckDBStore
from semula.store.selection import StoreSpec, open_store

SETTINGS = ProjectSettings()  # serve at 1.0, review from 0.6
STORED_TEXT = "Please list three quiet hotels near the old harbour for the weekend"
NEAR_TEXT = "Please list three calm hotels near the old harbour for the weekend"


def anthropic(text: str, **body) -> CanonicalRequest:
    payload = {"model": "claude-3-5-haiku-latest", "max_tokens": 256,
               "messages": [{"role": "user", "content": text}], **body}
    raw = RawRequest("POST", "api.anthropic.com", "/v1/messages", (), {"content-type": "application/json"},
                     json.dumps(payload).encode())
    return adapter_for(raw.host, raw.path).canonicalise(raw, TEST_KEY)


STORED = chat(STORED_TEXT)


@pytest.mark.parametrize(("incoming", "reason"), [
    (chat(NEAR_TEXT), None),
    (chat(STORED_TEXT), None),  # the same words: served (the control)
    (anthropic(NEAR_TEXT), "provider differs: openai → anthropic"),
    (anthropic(STORED_TEXT), "provider differs: openai → anthropic"),  # score 1.0, still never paired
    (dataclasses.replace(chat(NEAR_TEXT), endpoint="/v1/completions"),
     "endpoint differs: POST /v1/chat/completions → POST /v1/completions"),
    (dataclasses.replace(chat(NEAR_TEXT), method="PUT"),
     "endpoint differs: POST /v1/chat/completions → PUT /v1/chat/completions"),
    (chat(NEAR_TEXT, stream=True), "stream mode differs: non-stream → stream"),
    (chat(STORED_TEXT, stream=True), "stream mode differs: non-stream → stream"),
    (chat(NEAR_TEXT, model="gpt-4o-mini"), "model differs: gpt-4o → gpt-4o-mini"),
], ids=["same shape", "same words", "provider", "provider at score 1", "endpoint", "method", "stream",
        "stream at score 1", "model"])
def test_a_near_match_across_shapes_is_neither_served_nor_queued(incoming: CanonicalRequest,
                                                                 reason: str | None) -> None:
    verdict = near_match(incoming, STORED, SETTINGS)
    assert shape_differs(incoming, STORED, SETTINGS) == reason
    if reason is None:
        assert verdict.serve or verdict.review, verdict
        return
    assert verdict.score >= SETTINGS.lexical_review_threshold, "close enough that only the shape rules it out"
    assert (verdict.serve, verdict.review) == (False, False), verdict
    assert verdict.reason == reason, "the reason names the field (for the miss message)"


def test_the_embedding_tier_keeps_the_rule_too() -> None:
    settings = ProjectSettings(embedding_review_threshold=0.5)
    verdict = near_match(anthropic(NEAR_TEXT), STORED, settings, tier="embedding", score=0.99)
    assert not verdict.review and verdict.reason.startswith("provider differs")


@pytest.mark.parametrize(("stored", "incoming", "reason"), [
    ({"provider": "openai", "method": "POST", "endpoint": "/v1/chat/completions", "model": "m", "stream": False},
     {"provider": "openai", "method": "POST", "endpoint": "/v1/chat/completions", "model": "m", "stream": False},
     None),
    ({"provider": "openai", "endpoint": "/a", "model": "m"}, {"provider": "anthropic", "endpoint": "/b", "model": "n"},
     "provider differs: openai → anthropic"),  # the first field that differs is named
    ({"provider": "gemini", "endpoint": "/v1beta/models/a:generateContent"},
     {"provider": "gemini", "endpoint": "/v1beta/models/a:streamGenerateContent"},
     "endpoint differs: None /v1beta/models/a:generateContent → None /v1beta/models/a:streamGenerateContent"),
    ({"provider": "openai", "stream": True}, {"provider": "openai"}, "stream mode differs: stream → non-stream"),
    ({"model": None}, {"model": "m"}, "model differs: None → m"),
    ({"model": 3}, {}, None),  # a malformed field reads as missing
])
def test_shapes_from_stored_requests(stored: dict, incoming: dict, reason: str | None) -> None:
    assert shapes_differ(Shape.from_json(incoming), Shape.from_json(stored)) == reason


def test_upgrade_closures_name_why() -> None:
    openai_json, claude_json = json.dumps(chat("hi").to_json()), json.dumps(anthropic("hi").to_json())
    rows = [(1, claude_json, openai_json, None), (2, openai_json, openai_json, None), (3, openai_json, openai_json, 9),
            (4, "not json", openai_json, None), (5, openai_json, None, None)]
    assert closures(rows) == [
        (1, "closed on upgrade: provider differs: openai → anthropic (never queued across shapes)"),
        (3, "closed on upgrade: the request has its own recording #9 (an answered request closes its own)"),
    ]


@pytest.mark.parametrize(("incoming", "action"), [
    (chat(NEAR_TEXT), "review"), (anthropic(STORED_TEXT), "miss"), (chat(NEAR_TEXT, stream=True), "miss"),
])
def test_the_one_cascade_applies_the_rule(incoming: CanonicalRequest, action: str) -> None:
    assert pipeline_outcome(STORED, incoming, SETTINGS).action == action


# ---------------------------------------------------------------- the engine, on a real store


@pytest.mark.parametrize(("incoming", "outcome"), [
    (chat(NEAR_TEXT), "review"), (anthropic(STORED_TEXT), "miss"), (chat(NEAR_TEXT, model="gpt-4o-mini"), "miss"),
])
def test_semula_eval_applies_the_rule(duckdb_engine: Engine, incoming: CanonicalRequest, outcome: str) -> None:
    row = decide_pair(duckdb_engine, "p", STORED, incoming, SETTINGS)
    assert row["outcome"] == outcome, row
    if outcome == "miss":
        assert row["reason"].split(" differs")[0] in ("provider", "model"), row


def _search(engine: Engine, incoming: CanonicalRequest):
    return engine.searcher.search(NearQuery("p", incoming, request_fingerprint(incoming),
                                            normalised_fingerprint(incoming), engine.settings_for("p")))


def test_the_engine_queues_the_same_shape_only(engine: Engine) -> None:
    recorded = engine.record(new_entry(STORED))
    crossed = _search(engine, anthropic(NEAR_TEXT))
    assert crossed.queued == () and crossed.served is None
    assert crossed.best is not None and crossed.best.verdict.reason == "provider differs: openai → anthropic"
    streamed = _search(engine, chat(NEAR_TEXT, stream=True))
    assert streamed.queued == () and "stream mode differs" in streamed.best.verdict.reason
    assert engine.review.list() == []
    same = _search(engine, chat(NEAR_TEXT))
    assert [c.entry_id for c in same.queued] == [recorded]


def test_recording_the_request_closes_the_candidates_its_own_call_queued(engine: Engine) -> None:
    engine.record(new_entry(STORED))
    incoming = chat(NEAR_TEXT)
    assert _search(engine, incoming).queued
    engine.record(new_entry(incoming))  # auto mode: the miss went upstream and its answer is recorded
    assert engine.review.list() == []
    assert {r["status"] for r in engine.review.list(status=None)} == {"closed"}


def test_approving_never_deletes_a_recording(engine: Engine) -> None:
    stored_id = engine.record(new_entry(STORED))
    incoming = chat(NEAR_TEXT)
    (candidate,) = _search(engine, incoming).queued
    # A request recorded without closing its candidates (an older version, another proxy): plant it.
    own_id = engine.store.upsert_entry(new_entry(incoming))
    before = sorted(r["id"] for r in engine.recordings.list_entries())
    assert engine.review.show(candidate.candidate_id)["own_recordings"] == [own_id]
    with pytest.raises(ValueError, match=f"own recording #{own_id}.*kept.*Closed candidate"):
        engine.approve(candidate.candidate_id)
    assert sorted(r["id"] for r in engine.recordings.list_entries()) == before == sorted([stored_id, own_id])
    assert engine.review.list() == [] and engine.store.candidate(candidate.candidate_id).status == "closed"
    assert engine.store.alias_requests("p") == []


def test_a_cross_shape_candidate_left_by_an_older_version_is_never_approved(engine: Engine) -> None:
    stored_id = engine.record(new_entry(STORED))
    _plant(engine.store, anthropic(STORED_TEXT), stored_id)
    engine.review.reload()
    (row,) = engine.review.list()
    assert engine.review.show(row["id"])["shape_differs"] == "provider differs: openai → anthropic"
    with pytest.raises(ValueError, match="different shapes \\(provider differs: openai → anthropic\\)"):
        engine.approve(row["id"])
    assert engine.review.list() == [] and engine.store.alias_requests("p") == []


def test_show_gives_both_shapes_and_a_streams_text(engine: Engine) -> None:
    frames = (b'data: {"choices":[{"delta":{"content":"The Harbour"}}]}\n\n'
              b'data: {"choices":[{"delta":{"content":" Inn."}}]}\n\ndata: [DONE]\n\n')
    streamed = chat(STORED_TEXT, stream=True)
    engine.record(new_entry(streamed, body=frames, streamed=True,
                            headers=[("content-type", "text/event-stream")]))
    (candidate,) = _search(engine, chat(NEAR_TEXT, stream=True)).queued
    shown = engine.review.show(candidate.candidate_id)
    assert shown["answer"] == "The Harbour Inn." and shown["answer_format"] == "text"
    expected = {"provider": "openai", "method": "POST", "endpoint": "/v1/chat/completions", "model": "gpt-4o",
                "stream": True}
    assert shown["request_shape"] == shown["recorded_shape"] == expected
    assert shown["shape_differs"] is None and shown["own_recordings"] == []


# ---------------------------------------------------------------- the upgrade, both stores


def _plant(store, incoming: CanonicalRequest, entry_id: int) -> int:
    (row,) = store.add_candidates("p", request_fingerprint(incoming), normalised_fingerprint(incoming),
                                  incoming.to_json(), incoming.last_user_text(),
                                  [("lexical", 1.0, None, "score 1.00", entry_id)])
    return row.id


def _planted(store) -> dict[str, int]:
    stored_id = store.upsert_entry(new_entry(STORED))
    answered = chat("Please list three calm hotels near the old harbour for Sunday")
    store.upsert_entry(new_entry(answered))
    return {"cross": _plant(store, anthropic(STORED_TEXT), stored_id),
            "stream": _plant(store, chat(NEAR_TEXT, stream=True), stored_id),
            "answered": _plant(store, answered, stored_id),
            "kept": _plant(store, chat(NEAR_TEXT), stored_id)}


def _statuses(store, ids: dict[str, int]) -> dict[str, tuple[str, str]]:
    return {k: (store.candidate(i).status, store.candidate(i).reason) for k, i in ids.items()}


def _check_closed(statuses: dict[str, tuple[str, str]]) -> None:
    assert statuses["cross"] == ("closed", "closed on upgrade: provider differs: openai → anthropic "
                                           "(never queued across shapes)")
    assert statuses["stream"][0] == "closed" and "stream mode differs: non-stream → stream" in statuses["stream"][1]
    assert statuses["answered"][0] == "closed" and "its own recording" in statuses["answered"][1]
    assert statuses["kept"] == ("open", "score 1.00"), "a same-shape candidate stays open"


DUCKDB_MIGRATION = "005_close_cross_shape_candidates"
PG_MIGRATION = "004_close_cross_shape_candidates"


def test_the_duckdb_upgrade_closes_planted_cross_shape_candidates(tmp_path: Path) -> None:
    store = DuckDBStore.open(tmp_path)
    ids = _planted(store)
    store.con.execute("DELETE FROM schema_migrations WHERE name = ?", [DUCKDB_MIGRATION])  # as before the upgrade
    store.close()
    store = DuckDBStore.open(tmp_path)
    first = _statuses(store, ids)
    _check_closed(first)
    decided = store.candidate(ids["cross"]).decided_at
    store.con.execute("DELETE FROM schema_migrations WHERE name = ?", [DUCKDB_MIGRATION])
    store.close()
    store = DuckDBStore.open(tmp_path)  # once more: idempotent
    assert _statuses(store, ids) == first and store.candidate(ids["cross"]).decided_at == decided
    store.close()


def test_the_postgres_upgrade_closes_planted_cross_shape_candidates(pg_url: str, tmp_path: Path) -> None:
    store = open_store(StoreSpec.parse(pg_url, tmp_path))
    ids = _planted(store)
    store.close()
    with psycopg.connect(pg_url) as con:
        con.execute("DELETE FROM schema_migrations WHERE name = %s", [PG_MIGRATION])
    store = open_store(StoreSpec.parse(pg_url, tmp_path))
    first = _statuses(store, ids)
    _check_closed(first)
    store.close()
    with psycopg.connect(pg_url) as con:
        con.execute("DELETE FROM schema_migrations WHERE name = %s", [PG_MIGRATION])
    store = open_store(StoreSpec.parse(pg_url, tmp_path))
    assert _statuses(store, ids) == first
    store.close()
