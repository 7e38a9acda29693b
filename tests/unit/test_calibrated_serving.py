"""Calibrated serve mode end to end in one process: near_match's calibrated verdict, the cascade
learning its threshold from verdicts in a real store, and `semula calibrate` on that store."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from entries import chat, fingerprints, new_entry
from semula.cli import main
from semula.core.cascade import cascade, run_now
from semula.core.modes import Mode
from semula.core.nearmatch import near_match
from semula.core.settings import ProjectSettings
from semula.engine.engine import Engine
from semula.engine.evaluate import EngineLookups
from semula.store.selection import StoreSpec, open_store

STORED = "How can I reset the password of my account on the website?"
ABOVE = "How can I reset the password of my account on the website quickly?"  # Dice 0.96
BELOW = "How do I change the password on my website account?"  # Dice 0.73
NUMBER = "How can I reset the password of my 2 accounts on the website?"  # the guard's refusal
CALIBRATED = ProjectSettings(near_serve="calibrated", max_false_hit_rate=0.1)


@pytest.mark.parametrize("text, learnt, served, reason", [
    (ABOVE, 0.8, True, None),
    (ABOVE, None, False, "calibrated: too few lexical verdicts in stratum en"),
    (BELOW, 0.8, False, "(learnt for en)"),
    (NUMBER, 0.5, False, "guard:"),  # calibration lifts the score bar, never the guard
    ("How can I reset the password for my account on the website?", 0.5, False, "small edit"),
])
def test_the_calibrated_verdict(text: str, learnt: float | None, served: bool, reason: str | None) -> None:
    verdict = near_match(chat(text), chat(STORED), CALIBRATED, learnt_thresholds=None if learnt is None else {"en": learnt})
    assert verdict.serve is served and verdict.calibrated is served
    assert (verdict.reason is None) if reason is None else (reason in verdict.reason)


def test_threshold_mode_ignores_a_learnt_threshold() -> None:
    verdict = near_match(chat(ABOVE), chat(STORED), ProjectSettings(), learnt_thresholds={"en": 0.5})
    assert not verdict.serve and verdict.reason == "score 0.96 < serve threshold 1.00"


def test_a_threshold_learnt_in_another_stratum_does_not_serve() -> None:
    verdict = near_match(chat(ABOVE), chat(STORED), CALIBRATED, learnt_thresholds={"de": 0.5, "en+fr": 0.5})
    assert not verdict.serve and "too few lexical verdicts in stratum en" in (verdict.reason or "")


def give_verdicts(engine: Engine, project: str, scores: list[float], status: str = "approved") -> None:
    """Resolved review candidates, as reviewers leave them (one per request, all to one recording)."""
    store = engine.store
    entry_id = engine.record(new_entry(chat(STORED), project=project))
    for i, score in enumerate(scores):
        request = chat(f"{STORED} variant {status} {i}")
        fp, nfp = fingerprints(request)
        [row] = store.add_candidates(project, fp, nfp, request.to_json(), request.last_user_text(), [
            ("lexical", score, None, "calibrated: too few lexical verdicts to learn a threshold", entry_id)])
        store.set_candidate_status([row.id], status)


@pytest.fixture
def engine(tmp_path: Path):
    engine = Engine.open(open_store(StoreSpec.parse(None, tmp_path)))
    yield engine
    engine.close()


def decide(engine: Engine, text: str, settings: ProjectSettings):
    return run_now(cascade(Mode.AUTO, "p", chat(text), settings, EngineLookups(engine)))


def test_the_cascade_serves_above_the_learnt_threshold_and_queues_below(engine: Engine) -> None:
    give_verdicts(engine, "p", [0.8 + 0.005 * i for i in range(40)])  # 40 approved, 0.80 .. 0.995
    served = decide(engine, ABOVE, CALIBRATED)
    assert served.decision.action == "serve" and served.decision.tier_label == "lexical-calibrated"
    below = decide(engine, BELOW, CALIBRATED)
    assert below.decision.action == "forward" and below.near.queued
    assert "(learnt for en)" in below.near.queued[0].verdict.reason
    # the defaults, on the same store: nothing served
    assert decide(engine, ABOVE, ProjectSettings()).decision.action == "forward"


def test_a_rejection_relearns_at_once(engine: Engine) -> None:
    give_verdicts(engine, "p", [0.8 + 0.005 * i for i in range(40)])
    assert decide(engine, ABOVE, CALIBRATED).decision.action == "serve"
    give_verdicts(engine, "p", [0.99] * 5, status="rejected")
    engine.learnt.invalidate("p")  # a rejection through the engine does this; here it went to the store
    assert decide(engine, ABOVE, replace(CALIBRATED, max_false_hit_rate=0.01)).decision.action == "forward"


def test_semula_calibrate_reports_the_thresholds(tmp_path: Path) -> None:
    engine = Engine.open(open_store(StoreSpec.parse(None, tmp_path)))
    try:
        give_verdicts(engine, "p", [0.8 + 0.005 * i for i in range(40)])
        give_verdicts(engine, "p", [0.7, 0.72], status="rejected")
    finally:
        engine.close()
    runner = CliRunner()
    args = ["calibrate", "--data-dir", str(tmp_path), "--project", "p", "--max-false-hit-rate", "0.1"]
    result = runner.invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    strata = {(t["tier"], t["stratum"]): t for t in report["strata"]}
    assert set(strata) == {("lexical", "en")}  # the verdicts' pairs are English; no embedding verdicts at all
    lexical = strata["lexical", "en"]
    assert lexical["serves"] and lexical["threshold"] == pytest.approx(0.8)
    assert (lexical["approved"], lexical["rejected"], lexical["approved_above"], lexical["rejected_above"]) == (40, 2, 40, 0)
    assert 0 < lexical["upper_bound"] <= 0.1 and lexical["estimate"] == 0
    table = runner.invoke(main, args)
    assert table.exit_code == 0 and "lexical · en: serves at or above 0.80" in table.output
    assert "near_serve = threshold" in table.output and "fixed-sequence" in table.output
    strict = json.loads(runner.invoke(main, [*args[:-2], "--json"]).output)  # the project's own 1 %
    assert not strict["strata"][0]["serves"]
    curved = json.loads(runner.invoke(main, [*args, "--curve", "--json"]).output)
    (lexical_curve,) = curved["curve"]
    points = lexical_curve["points"]
    assert (lexical_curve["tier"], lexical_curve["stratum"]) == ("lexical", "en")
    assert [p["threshold"] for p in points] == sorted((p["threshold"] for p in points), reverse=True)
    assert points[-1]["rejected_above"] == 2 and points[-1]["served_share"] == 1.0  # down to 0.70: all of them
    at_080 = next(p for p in points if p["threshold"] == pytest.approx(0.8))
    assert (at_080["approved_above"], at_080["rejected_above"]) == (40, 0)
    assert "curve · lexical · en" in runner.invoke(main, [*args, "--curve"]).output
