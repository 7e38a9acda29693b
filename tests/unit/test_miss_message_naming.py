"""Replay misses a CI log can act on (pure parts): the first differing JSON path of an unparsed body,
recordings named by their file, no "nearest" below the floor, the sequence-mode approve command,
no empty x-semula-* header, one Gemini placeholder key, and a user's --set winning over semula's own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from entries import chat
from semula.session.clientenv import PLACEHOLDER_KEY
from semula.cli.proxy_cmd import mitmproxy_args
from semula.session.run import run_env
from semula.core.decision import Decision
from semula.core.explain import NEAREST_FLOOR, Nearest, approve_command, differences, miss_message, nearest_recordings
from semula.core.jsondiff import first_difference
from semula.core.nearmatch import Verdict
from semula.proxy.call.headers import semula_headers

# ---------------------------------------------------------------- first_difference


@pytest.mark.parametrize(("recorded", "incoming", "expected"), [
    ({"a": 1}, {"a": 1}, None),
    ({"a": 1}, {"a": 1.0}, "$.a 1 → 1.0"),  # canonical JSON tells them apart, as the fingerprint does
    ({"a": 1}, {"a": 1, "b": [2]}, "$.b=[2] only in this request"),
    ({"a": 1, "b": 2}, {"b": 2}, "$.a=1 only in the recording"),
    ({"input": [{"id": "call_1"}, {"id": "x"}]}, {"input": [{"id": "call_1"}, {"id": "y"}]}, '$.input[1].id "x" → "y"'),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, "$.a: 3 items, the recording has 2"),
    ({"a b": 1}, {"a b": 2}, '$["a b"] 1 → 2'),
    (None, {"x": 1}, '$ null → {"x":1}'),
    ({"id": "pyd_ai_" + "0" * 40 + "a"}, {"id": "pyd_ai_" + "0" * 40 + "b"},
     '$.id "…' + "0" * 13 + 'a" → "…' + "0" * 13 + 'b"'),  # long strings shown around their difference
])
def test_first_difference(recorded: object, incoming: object, expected: str | None) -> None:
    assert first_difference(recorded, incoming) == expected


def test_first_difference_of_hostile_nesting_stops() -> None:
    deep_a: object = 1
    deep_b: object = 2
    for _ in range(500):
        deep_a, deep_b = [deep_a], [deep_b]
    assert first_difference(deep_a, deep_b).startswith("$[0][0]")


def test_an_unparsed_body_names_its_first_differing_path() -> None:
    recorded = replace(chat("x"), parsed=False, body={"model": "m", "messages": [{"content": "a", "id": "r1"}]})
    incoming = replace(recorded, body={"model": "m", "messages": [{"content": "a", "id": "r2"}]})
    assert differences(incoming, recorded) == ['body differs at $.messages[0].id "r1" → "r2"']


# ---------------------------------------------------------------- miss_message

FILE = "default/openai/v1-chat-completions/what-is-the-capital-of-france-0123456789ab.json"


def test_the_nearest_recording_is_named_by_its_file_and_the_refused_call_by_method_and_path() -> None:
    near = Nearest(12, 0.9, ("parameters differ: temperature 0 → 0.7",))
    message = miss_message("ci", "replay", [near], [], files={12: FILE}, request_line="POST /v1/chat/completions")
    assert message.startswith("semula: no recording matches this request (project 'ci', mode replay): "
                              "POST /v1/chat/completions.")
    assert f"Nearest recording: {FILE} (similarity 0.90): parameters differ: temperature 0 → 0.7." in message
    assert "#12" not in message


def test_without_a_file_the_store_id_is_all_that_names_it() -> None:
    assert "Nearest recording: #12 " in miss_message("ci", "replay", [Nearest(12, 0.9, ())], [])


def test_a_queued_candidate_names_its_recordings_file() -> None:
    candidate = type("C", (), {"entry_id": 12, "candidate_id": 3,
                               "verdict": Verdict("lexical", 0.8, serve=False, review=True, reason="low")})()
    message = miss_message("ci", "replay", [Nearest(12, 0.9, ())], [], None, candidate, files={12: FILE})
    assert f"candidate #3 (lexical, score 0.80, recording {FILE}; not served: low)" in message


@pytest.mark.parametrize(("similarity", "named"), [(NEAREST_FLOOR, True), (NEAREST_FLOOR - 0.01, False), (0.0, False)])
def test_no_nearest_below_the_floor(similarity: float, named: bool) -> None:
    message = miss_message("ci", "replay", [Nearest(5, similarity, ("message 1 (user) text differs",))], [])
    assert ("Nearest recording" in message) is named, message
    assert ("No recording in project 'ci' is close to this request" in message) is not named, message
    assert "has no recordings yet" not in message


def test_a_close_recording_further_down_the_ranking_is_named() -> None:
    message = miss_message("ci", "replay", [Nearest(1, 0.1, ()), Nearest(2, 0.8, ("endpoint differs: x → y",))], [])
    assert "Nearest recording: #2 (similarity 0.80): endpoint differs" in message


def test_two_bodiless_calls_to_one_endpoint_are_alike() -> None:
    get = replace(chat("x"), method="GET", endpoint="/v1/models", messages=(), body=None, parsed=False)
    [near] = nearest_recordings(replace(get, query=(("limit", "5"),)), [(1, get)])
    assert near.similarity == 1.0 and near.differences == ('query differs: {} → {"limit":"5"}',)


def test_the_approve_command_of_a_sequences_nth_occurrence_names_the_bare_fingerprint() -> None:
    assert approve_command(None, "nfp2:abc#3", "fp2:def") == "semula review approve --request nfp2:abc --recording fp2:def"


# ---------------------------------------------------------------- headers, keys, --set


def test_a_miss_sends_no_empty_score_or_entry_header() -> None:
    assert semula_headers(Decision("miss", "refuse")) == {"x-semula-decision": "miss", "x-semula-tier": "none"}
    hit = semula_headers(Decision("hit", "serve", "exact", entry_id=4, score=1.0))
    assert hit["x-semula-score"] == "1.000" and hit["x-semula-entry"] == "4"


@pytest.mark.parametrize(("environ", "gemini", "google"), [
    ({}, None, PLACEHOLDER_KEY),  # one of the pair, the one google-genai reads first: it warns when both are set
    ({"GOOGLE_API_KEY": "real"}, None, None),  # the user's key is never shadowed
    ({"GEMINI_API_KEY": "real"}, None, None),
])
def test_replay_sets_one_google_placeholder(tmp_path: Path, environ: dict[str, str], gemini: str | None,
                                            google: str | None) -> None:
    env = run_env("replay", (), "127.0.0.1", 8080, tmp_path, environ)
    assert env.get("GEMINI_API_KEY") == gemini and env.get("GOOGLE_API_KEY") == google
    assert env["OPENAI_API_KEY"] == PLACEHOLDER_KEY


def sets_of(args: list[str]) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == "--set"]


@pytest.mark.parametrize("user", ["web_open_browser=true", "flow_detail=2", "connection_strategy=eager",
                                  "web_columns=path"])
def test_a_users_set_wins_over_semulas_own(user: str) -> None:
    sets = sets_of(mitmproxy_args("auto", "127.0.0.1", 8080, Path("d"), "default", (user,), web=True))
    name = user.split("=", 1)[0]
    assert [s for s in sets if s.split("=", 1)[0] == name] == [user]


def test_semulas_own_values_stay_when_the_user_sets_other_options() -> None:
    sets = sets_of(mitmproxy_args("auto", "127.0.0.1", 8080, Path("d"), "default", ("web_port=9999",), web=True))
    assert "web_open_browser=false" in sets and "web_port=9999" in sets and "flow_detail=0" in sets
    assert any(s.startswith("allow_hosts=") for s in sets)
