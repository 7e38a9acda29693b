"""Why a request missed: the differences named, the nearest recordings ranked, and the replay-miss message."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from entries import chat
from semula.core.request.canonical import CanonicalRequest, Message
from semula.core.checks import around_difference
from semula.core.explain import Nearest, differences, miss_message, nearest_recordings
from semula.core.nearmatch import Verdict, near_match
from semula.core.settings import ProjectSettings

QUESTION = "What is the capital of France?"
RECORDED = chat(QUESTION)
TOOLS = [{"type": "function", "function": {"name": "lookup"}}]
LONG = "x" * 60


@dataclass(frozen=True)
class Candidate:
    """The shape miss_message reads from the engine's near-match candidate."""

    entry_id: int
    verdict: Verdict
    candidate_id: int | None = None


# ---------------------------------------------------------------- differences


@pytest.mark.parametrize(
    ("incoming", "expected"),
    [
        (chat(QUESTION), []),
        (chat("what is the capital of france"), []),  # equal once normalised
        (replace(RECORDED, endpoint="/v1/responses"),
         ["endpoint differs: openai /v1/chat/completions → openai /v1/responses"]),
        (replace(RECORDED, provider="azure"),
         ["endpoint differs: openai /v1/chat/completions → azure /v1/chat/completions"]),
        (chat(QUESTION, model="gpt-4o-mini"), ["model differs: gpt-4o → gpt-4o-mini"]),
        (chat(QUESTION, stream=True), ["stream differs: False → True"]),
        (replace(RECORDED, query=(("api-version", "2024-10-21"),)), ['query differs: {} → {"api-version":"2024-10-21"}']),
        (replace(RECORDED, headers=(("anthropic-beta", "tools"),)), ['headers differ: {} → {"anthropic-beta":"tools"}']),
        (chat(QUESTION, temperature=0.5), ["parameters differ: temperature=0.5 only in this request"]),
        (chat(QUESTION, seed=LONG), [f"parameters differ: seed={'x' * 39}… only in this request"]),  # cut to 40
        (chat(QUESTION, tools=TOOLS), ["tools differ: +lookup"]),
        (replace(RECORDED, system="Answer in one word."), ["context differs (system prompt)"]),
        (replace(RECORDED, messages=(*RECORDED.messages, Message("assistant", "Paris"))),
         ["shape differs: roles user → user,assistant"]),
        (replace(RECORDED, messages=()), ["shape differs: roles user → none"]),
        (chat("What is the capital of Spain?"),
         ["message 1 (user) text differs: '…e capital of France?' → '…e capital of Spain?'"]),
        (replace(RECORDED, messages=(Message("user", QUESTION, ({"type": "image_url", "image_url": "a.png"},)),)),
         ["message 1 (user) non-text parts differ"]),
        (replace(RECORDED, parsed=False, body={"raw": 1}), ['body differs at $.messages=[{"content":"What is the capital of Fra… only in the recording']),
        (chat("What is the capital of Spain?", model="gpt-4o-mini", temperature=0.5),
         ["model differs: gpt-4o → gpt-4o-mini", "parameters differ: temperature=0.5 only in this request",
          "message 1 (user) text differs: '…e capital of France?' → '…e capital of Spain?'"]),
    ],
)
def test_differences(incoming: CanonicalRequest, expected: list[str]) -> None:
    assert differences(incoming, RECORDED) == expected


@pytest.mark.parametrize(
    ("incoming", "recorded", "expected"),
    [
        (chat(QUESTION), chat(QUESTION, temperature=0.5), ["parameters differ: temperature=0.5 only in the recording"]),
        (chat(QUESTION, temperature=0.7), chat(QUESTION, temperature=0.5), ["parameters differ: temperature 0.5 → 0.7"]),
        (chat(QUESTION, stop=["a", "b"]), chat(QUESTION, stop=["b", "a"]), ['parameters differ: stop ["b","a"] → ["a","b"]']),
        (chat(QUESTION, response_format={"type": "json_object"}), chat(QUESTION, response_format={"type": "json_object"}),
         []),
        (replace(RECORDED, parsed=False, body={"raw": 1}), replace(RECORDED, parsed=False, body={"raw": 1}), []),
    ],
)
def test_differences_between_two_requests(incoming: CanonicalRequest, recorded: CanonicalRequest,
                                          expected: list[str]) -> None:
    assert differences(incoming, recorded) == expected


# ---------------------------------------------------------------- around_difference


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("short a", "short b", ("short a", "short b")),
        ("same", "same", ("same", "same")),
        ("abc", "abcdef", ("abc", "abcdef")),  # one is a prefix: the window starts where it ends
        ("a  b\n c", "a b c d", ("a b c", "a b c d")),  # whitespace runs collapse first
        ("a" * 100 + "X" + "b" * 10, "a" * 100 + "Y" + "b" * 10, ("…" + "a" * 13 + "X" + "b" * 10,
                                                                  "…" + "a" * 13 + "Y" + "b" * 10)),
        ("X" + "a" * 100, "Y" + "a" * 100, ("X" + "a" * 39 + "…", "Y" + "a" * 39 + "…")),
    ],
)
def test_around_difference(a: str, b: str, expected: tuple[str, str]) -> None:
    assert around_difference(a, b) == expected


def test_around_difference_never_shows_long_different_texts_as_equal() -> None:
    a, b = "same start " * 20 + "left", "same start " * 20 + "right"
    mine, theirs = around_difference(a, b)
    assert mine != theirs and mine.startswith("…") and "left" in mine and "right" in theirs


# ---------------------------------------------------------------- nearest_recordings


def test_nearest_recordings_rank_by_similarity_then_fewer_differences() -> None:
    incoming = chat("What is the capital of France?", temperature=0.5)
    candidates = [
        (1, chat("How tall is the Eiffel tower?", temperature=0.5)),
        (2, chat("What is the capital of France?", model="gpt-4o-mini")),  # same words, two differences
        (3, chat("What is the capital of France?", temperature=0.5)),  # same words, no difference
        (4, chat("What is the capital of Spain?", temperature=0.5)),
    ]
    nearest = nearest_recordings(incoming, candidates)
    assert [n.entry_id for n in nearest] == [3, 2, 4]
    assert nearest[0] == Nearest(3, 1.0, (), reviewable=True)
    assert nearest[1] == Nearest(2, 1.0, ("model differs: gpt-4o-mini → gpt-4o", "parameters differ: temperature=0.5 only in this request"))
    assert nearest[2].similarity == round(2 * 5 / 12, 3)
    assert nearest[2].differences == ("message 1 (user) text differs: '…e capital of Spain?' → '…e capital of France?'",)


def test_a_same_shape_recordings_similarity_is_the_review_queues_score() -> None:
    """One score for the miss message, the queue and the review page: the conversation's word overlap
    (0.9 here, a long shared system prompt) named a recording the queue scored below its floor."""
    system = "You are a careful assistant for the city archive of Ghent. " * 4
    incoming = replace(chat("Bitte nenne drei Brücken"), system=system)
    recorded = replace(chat("Wann wurde das Rathaus gebaut"), system=system)
    (nearest,) = nearest_recordings(incoming, [(7, recorded)])
    assert nearest.reviewable and nearest.similarity == round(near_match(incoming, recorded, ProjectSettings()).score, 3)
    assert nearest.similarity < ProjectSettings().lexical_review_threshold


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(1, [5]), (2, [5, 4]), (3, [5, 4, 1]), (10, [5, 4, 1])],
)
def test_nearest_recordings_prefer_the_newest_of_equals_and_keep_the_limit(limit: int, expected: list[int]) -> None:
    candidates = [(1, chat(QUESTION)), (5, chat(QUESTION)), (4, chat(QUESTION))]
    assert [n.entry_id for n in nearest_recordings(chat(QUESTION), candidates, limit)] == expected


def test_nearest_recordings_of_nothing() -> None:
    assert nearest_recordings(chat(QUESTION), []) == []


# ---------------------------------------------------------------- miss_message


HOW_TO_RECORD = ("To record it, run the test once with the proxy in auto or record mode "
                 "(e.g. `semula exec --mode auto -- <test command>`), then replay again.")
IN_CI = "In CI: record on a developer machine and commit the new files in the recordings folder."
NEAR = Nearest(42, 0.875, ("model differs: gpt-4o → gpt-4o-mini", "parameters differ: temperature=0.5 only in this request"))
VERDICT = Verdict("lexical", 0.8123, serve=False, review=True, reason="below the serve threshold 1.00")


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (("ci", "replay", [NEAR], []), [
            "semula: no recording matches this request (project 'ci', mode replay).",
            "Nearest recording: #42 (similarity 0.88): model differs: gpt-4o → gpt-4o-mini; "
            "parameters differ: temperature=0.5 only in this request.",
            HOW_TO_RECORD,
        ]),
        (("fresh", "replay", [], []), [
            "(project 'fresh', mode replay)", "Project 'fresh' has no recordings yet.", HOW_TO_RECORD,
        ]),
        (("ci", "replay", [Nearest(7, 1.0, ())], []), [
            "Nearest recording: #7 (similarity 1.00): no field differs after normalisation.",
        ]),
        (("ci", "replay", [NEAR], ["team-b", "team-a"]), [
            "An identical request is recorded in project(s) 'team-a', 'team-b': select the project with "
            "HTTPS_PROXY=http://<project>:semula@host:port or the x-semula-project header.",
        ]),
        (("ci", "replay", [], [], "the body is not JSON"), [
            "semula: this request cannot be replayed (project 'ci', mode replay): the body is not JSON.",
            HOW_TO_RECORD,
        ]),
        (("ci", "replay", [NEAR], [], None, Candidate(42, VERDICT, candidate_id=9)), [
            "A near-match is queued for review: candidate #9 (lexical, score 0.81, recording #42; "
            "not served: below the serve threshold 1.00). If its answer is right for this request, approve it "
            "(`semula review show 9` shows both) with `semula review approve 9` and replay again.",
        ]),
        (("ci", "replay", [NEAR], [], None, Candidate(42, VERDICT, candidate_id=9), ("fp2:" + "a" * 60, "fp2:" + "b" * 60)), [
            "From another machine (a CI store's ids mean nothing there): run the test there in replay mode, which "
            "queues the same candidate, then `semula review approve --request fp2:aaaaaaaaaaaaaaaa "
            "--recording fp2:bbbbbbbbbbbbbbbb` and commit the alias file",
        ]),
        (("ci", "replay", [NEAR], [], None, Candidate(42, replace(VERDICT, reason=None))), [
            "Best near-match: recording #42 (lexical, score 0.81; not served: not served).",
        ]),
    ],
)
def test_miss_message_says_what_to_do(args: tuple, wanted: list[str]) -> None:
    message = miss_message(*args)
    for piece in wanted:
        assert piece in message


def test_miss_message_names_project_mode_nearest_fields_and_how_to_record() -> None:
    incoming = chat("What is the capital of France?", model="gpt-4o-mini", temperature=0.5)
    nearest = nearest_recordings(incoming, [(11, chat("Tell me a joke")), (12, RECORDED)])
    message = miss_message("checkout-tests", "replay", nearest, [])
    assert message.startswith("semula: no recording matches this request (project 'checkout-tests', mode replay).")
    assert "Nearest recording: #12 (similarity 1.00)" in message
    assert "model differs: gpt-4o → gpt-4o-mini" in message
    assert "parameters differ: temperature=0.5 only in this request" in message
    assert message.endswith(HOW_TO_RECORD + " " + IN_CI)


def test_miss_message_lists_at_most_six_differences() -> None:
    nearest = [Nearest(1, 0.5, tuple(f"parameter p{i}=1 only in this request" for i in range(8)))]
    message = miss_message("p", "replay", nearest, [])
    assert "p5=1" in message and "p6=1" not in message


def test_a_problem_does_not_claim_the_project_is_empty() -> None:
    assert "has no recordings yet" not in miss_message("p", "replay", [], [], "the body is not JSON")


def test_approve_by_fingerprints_only_in_replay_and_only_when_both_are_known() -> None:
    queued = Candidate(42, VERDICT, candidate_id=9)
    assert "--request" not in miss_message("ci", "auto", [NEAR], [], None, queued, ("fp2:a", "fp2:b"))
    assert "--request" not in miss_message("ci", "replay", [NEAR], [], None, queued, ("fp2:a", None))
    assert "--request fp2:a --recording fp2:b" in miss_message("ci", "replay", [NEAR], [], None, queued,
                                                               ("fp2:a", "fp2:b"))


def test_the_nearest_recording_of_another_provider_comes_after_the_same_endpoint() -> None:
    same = chat("Translate the weather report into French please")
    other = replace(chat("What is the capital of France?"), provider="anthropic", endpoint="/v1/messages")
    incoming = chat("What is the capital of France?", stream=True)
    nearest = nearest_recordings(incoming, [(1, other), (2, same)])
    assert [n.entry_id for n in nearest] == [2, 1]
    assert "stream differs: False → True" in nearest[0].differences
    assert any(d.startswith("message 1 (user) text differs") for d in nearest[0].differences), nearest[0]
    assert not any("context differs" in d for d in nearest[0].differences)
