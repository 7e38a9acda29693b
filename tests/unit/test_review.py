"""engine.review: the queue's rules, on a real temporary store (no proxy)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from entries import chat, new_entry
from semula.calllog.schema import ReviewEvent
from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
from semula.core.cascade import Candidate
from semula.core.nearmatch import Verdict
from semula.engine.engine import Engine
from semula.store.selection import StoreSpec, open_store

REVIEW = Verdict("lexical", 0.8, serve=False, review=True, reason="score 0.80 < serve threshold 1.00")
NOT_REVIEWABLE = Verdict("lexical", 0.3, serve=False, review=False, reason="score 0.30 < serve threshold 1.00")
INCOMING = chat("What is the capital city of France?")
FP, NFP = request_fingerprint(INCOMING), normalised_fingerprint(INCOMING, (), ())


@pytest.fixture(params=["duckdb", "postgres"])
def engine(request, tmp_path):
    events: list[ReviewEvent] = []
    spec = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    engine = Engine.open(open_store(StoreSpec.parse(spec, tmp_path)), review_log=events.append)
    engine.events = events
    yield engine
    engine.close()


def recorded(engine: Engine, *texts: str) -> list[int]:
    return [engine.record(new_entry(chat(text))) for text in texts]


def queue(engine: Engine, ids: list[int], verdict: Verdict = REVIEW, paired: dict[int, str] | None = None):
    candidates = [Candidate(i, verdict) for i in ids]
    return engine.review.queue("p", INCOMING, FP, NFP, candidates, paired or {})


def test_at_most_three_candidates_per_request_and_only_reviewable_ones(engine: Engine) -> None:
    ids = recorded(engine, "one", "two", "three", "four")
    assert queue(engine, ids[:1], NOT_REVIEWABLE) == []
    queued = queue(engine, ids)
    assert [c.entry_id for c in queued] == ids[:3] and all(c.candidate_id for c in queued)
    assert engine.review.has_open("p", NFP)
    assert [e.event for e in engine.events] == ["queued"] * 3


def test_a_pairing_already_queued_or_rejected_is_not_queued_again(engine: Engine) -> None:
    ids = recorded(engine, "one", "two")
    assert queue(engine, ids, paired={ids[0]: "rejected"})[0].entry_id == ids[1]


def test_approve_writes_an_alias_closes_the_others_and_serves_at_once(engine: Engine) -> None:
    ids = recorded(engine, "one", "two")
    first, second = queue(engine, ids)
    result = engine.approve(first.candidate_id)
    assert result["alias_to"] == ids[0] and result["closed"] == [second.candidate_id]
    assert engine.match("p", FP, NFP).tier == "alias"
    assert not engine.review.has_open("p", NFP)
    with pytest.raises(ValueError, match="already approved"):
        engine.approve(first.candidate_id)


def test_reject_is_kept_and_the_request_closes_when_nothing_is_open(engine: Engine) -> None:
    (only,) = queue(engine, recorded(engine, "one"))
    engine.review.reject(only.candidate_id)
    assert engine.store.paired_entries("p", NFP) == {only.entry_id: "rejected"}
    assert not engine.review.has_open("p", NFP)


def test_recording_the_request_itself_closes_its_open_candidates(engine: Engine) -> None:
    queue(engine, recorded(engine, "one"))
    engine.record(new_entry(INCOMING))
    assert not engine.review.has_open("p", NFP)
    assert engine.events[-1].event == "closed"


def test_list_and_show_give_both_texts_and_a_word_diff(engine: Engine) -> None:
    (only,) = queue(engine, recorded(engine, "What is the capital of France?"))
    (row,) = engine.review.list()
    assert row["id"] == only.candidate_id and row["recorded"] == "What is the capital of France?"
    shown = engine.review.show(only.candidate_id)
    assert shown["diff"] == "What is the capital {+city+} of France?"
    with pytest.raises(ValueError, match="no review candidate"):
        engine.review.show(999)


def test_deleting_a_recording_logs_its_open_candidates_closed(engine: Engine) -> None:
    ids = recorded(engine, "one", "two")
    first, second = queue(engine, ids)
    engine.recordings.delete_entry(ids[0])
    closed = [e for e in engine.events if e.event == "closed"]
    assert [e.candidate_id for e in closed] == [first.candidate_id]
    assert engine.review.has_open("p", NFP), "the other candidate is still open"
    engine.recordings.delete_entry(ids[1])
    assert [e.candidate_id for e in engine.events if e.event == "closed"] == [first.candidate_id,
                                                                                      second.candidate_id]
    assert not engine.review.has_open("p", NFP)
    assert {r["status"] for r in engine.review.list(status=None)} == {"closed"}


@pytest.mark.parametrize("cut", [None, 12])
def test_an_open_candidate_is_found_by_the_two_fingerprints(engine: Engine, cut: int | None) -> None:
    ids = recorded(engine, "one", "two")
    first, second = queue(engine, ids)
    recording_fp = engine.store.get_entry(ids[1]).request_fp
    assert engine.review.find_open(NFP[:cut], recording_fp[:cut]) == second.candidate_id


@pytest.mark.parametrize(("request_fp", "recording_fp", "error"), [
    ("fp2:nothing", "", "give both"),
    ("fp2:nothing", "fp", "no open review candidate"),
    (NFP, "fp", "2 open candidates match"),
])
def test_finding_by_fingerprints_says_what_is_wrong(engine: Engine, request_fp: str, recording_fp: str,
                                                     error: str) -> None:
    queue(engine, recorded(engine, "one", "two"))
    with pytest.raises(ValueError, match=error):
        engine.review.find_open(request_fp, recording_fp)


def test_a_miss_names_the_candidate_an_earlier_call_queued(engine: Engine) -> None:
    ids = recorded(engine, "one", "two")
    queue(engine, ids[:1], Verdict("lexical", 0.6, serve=False, review=True, reason="low"))
    (best,) = queue(engine, ids[1:])
    nearest, candidate, recording_fp, _files = engine.miss_context("p", INCOMING, NFP, None)
    assert candidate is not None and candidate.candidate_id == best.candidate_id and candidate.verdict.score == 0.8
    assert recording_fp == engine.store.get_entry(ids[1]).request_fp and nearest
    assert engine.miss_context("p", INCOMING, "fp2:other", None)[1] is None


def test_verdict_events_carry_the_stratum_calibration_counts_them_in(engine: Engine) -> None:
    """Approved and rejected events name the pair's stratum (`verdict_stratum`, as `semula calibrate` computes
    it) and whether calibration learns from them; a guard-blocked candidate never does."""
    from semula.engine.calibrated import project_verdicts

    first, second = queue(engine, recorded(engine, "What is the capital of France?", "Quelle est la capitale ?"))
    engine.approve(first.candidate_id)
    (blocked,) = engine.review.queue("p", chat("Wie heißt die Hauptstadt?"), "fp-de", "nfp-de",
                                     [Candidate(second.entry_id, replace(REVIEW, guard_reason="number 1 ≠ 2"))], {})
    engine.review.reject(blocked.candidate_id)
    events = {(e.event, e.candidate_id): e for e in engine.events}
    assert events["queued", first.candidate_id].stratum is None  # no recording read on the miss path
    assert events["queued", first.candidate_id].calibrates is True  # only the score held it back
    approved, rejected = events["approved", first.candidate_id], events["rejected", blocked.candidate_id]
    assert approved.stratum == "en" and rejected.stratum and rejected.calibrates is False
    assert events["closed", second.candidate_id].stratum is None
    assert approved.calibrates is True
    assert [v.stratum for v in project_verdicts(engine.store, "p")] == [approved.stratum]
