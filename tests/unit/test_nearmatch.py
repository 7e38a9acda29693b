"""The near-match verdict: word lists, Dice, and near_match over tables of request pairs."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import pytest
from work_counter import count_work

from semula.core.request.canonical import CanonicalRequest
from semula.core.guard.diff import MAX_CHANGED_TOKENS
from semula.core.nearmatch import Verdict, lexical_score, lexical_tokens, lexical_words, near_match
from semula.core.text import dice
from semula.core.pair import pipeline_outcome
from semula.core.request.normalise import words
from semula.providers import RawRequest, adapter_for
from semula.core.settings import ProjectSettings
from entries import TEST_KEY

DEFAULTS = ProjectSettings()
LOOSE = ProjectSettings(lexical_serve_threshold=0.8)
SERVE_ALL = ProjectSettings(lexical_serve_threshold=0.0, lexical_review_threshold=0.0)
TOOL = {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {}}}}
OTHER_TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}


def _openai(messages: list[dict[str, Any]], **body: Any) -> CanonicalRequest:
    raw = json.dumps({"model": body.pop("model", "gpt-4o"), "messages": messages, **body}).encode()
    path = "/v1/chat/completions"
    return adapter_for("api.openai.com", path).canonicalise(
        RawRequest("POST", "api.openai.com", path, (), {"content-type": "application/json"}, raw), TEST_KEY
    )


def _user(text: str, *, system: str | None = None, history: tuple[str, ...] = (), **body: Any) -> CanonicalRequest:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for n, turn in enumerate(history):
        messages.append({"role": "user" if n % 2 == 0 else "assistant", "content": turn})
    messages.append({"role": "user", "content": text})
    return _openai(messages, **body)


LONG = (
    "Summarise the meeting notes below for the team newsletter in three bullet points. The notes cover "
    "the migration of the billing service to the new cluster, the on-call rotation and the hiring plan"
)

# ---------------------------------------------------------------- words and Dice


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What is the Capital of France?", ["what", "is", "the", "capital", "of", "france"]),
        ("Give me three ideas", ["give", "me", "3", "ideas"]),
        ("Request req_8f3a9c21 failed", ["request", "id", "failed"]),
        ("法国的首都", ["法", "国", "的", "首", "都"]),
        ("ما هي عاصمة فرنسا؟", ["ما", "هي", "عاصمة", "فرنسا"]),
        ("?!... --- ***", []),
        ("😀😀", []),
        ("", []),
    ],
)
def test_lexical_words(text: str, expected: list[str]) -> None:
    assert lexical_words(text) == expected


@pytest.mark.parametrize(
    "text", ["東京はどこですか", "서울은 어디입니까", "नमस्ते दुनिया", "สวัสดีครับ", "שלום עולם", "Привет, мир", "مرحبا بالعالم"]
)
def test_text_with_letters_always_has_words(text: str) -> None:
    assert lexical_words(text)
    assert lexical_score(text, text) == (1.0, True)


@pytest.mark.parametrize("text", ["plain English prose", "Code `getUser()` and {\"b\": 1, \"a\": 2}", "日本語 and 中文"])
def test_lexical_words_match_the_normalise_module_without_number_mapping(text: str) -> None:
    assert lexical_words(text, spell_numbers=False) == words(text)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (["a", "b"], ["a", "b"], 1.0),
        (["a", "b"], ["b", "a"], 1.0),
        (["a", "b"], ["c", "d"], 0.0),
        (["a", "b", "c", "d"], ["a", "b", "c", "e"], 0.75),
        # multisets: the swap of weekday and weekend hours keeps the set, not the counts
        (["open", "open", "closed"], ["open", "closed", "closed"], 2 * 2 / 6),
        ([], [], 0.0),
        (["a"], [], 0.0),
    ],
)
def test_dice(a: list[str], b: list[str], expected: float) -> None:
    assert dice(a, b) == pytest.approx(expected)


_RNG = random.Random(3)
_VOCABULARY = "the billing service moved to a new cluster on weekdays and the team reviewed it".split()
_LINES = [" ".join(_RNG.choice(_VOCABULARY) for _ in range(12)) for _ in range(4000)]
_TEXT = "\n".join(_LINES)


@pytest.mark.parametrize(
    "a, b",
    [
        (_TEXT, "\n".join(_LINES[:2000] + ["an extra line about the migration plan"] + _LINES[2000:])),
        (_TEXT, "Firstly " + _TEXT),
        (_TEXT, _TEXT + " finally"),
        (_TEXT + " end1", _TEXT + " end2"),
        ("start1 " + _TEXT, "start2 " + _TEXT),
        ("{" + _TEXT + " one}", "{" + _TEXT + " two}"),
        ("`" + _TEXT, "`" + _TEXT.replace("billing", "invoice", 1)),
        (_TEXT, "a short text"),
    ],
    ids=["inserted line", "word before", "word after", "last word", "first word", "json", "open code span", "short"],
)
def test_long_texts_score_like_short_ones(a: str, b: str) -> None:
    exact = dice(lexical_words(a), lexical_words(b))
    score, has_words = lexical_score(a, b)
    assert has_words and len(a) > 32_768
    assert score < 1.0
    assert score == pytest.approx(exact, abs=1e-3)


def test_equal_long_texts_score_one() -> None:
    assert lexical_score(_TEXT, _TEXT) == (1.0, True)
    assert lexical_score(_TEXT, _TEXT + " ") == (1.0, True)


# ---------------------------------------------------------------- the verdict

STORED = _user(LONG + ".")


@pytest.mark.parametrize(
    "incoming, stored, settings, serve, review, reason",
    [
        (_user(LONG), STORED, DEFAULTS, True, False, None),
        (_user(LONG + " and the budget."), STORED, DEFAULTS, False, True, "score 0.96 < serve threshold 1.00"),
        (_user("Please " + LONG), STORED, LOOSE, True, False, None),
        (_user(LONG + " and the budget."), STORED, LOOSE, False, True, "edit not known harmless: 'and budget' only in"),
        (_user(LONG.replace("three", "four")), STORED, LOOSE, False, True, "guard: number three≠four"),
        (_user(LONG, system="Answer in French."), STORED, LOOSE, False, True, "context differs (system prompt)"),
        (
            _user(LONG, history=("hi", "hello")),
            _user(LONG, history=("hey", "hello")),
            LOOSE,
            False,
            True,
            "context differs (earlier turns",
        ),
        (_user(LONG, history=("hi", "hello")), STORED, LOOSE, False, False, "shape differs: roles user → user,assistant,user"),
        (_user(LONG, tools=[TOOL]), STORED, LOOSE, False, True, "tools differ: +search"),
        (_user(LONG, tools=[TOOL]), _user(LONG, tools=[OTHER_TOOL]), LOOSE, False, True, "tools differ: +search, -lookup"),
        (_user(LONG, temperature=0.2), _user(LONG, temperature=0), LOOSE, False, True, "parameters differ: temperature"),
        # issue 21: a near-match of another model is not even queued
        (_user(LONG, model="gpt-4o-mini"), STORED, LOOSE, False, False, "model differs: gpt-4o → gpt-4o-mini"),
        (_user("Completely unrelated question about tea"), STORED, DEFAULTS, False, False, "score 0.0"),
    ],
    ids=[
        "same words",
        "one extra word",
        "politeness added, lower threshold",
        "one extra word, lower threshold",
        "guard",
        "system prompt",
        "earlier turns",
        "roles",
        "tool added",
        "tool renamed",
        "parameter",
        "model",
        "unrelated",
    ],
)
def test_near_match(incoming, stored, settings, serve: bool, review: bool, reason: str | None) -> None:
    verdict = near_match(incoming, stored, settings)
    assert (verdict.serve, verdict.review) == (serve, review), verdict
    if reason is None:
        assert verdict.reason is None
    else:
        assert verdict.reason is not None and verdict.reason.startswith(reason), verdict.reason


def test_guard_reason_travels_even_when_the_score_decides() -> None:
    verdict = near_match(_user(LONG.replace("three", "four")), STORED, DEFAULTS)
    assert verdict.reason is not None and verdict.reason.startswith("score")
    assert verdict.guard_reason == "number three≠four"
    assert verdict.review


def test_near_bypass_never_serves() -> None:
    verdict = near_match(_user(LONG), STORED, DEFAULTS, near_bypass_reason="temperature 0.9 > 0.3")
    assert not verdict.serve and verdict.reason == "bypass: temperature 0.9 > 0.3"


def test_ignored_params_and_tail_n_apply_as_in_the_normalised_fingerprint() -> None:
    a = _user(LONG, history=("hi", "hello"), user="u1", max_tokens=10)
    b = _user(LONG, history=("hey", "hello"), max_tokens=20)
    assert near_match(a, b, LOOSE).reason.startswith("parameters differ: max_tokens")
    tolerant = dataclasses.replace(LOOSE, ignore_params=("max_tokens",), tail_n=1)
    assert near_match(a, b, tolerant).serve


def test_scrubbed_values_are_not_differences_for_the_guard() -> None:
    settings = dataclasses.replace(LOOSE, scrub_patterns=(r"ticket \d+",))
    stored = _user(LONG + " for ticket 4411, request req_8f3a9c21.")
    incoming = _user(LONG + " for ticket 9035, request req_77b1e0d4, thanks.")
    assert near_match(incoming, stored, LOOSE).reason == "guard: number 4411≠9035"
    assert near_match(incoming, stored, settings).serve


@pytest.mark.parametrize(
    "tier, settings, score, serve, review",
    [
        ("embedding", DEFAULTS, 0.99, False, True),
        ("embedding", DEFAULTS, 0.5, False, False),
        ("embedding", dataclasses.replace(DEFAULTS, embedding_serve_threshold=0.95), 0.99, True, False),
    ],
)
def test_embedding_tier_uses_its_thresholds(tier: str, settings, score: float, serve: bool, review: bool) -> None:
    verdict = near_match(_user(LONG + " please"), STORED, settings, tier=tier, score=score)
    assert (verdict.tier, verdict.serve, verdict.review, verdict.score) == (tier, serve, review, score)


def test_unknown_tier_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="lexical, embedding"):
        near_match(STORED, STORED, DEFAULTS, tier="bm25")


def test_verdict_is_frozen() -> None:
    verdict = near_match(STORED, STORED, DEFAULTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.serve = False  # type: ignore[misc]
    assert isinstance(verdict, Verdict)


# ---------------------------------------------------------------- bad input

IMAGE = [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]
OTHER_IMAGE = [{"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}]


@pytest.mark.parametrize(
    "incoming, stored",
    [
        (_openai([]), _openai([])),
        (_user(""), _user("")),
        (_openai([{"role": "user", "content": IMAGE}]), _openai([{"role": "user", "content": OTHER_IMAGE}])),
        (
            _openai([{"role": "user", "content": "Describe it"}, {"role": "user", "content": IMAGE}]),
            _openai([{"role": "user", "content": "Describe it"}, {"role": "user", "content": OTHER_IMAGE}]),
        ),
        (_user("?!... ---"), _user("!!!")),
        (_user("the of and a"), _user("a an the of")),
        (_user("法国的首都是哪里？"), _user("德国的首都是哪里？")),
        (_user("ما هي عاصمة فرنسا؟"), _user("ما هي عاصمة ألمانيا؟")),
        (_user("😀"), _user("😡")),
    ],
    ids=["no messages", "empty text", "images only", "text then other image", "punctuation", "stopwords", "cjk", "arabic", "emoji"],
)
def test_bad_input_is_never_served_by_default(incoming, stored) -> None:
    for settings in (DEFAULTS, LOOSE):
        verdict = near_match(incoming, stored, settings)
        assert not verdict.serve, verdict
        assert 0.0 <= verdict.score <= 1.0


@pytest.mark.parametrize(
    "incoming, stored",
    [
        (_user(""), _user("")),
        (_openai([{"role": "user", "content": IMAGE}]), _openai([{"role": "user", "content": OTHER_IMAGE}])),
        (_user("?!..."), _user("!!!")),
        (_user("法国的首都是哪里？"), _user("德国的首都是哪里？")),
        (_user("ما هي عاصمة فرنسا؟"), _user("ما هي عاصمة ألمانيا؟")),
    ],
    ids=["empty text", "images only", "punctuation", "cjk", "arabic"],
)
def test_no_words_or_uncased_names_never_serve_even_at_threshold_zero(incoming, stored) -> None:
    assert not near_match(incoming, stored, SERVE_ALL).serve


def _one_number_changed(chars: int) -> tuple[CanonicalRequest, CanonicalRequest]:
    rng = random.Random(11)
    vocabulary = "the report covers revenue in France and Germany for 2024 with 120 stores open on weekdays".split()
    text = " ".join(rng.choice(vocabulary) for _ in range(chars // 5))[:chars]
    at = chars * 3 // 5
    return _user(text), _user(text[:at] + " 121 " + text[at + 5 :])


@pytest.mark.slow
def test_a_1mb_prompt_stays_fast() -> None:
    # No clock: count what the per-token steps (both tokenisers, difflib) are given. The work is
    # bounded by the differing middle, whatever the prompt's size.
    rng = random.Random(11)
    vocabulary = "the report covers revenue in France and Germany for 2024 with 120 stores open on weekdays".split()
    text = " ".join(rng.choice(vocabulary) for _ in range(180_000))[:1_000_000]
    stored, incoming = _user(text), _user(text[:600_000] + " 121 " + text[600_005:])
    unrelated = _user(" ".join(rng.choice(vocabulary) for _ in range(180_000))[:1_000_000])
    for a, b in ((incoming, stored), (unrelated, stored), (_user("short"), stored)):
        with count_work(max_diff_tokens=2 * MAX_CHANGED_TOKENS) as work:
            verdict = near_match(a, b, SERVE_ALL)
        assert work.tokenised_chars <= 4_000  # of 2 MB of text
        assert work.largest_diff <= 2 * MAX_CHANGED_TOKENS
        assert not verdict.serve
    # Ten times the prompt, no more work: 1 MB against 100 KB (both past the long-text cut).
    with count_work() as huge:
        assert not near_match(*_one_number_changed(1_000_000), SERVE_ALL).serve
    with count_work() as small:
        assert not near_match(*_one_number_changed(100_000), SERVE_ALL).serve
    assert 0 < huge.tokenised_chars <= 1.1 * small.tokenised_chars


def test_pipeline_outcome_tiers() -> None:
    assert pipeline_outcome(STORED, STORED, DEFAULTS).tier == "exact"
    assert pipeline_outcome(STORED, _user(LONG.upper() + " "), DEFAULTS).tier == "normalised"
    outcome = pipeline_outcome(STORED, _user(LONG + " and the budget."), DEFAULTS)
    assert (outcome.action, outcome.tier) == ("review", "none")


# ---------------------------------------------------------------- symbols and edits


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Is a == b?", ["is", "a", "==", "b"]),
        ("Simplify (a + b) * c.", ["simplify", "(", "a", "+", "b", ")", "*", "c"]),
        ("Hello, world! What's up?", ["hello", "world", "what", "s", "up"]),
        ("Price: $40 or €35", ["price", "$", "40", "or", "€", "35"]),
        ("idle → done 👍", ["idle", "→", "done", "👍"]),
        ("A ∪ B", ["a", "∪", "b"]),
        ("1,000.50 on 2024-01-05", ["1", "000", "50", "on", "2024", "01", "05"]),
        ("a well-known fix", ["a", "well", "known", "fix"]),
        ("¿Qué es «x»?", ["qué", "es", "x"]),
    ],
)
def test_lexical_tokens(text: str, expected: list[str]) -> None:
    assert lexical_tokens(text) == expected


@pytest.mark.parametrize(
    "a, b",
    [
        ("Why does a == b fail?", "Why does a != b fail?"),
        ("Is x >= 10?", "Is x > 10?"),
        ("Compute √27", "Compute ∛27"),
        ("What does 🔥 mean?", "What does 💀 mean?"),
        ("Costs $40", "Costs €40"),
    ],
)
def test_a_symbol_change_lowers_the_score(a: str, b: str) -> None:
    assert lexical_score(a, b)[0] < 1.0


@pytest.mark.parametrize(
    "a, b",
    [("Hello, world.", "hello world"), ("What is X?", "What is X"), ("Is it ok?!", "is it ok"), ("你好，世界。", "你好 世界")],
)
def test_sentence_punctuation_keeps_a_perfect_score(a: str, b: str) -> None:
    assert lexical_score(a, b) == (1.0, True)


_BASE = "Explain why the nightly export of the billing tables fails on the new cluster"


@pytest.mark.parametrize(
    "stored, incoming, settings, serve, reason",
    [
        ("Why does `a == b` hold here?", "Why does `a != b` hold here?", SERVE_ALL, False, "guard: symbols differ: == → !="),
        ("Is A ∪ B empty?", "Is A ∩ B empty?", DEFAULTS, False, "score"),
        (_BASE, "Please " + _BASE.lower() + ".", LOOSE, True, None),
        (_BASE, "Could you " + _BASE.lower() + "?", LOOSE, True, None),
        (_BASE, _BASE.replace("billing", "invoice"), LOOSE, False, "edit not known harmless: billing → invoice"),
        (_BASE, _BASE.replace("new", "old"), SERVE_ALL, False, "guard: antonym"),
        (_BASE, _BASE.replace(" on ", " from "), LOOSE, False, "edit not known harmless: on → from"),
        (_BASE, _BASE + " quickly", LOOSE, False, "edit not known harmless: 'quickly' only in incoming"),
    ],
    ids=["symbols at any threshold", "symbols lower the score", "please", "request frame", "noun swap",
         "opposite", "preposition", "adverb"],
)
def test_lexical_serving_needs_known_harmless_edits(stored, incoming, settings, serve, reason) -> None:
    verdict = near_match(_user(incoming), _user(stored), settings)
    assert verdict.serve is serve, verdict
    assert (verdict.reason is None) if reason is None else (verdict.reason or "").startswith(reason), verdict
    if not serve and lexical_score(incoming, stored)[0] >= settings.lexical_review_threshold:
        assert verdict.review, "refusing an edit must never turn a review into a miss"


EMBED = ProjectSettings(embedding_serve_threshold=0.9)


@pytest.mark.parametrize(
    "stored, incoming, serve, reason",
    [
        ("How often should I feed my cat?", "How often should I feed my dog?", False, "small edit, words swapped: cat → dog"),
        ("Should I scale up the cluster?", "Should I scale down the cluster?", False, "guard: antonym: up→down"),
        ("Copy my files to the server", "Copy my files from the server", False, "small edit, words swapped: to → from"),
        ("Is a < b here?", "Is a <= b here?", False, "guard: symbols differ"),
        ("Which laptops are good for video editing on a student budget?",
         "Which laptops are not good for video editing on a student budget?", False, "guard: negation"),
        ("What is the fastest way to learn to play the guitar as an adult beginner?",
         "As a grown-up starting out, how can I pick up guitar playing quickly?", True, None),
    ],
    ids=["noun swap", "direction", "to/from", "symbol", "negation", "rewording"],
)
def test_embedding_serving_refuses_small_unlisted_edits(stored, incoming, serve, reason) -> None:
    verdict = near_match(_user(incoming), _user(stored), EMBED, tier="embedding", score=0.95)
    assert verdict.serve is serve, verdict
    assert (verdict.reason is None) if reason is None else (verdict.reason or "").startswith(reason), verdict
    assert verdict.review or verdict.serve


# ---------------------------------------------------------------- the adversarial pair files

from shared_paths import DATA  # noqa: E402


def _pairs(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _outcome(pair: dict[str, Any], settings: ProjectSettings):
    from semula.engine.evaluate import canonical_of

    return pipeline_outcome(canonical_of(pair["stored"], TEST_KEY), canonical_of(pair["incoming"], TEST_KEY), settings)


@pytest.mark.parametrize("name", ["symbols-pairs.jsonl", "open-vocabulary-pairs.jsonl"])
@pytest.mark.parametrize("settings", [DEFAULTS, ProjectSettings(lexical_serve_threshold=0.9), LOOSE],
                         ids=["defaults", "lexical 0.9", "lexical 0.8"])
def test_adversarial_pairs_are_never_served(name: str, settings: ProjectSettings) -> None:
    pairs = _pairs(name)
    assert len(pairs) >= 20 and all(p["expect"] == "different" for p in pairs)
    served = [p["id"] for p in pairs if _outcome(p, settings).action == "served"]
    assert served == []


def test_harmless_edit_pairs_are_served_or_reviewed() -> None:
    pairs = _pairs("harmless-edit-pairs.jsonl")
    assert len(pairs) >= 20 and all(p["expect"] == "same" for p in pairs)
    outcomes = {p["id"]: _outcome(p, ProjectSettings(lexical_serve_threshold=0.9)) for p in pairs}
    assert all(o.action in ("served", "review") for o in outcomes.values())
    # whatever the score lets through, the allow-list does not stop
    assert not [i for i, o in outcomes.items() if o.verdict and (o.verdict.reason or "").startswith("edit not known")]


@pytest.mark.parametrize(("stored", "incoming", "differs"), [
    ("Is CO toxic?", "Is Co toxic?", True),  # an acronym against a word
    ("Run:\n```python\nif x:\n    y()\nz()\n```", "Run:\n```python\nif x:\n    y()\n    z()\n```", True),
    ('Print "a  b"', 'Print "a b"', True),
    ("what is the capital of france", "What is the capital of France", False),  # prose case folds
    ("Is CO toxic?", "Is CO poisonous?", False),  # a changed word: the edit checks judge it
])
def test_layout_the_normaliser_keeps_is_never_served_by_word_overlap(stored: str, incoming: str,
                                                                     differs: bool) -> None:
    from semula.core.nearmatch import kept_layout_differs

    assert (kept_layout_differs(stored, incoming) is not None) is differs
