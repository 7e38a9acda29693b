"""`semula eval --pairs-out FILE`: one JSON line per pair, so every false hit and miss can be read."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from semula.cli import main

def chat(text: str, **params) -> dict:
    return {"provider": "openai", "path": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **params}}


def pair(pair_id: str, expect: str, note: str, stored: dict, incoming: dict) -> dict:
    return {"id": pair_id, "category": pair_id.rsplit("-", 1)[0], "expect": expect, "note": note,
            "stored": stored, "incoming": incoming}


CATERING = "Plan the catering for a wedding of eighty guests in June"
HOTEL = "Plan the catering for a hotel with {} rooms and two restaurants"
# (pair, expected outcome, tier, whether a reason or guard_reason is expected)
PAIRS = [
    (pair("format-001", "same", "case", chat("What is the capital of Peru?"), chat("what is the capital of peru")),
     "served", "normalised", False),
    (pair("param_format-001", "same", "0 vs 0.0", chat("Name a bridge", temperature=0),
          chat("Name a bridge", temperature=0.0)), "served", "normalised", False),
    (pair("number-001", "different", "120 vs 220", chat(HOTEL.format(120)), chat(HOTEL.format(220))),
     "review", "lexical", True),
    (pair("shape-001", "different", "temperature", chat(CATERING, temperature=0), chat(CATERING, temperature=0.2)),
     "review", "lexical", True),
    (pair("paraphrase-001", "same", "too loose to propose for review", chat(CATERING),
          chat("Plan a family holiday in Japan")), "miss", "lexical", True),
    (pair("entity-001", "different", "unrelated", chat("Write a haiku about autumn leaves"),
          chat("Explain TCP slow start")), "miss", "none", False),
]


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p, *_ in PAIRS), encoding="utf-8")
    return path


def test_one_line_per_pair_with_outcome_tier_score_and_reason(tmp_path, pairs_file):
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["eval", str(pairs_file), "--json", "--pairs-out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == [p["id"] for p, *_ in PAIRS]
    assert summary["pairs"] == len(lines)
    for line, (pair, outcome, tier, explained) in zip(lines, PAIRS):
        assert set(line) == {"id", "category", "expect", "outcome", "tier", "score", "reason", "guard_reason", "note"}
        assert (line["category"], line["expect"], line["note"]) == (pair["category"], pair["expect"], pair["note"])
        assert (line["outcome"], line["tier"]) == (outcome, tier), line
        if outcome == "served":
            assert line["score"] == 1.0
        if explained:
            assert line["reason"] or line["guard_reason"], line
            assert isinstance(line["score"], float)
        if tier == "none":
            assert line["score"] is None and line["reason"] is None


def test_the_table_output_writes_the_file_too(tmp_path, pairs_file):
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["eval", str(pairs_file), "--pairs-out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(PAIRS)


def test_semula_ignore_shows_in_the_summary_and_each_pairs_line(tmp_path):
    """`semula eval --set ignore=…` runs the pairs under the declared fields and says what they changed."""
    pairs = [pair("volatile-001", "same", "seed and run id", chat("Roll a die, seed=1", run_tag={"id": "A"}),
                  chat("Roll a die, seed=2", run_tag={"id": "B"})),
             pair("number-002", "different", "outside the rules", chat("Roll a die, seed=1"),
                  chat("Roll two dice, seed=1"))]
    path, out = tmp_path / "pairs.jsonl", tmp_path / "out.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    rules = json.dumps({"paths": ["run_tag.id"], "patterns": ["seed=\\d+"]})
    result = CliRunner().invoke(main, ["eval", str(path), "--json", "--set", f"ignore={rules}", "--pairs-out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["ignore"] == {"rules": ["run_tag.id", "/seed=\\d+/"], "pairs_affected": 2}
    volatile, other = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert (volatile["outcome"], volatile["tier"], volatile["ignored"]) == ("served", "exact",
                                                                             ["run_tag.id", "/seed=\\d+/"])
    assert other["outcome"] != "served" and other["ignored"] == ["/seed=\\d+/"]
    table = CliRunner().invoke(main, ["eval", str(path), "--set", f"ignore={rules}"])
    assert "ignored by semula_ignore: run_tag.id, /seed=\\d+/ · changed the fingerprints of 2 of 2 pairs" \
        in table.output, table.output
    bad = CliRunner().invoke(main, ["eval", str(path), "--set", 'ignore={"paths": ["model"]}'])
    assert bad.exit_code == 2 and "reaches into the model" in bad.output and "Traceback" not in bad.output
