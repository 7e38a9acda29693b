"""The thresholds notebook's calibration curve is `semula calibrate --curve`'s, on one data dir.

Verdicts are given the way `semula review approve/reject` gives them (the store opened by the CLI's
`open_engine`, which writes the review log), in two strata: English pairs and German ones. The
notebook reads only the review log, the command only the store; both must give the same curve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("nbclient")
pytest.importorskip("matplotlib")

from entries import chat, fingerprints, new_entry  # noqa: E402
from semula.cli import main  # noqa: E402
from semula.cli.common import open_engine  # noqa: E402
from semula.core.cascade import Candidate  # noqa: E402
from semula.core.nearmatch import Verdict  # noqa: E402
from semula.engine.operations import run_operation  # noqa: E402
from semula.reporting.report import analysis_dir, execute_notebooks  # noqa: E402

pytestmark = pytest.mark.slow  # the quick subset (`scripts/test --quick`) leaves it out

RECORDED = {"en": "How can I reset the password of my account on the website?",
            "de": "Wie kann ich das Passwort meines Kontos auf der Webseite zurücksetzen?"}
ASKED = {"en": "How can I reset the password of my account on the website please {}?",
         "de": "Wie kann ich das Passwort meines Kontos auf der Webseite bitte zurücksetzen {}?"}
# (stratum, score, verdict): the last pair is blocked by the guard, so calibration never counts it
VERDICTS = [("en", 0.97, "approved"), ("en", 0.93, "approved"), ("en", 0.91, "rejected"), ("en", 0.85, "approved"),
            ("de", 0.95, "approved"), ("de", 0.88, "rejected"), ("de", 0.80, "approved")]
BLOCKED = ("en", 0.99, "rejected")
OPERATION = {"approved": "review.approve", "rejected": "review.reject"}  # as `semula review approve/reject` run them


def give_verdicts(data_dir: Path) -> None:
    with open_engine(data_dir) as engine:
        recordings = {stratum: engine.record(new_entry(chat(text))) for stratum, text in RECORDED.items()}
        for i, (stratum, score, status) in enumerate([*VERDICTS, BLOCKED]):
            guard = "number 1 ≠ 2" if (stratum, score, status) == BLOCKED else None
            verdict = Verdict("lexical", score, serve=False, review=True, guard_reason=guard,
                              reason=f"score {score:.2f} < serve threshold 1.00")
            request = chat(ASKED[stratum].format(i))
            fp, nfp = fingerprints(request)
            (queued,) = engine.review.queue("p", request, fp, nfp, [Candidate(recordings[stratum], verdict)], {})
            run_operation(engine, OPERATION[status], {"id": queued.candidate_id})


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("semula-data")
    give_verdicts(path)
    return path


def by_stratum(curves: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    return {(c["tier"], c["stratum"]): c["points"] for c in curves}


def test_the_notebook_draws_the_curve_semula_calibrate_prints(data_dir: Path) -> None:
    (run,) = execute_notebooks([analysis_dir() / "thresholds.ipynb"], data_dir)
    assert run.error is None, run.error
    notebook = [c for c in run.results["calibration_curve"] if c["project"] == "p"]
    result = CliRunner().invoke(main, ["calibrate", "--data-dir", str(data_dir), "--project", "p", "--curve", "--json"])
    assert result.exit_code == 0, result.output
    command = json.loads(result.output)["curve"]
    assert by_stratum(notebook) == by_stratum(command)
    assert set(by_stratum(command)) == {("lexical", "en"), ("lexical", "de")}
    assert {c["stratum"]: c["verdicts"] for c in notebook} == {"en": 4, "de": 3}  # the guard-blocked one left out
    (en_lowest, de_lowest) = (by_stratum(command)["lexical", s][-1] for s in ("en", "de"))
    assert (en_lowest["approved_above"], en_lowest["rejected_above"], en_lowest["served_share"]) == (3, 1, 1.0)
    assert (de_lowest["approved_above"], de_lowest["rejected_above"]) == (2, 1)
    pngs = [o for c in run.notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert pngs, "the curve is drawn"


def test_with_no_verdicts_the_section_says_so(tmp_path: Path) -> None:
    (run,) = execute_notebooks([analysis_dir() / "thresholds.ipynb"], tmp_path)
    assert run.error is None, run.error
    assert run.results["calibration_curve"] == []
    text = "".join(o.get("text", "") for c in run.notebook.cells for o in c.get("outputs", []))
    assert "no verdicts calibration learns from" in text
