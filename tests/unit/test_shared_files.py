"""Aliases, rejections and project settings travel in the recordings folder (recordings.shared)."""

from __future__ import annotations

import json
from pathlib import Path

from entries import chat, new_entry
from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
from semula.core.cascade import Candidate
from semula.core.nearmatch import Verdict
from semula.core.repeats import sequenced
from semula.engine.engine import Engine
from semula.recordings.folder import RecordingsFolder, check
from semula.store.duckdb.store import DuckDBStore

REVIEW = Verdict("lexical", 0.8, serve=False, review=True, reason="score 0.80 < serve threshold 1.00")
INCOMING = chat("What is the capital city of France?")
FP, NFP = request_fingerprint(INCOMING), normalised_fingerprint(INCOMING, (), ())


def engine_at(tmp_path: Path, data: str) -> Engine:
    return Engine.open(DuckDBStore.open(tmp_path / data), folder=RecordingsFolder(tmp_path / "rec", tmp_path / data))


def queued(engine: Engine, *texts: str) -> list[Candidate]:
    ids = [engine.record(new_entry(chat(text))) for text in texts]
    return engine.review.queue("p", INCOMING, FP, NFP, [Candidate(i, REVIEW) for i in ids], {})


def test_an_approval_reaches_a_clean_clone(tmp_path: Path) -> None:
    mine = engine_at(tmp_path, "mine")
    (candidate,) = queued(mine, "What is the capital of France?")
    mine.approve(candidate.candidate_id)
    (alias,) = (tmp_path / "rec" / "p" / "_aliases").glob("*.json")
    data = json.loads(alias.read_text())
    assert data["format"] == "semula-alias/1" and data["recording"].startswith("p/openai/")
    assert (tmp_path / "rec" / data["recording"]).exists()
    mine.close()

    ci = engine_at(tmp_path, "ci")
    assert ci.sync_report.shared.aliases == 1
    match = ci.match("p", FP, NFP)
    assert match is not None and match.tier == "alias"
    assert ci.store.get_entry(match.entry_id).body == b'{"ok": true}'
    ci.close()
    again = engine_at(tmp_path, "ci")  # nothing new the second time
    assert again.sync_report.shared.aliases == 0 and again.match("p", FP, NFP).tier == "alias"
    again.close()


def test_a_rejection_reaches_a_clean_clone_once(tmp_path: Path) -> None:
    mine = engine_at(tmp_path, "mine")
    (candidate,) = queued(mine, "What is the capital of Spain?")
    mine.review.reject(candidate.candidate_id)
    assert len(list((tmp_path / "rec" / "p" / "_rejections").glob("*.json"))) == 1
    mine.close()

    ci = engine_at(tmp_path, "ci")
    assert ci.sync_report.shared.rejections == 1
    assert list(ci.store.paired_entries("p", NFP).values()) == ["rejected"]
    ci.close()
    again = engine_at(tmp_path, "ci")
    assert again.sync_report.shared.rejections == 0 and len(again.store.paired_entries("p", NFP)) == 1
    again.close()


def test_settings_reach_a_clone_and_refingerprint_its_recordings(tmp_path: Path) -> None:
    mine = engine_at(tmp_path, "mine")
    mine.record(new_entry(chat("Order 12345 shipped?")))
    mine.recordings.config_set("p", "scrub_patterns", ["[0-9]{5}"])
    settings = json.loads((tmp_path / "rec" / "p" / "_settings.json").read_text())
    assert settings["settings"] == {"scrub_patterns": ["[0-9]{5}"]}
    mine.close()

    ci = engine_at(tmp_path, "ci")
    assert ci.settings_for("p").scrub_patterns == ("[0-9]{5}",)
    other = chat("Order 99999 shipped?")
    nfp = normalised_fingerprint(other, *ci.settings_for("p").fingerprint_inputs)
    assert ci.match("p", request_fingerprint(other), nfp).tier == "normalised"
    ci.close()


def test_a_bad_shared_file_is_skipped_and_named(tmp_path: Path) -> None:
    (tmp_path / "rec" / "p" / "_aliases").mkdir(parents=True)
    (tmp_path / "rec" / "p" / "_aliases" / "x.json").write_text("{ nope")
    ci = engine_at(tmp_path, "ci")
    assert [rel for rel, _ in ci.sync_report.shared.bad] == ["p/_aliases/x.json"]
    assert [rel for rel, _ in check(tmp_path / "rec")[1]] == ["p/_aliases/x.json"]
    ci.close()


def test_refingerprinting_keeps_the_nth_answer_of_a_sequence(tmp_path: Path) -> None:
    engine = engine_at(tmp_path, "mine")
    request = chat("Order 12345 shipped?")
    first = new_entry(request)
    engine.record(first)
    engine.record(new_entry(request, request_fp=sequenced(first.request_fp, 2),
                            normalised_fp=sequenced(first.normalised_fp, 2), body=b'{"n": 2}'))
    engine.recordings.config_set("p", "scrub_patterns", ["[0-9]{5}"])
    fps = sorted(fp for _, _, _, fp in engine.store.index_rows())
    assert fps[1] == f"{fps[0]}#2"
    engine.close()
