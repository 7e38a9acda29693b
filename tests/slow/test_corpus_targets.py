"""The correctness targets, measured through `semula eval` (the proxy's own cascade) on every labelled set.

Every `*-pairs.jsonl` in tests/data counts: the team's dev and heldout-1 pairs and our own pairs per
hole class. Defaults: no false hit, every `format`, `volatile` and `param_format` pair served by exact or normalised,
review recall ≥ 0.99 where a set has paraphrases (the lexical review floor 0.50). Opt-in lexical serving at 0.9: false hits ≤ 1 %.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from semula.engine.evaluate import evaluate, load_pairs
from shared_paths import DATA

pytestmark = pytest.mark.slow  # the quick subset (`scripts/test --quick`) leaves it out

SETS = sorted(DATA.glob("*-pairs.jsonl"))
MAX_FALSE_HIT_RATE_AT_09 = 0.01


def false_hits(summary: dict) -> list[str]:
    return [f"{category}: {group['served']} of {group['n']} served"
            for category, group in summary["by_category"].items()
            if group["served"] and category not in ("format", "volatile", "param_format", "paraphrase",
                                                    "public_paraphrase")]


@pytest.mark.parametrize("pairs", SETS, ids=lambda p: p.name)
def test_defaults_never_serve_a_different_pair(pairs: Path) -> None:
    summary = evaluate(pairs)
    assert not summary["false_hit_rate"], false_hits(summary)
    for category in ("format", "volatile", "param_format"):
        group = summary["by_category"].get(category)
        if group:
            by_certain = group["served_by_tier"].get("exact", 0) + group["served_by_tier"].get("normalised", 0)
            assert by_certain == group["n"], f"{category}: {by_certain} of {group['n']} served by exact/normalised"
    has_paraphrases = any(p["category"] == "paraphrase" for p in load_pairs(pairs))
    if has_paraphrases:
        assert summary["review_recall"] >= 0.99, summary["review_recall"]


@pytest.mark.parametrize("pairs", SETS, ids=lambda p: p.name)
def test_lexical_serving_at_09_stays_under_one_percent_false_hits(pairs: Path) -> None:
    summary = evaluate(pairs, {"lexical_serve_threshold": 0.9})
    rate = summary["false_hit_rate"] or 0.0
    assert rate <= MAX_FALSE_HIT_RATE_AT_09, false_hits(summary)


MULTILINGUAL = DATA / "multilingual-pairs.jsonl"
_MODEL_DIR = Path("/work/shared/models/all-MiniLM-L6-v2-onnx")


def embeddings_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedding tier with the shared model (skips when the extra or the model is missing)."""
    pytest.importorskip("fastembed", reason="the embeddings extra (fastembed) is not installed")
    from shared_paths import shared_dir

    shared = shared_dir()
    model = shared / "models" / _MODEL_DIR.name if shared else _MODEL_DIR
    if not (model / "model.onnx").is_file():
        pytest.skip(f"shared model missing: {model}")
    for key, value in {"SEMULA_EMBEDDINGS": "on", "SEMULA_EMBEDDINGS_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
                       "SEMULA_EMBEDDINGS_MODEL_PATH": str(model), "SEMULA_EMBEDDINGS_OFFLINE": "on"}.items():
        monkeypatch.setenv(key, value)


def test_embedding_serving_at_09_refuses_multilingual_negations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The guard's language tables through the embedding tier: a negation added in any of the
    sixteen languages scores ≥ 0.9 and must still not be served. Two pairs per language keep the
    model's cost small; the guard itself is checked on every class in test_guard_languages.py
    (`semula eval` on the whole file is in docs/matching.md's table)."""
    import json

    picked: dict[str, int] = {}
    lines = []
    for line in MULTILINGUAL.read_text(encoding="utf-8").splitlines():
        pair = json.loads(line)
        language = pair["id"].split("-")[1]
        if pair["category"] == "negation" and picked.get(language, 0) < 2:
            picked[language] = picked.get(language, 0) + 1
            lines.append(line)
    subset = tmp_path / "negation-pairs.jsonl"
    subset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    embeddings_on(monkeypatch)
    summary = evaluate(subset, {"embedding_serve_threshold": 0.9})
    assert summary["by_category"]["negation"]["n"] == 32
    assert not summary["false_hit_rate"], false_hits(summary)


UNGUARDED = DATA / "unguarded-language-pairs.jsonl"


def test_embedding_serving_at_09_serves_nothing_in_languages_without_a_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38's misses in other words and languages: negation in languages without a table (Swahili,
    Tagalog, Hungarian, Finnish, Czech, Romanian, Vietnamese, Indonesian, Greek, Hebrew), a unit changed
    or qualified, an item added to a list. At 0.9 none is served; each language without a table is
    queued with "no guard for <language>" or refused by the guard."""
    embeddings_on(monkeypatch)
    rows: list[dict] = []
    summary = evaluate(UNGUARDED, {"embedding_serve_threshold": 0.9}, pairs_out=rows.append)
    assert not summary["false_hit_rate"], false_hits(summary)
    assert not [r["id"] for r in rows if r["outcome"] == "served"]  # the `same` ones too: no guard for them
    gated = {r["id"] for r in rows if (r["reason"] or "").startswith("no guard for") and r["outcome"] == "review"}
    # the ones nothing else refuses (others: the guard, the edit checks or the score come first)
    assert gated >= {"negation-tl-003", "negation-cs-008", "negation-ro-009", "negation-vi-010", "paraphrase-tl-030"}, [(r["id"], r["reason"]) for r in rows]


def test_unrelated_requests_propose_no_review_candidate(tmp_path: Path) -> None:
    """What a lower review floor costs a reviewer: each stored request against another pair's incoming
    one (same provider and endpoint, unrelated text) must queue nothing. Measured on the public
    paraphrase file's short questions: 12 of 1,500 cross pairs proposed at 0.50 (4 at 0.55)."""
    import json

    cross = []
    for name in ("dev-pairs.jsonl", "heldout-1-pairs.jsonl"):
        pairs = load_pairs(DATA / name)
        for i, pair in enumerate(pairs):
            other = pairs[(i + 7) % len(pairs)]
            if (other["incoming"]["provider"], other["incoming"]["path"]) == (pair["stored"]["provider"],
                                                                                pair["stored"]["path"]):
                cross.append({"id": f"unrelated-{name}-{i}", "category": "unrelated", "expect": "different",
                              "stored": pair["stored"], "incoming": other["incoming"], "note": other["id"]})
    path = tmp_path / "unrelated-pairs.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cross))
    summary = evaluate(path)
    assert summary["pairs"] > 200 and summary["different_queued"] == 0, summary
