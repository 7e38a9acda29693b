"""Calibration on held-out verdicts: learn from one half of the repo's pair corpora, measure on the
other through the real cascade, and check the learnt error estimate against the measured rate."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from shared_paths import corpus_file

from semula.core.calibration import LabelledVerdict, counts_for_calibration, learn
from semula.core.guard.language import languages_of_pair
from semula.core.redact import FingerprintKey
from semula.engine.evaluate import canonical_of, evaluate, load_pairs

DATA = Path(__file__).resolve().parents[1] / "data"
CALIBRATED = {"near_serve": "calibrated"}
BOUND = 0.10  # the lexical tier alone gives about a hundred verdicts here: far too few to bound 1 %
PARAPHRASES = 500  # the first public paraphrase pairs (all `same`): the approvals a team would give


def rows_of(path: Path, learnt: dict[str, dict[str, float]], only=None) -> list[dict]:
    rows: list[dict] = []
    evaluate(path, CALIBRATED, pairs_out=rows.append, learnt=learnt, only=only)
    return rows


def strata(path: Path) -> list[str]:
    """Each pair's calibration stratum: the languages of its two last user texts."""
    key = FingerprintKey(b"calibration-heldout-salt")
    return [languages_of_pair(canonical_of(p["stored"], key).last_user_text(),
                              canonical_of(p["incoming"], key).last_user_text()).stratum for p in load_pairs(path)]


@pytest.mark.slow
def test_the_estimate_holds_on_the_new_half() -> None:
    files = [DATA / "dev-pairs.jsonl", DATA / "heldout-1-pairs.jsonl", DATA / "multilingual-pairs.jsonl",
             corpus_file("public-paraphrase-pairs.jsonl")]
    if not files[-1].is_file():
        pytest.skip("no shared corpus (../shared/corpus): the public paraphrases give the approvals")
    count = {f: min(len(load_pairs(f)), PARAPHRASES) if "public" in f.name else len(load_pairs(f)) for f in files}
    reviewed: dict[Path, set[int]] = {}
    for f, n in count.items():
        order = list(range(n))
        random.Random(f"heldout:{f.name}").shuffle(order)
        reviewed[f] = set(order[: n // 2])
    stratum = {f: strata(f) for f in files}
    # The team's review history: the reviewed half only (the new half runs once, with what was learnt).
    verdicts = [LabelledVerdict(r["tier"], r["score"], r["expect"] == "same", stratum[f][i])
                for f in files for i, r in zip(sorted(reviewed[f]), rows_of(f, {}, only=reviewed[f].__contains__))
                if r["outcome"] == "review" and counts_for_calibration(r["reason"], r["guard_reason"])]
    calibration = learn(verdicts, BOUND)
    lexical = calibration.of("lexical", "en")
    assert lexical is not None
    assert lexical.serves, lexical.reason
    served = wrong = different = false_hits = 0
    for f in files:
        new = {i for i in range(count[f]) if i not in reviewed[f]}
        for row in rows_of(f, calibration.thresholds(), only=new.__contains__):
            different += row["expect"] == "different"
            if row["outcome"] == "served":
                false_hits += row["expect"] == "different"
                if row["tier"].endswith("-calibrated"):
                    served += 1
                    wrong += row["expect"] == "different"
    assert served >= 10  # calibration served something of its own on the new half
    assert wrong / served <= lexical.upper_bound  # the measured wrong share stays under the learnt bound
    assert false_hits / different <= BOUND
