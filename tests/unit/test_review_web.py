"""semula.review_web: the word and field highlight, the escaping of hostile prompts, and the server's
token, CSRF and host checks against a real temporary store (the browser flow: tests/e2e/test_e2e_review_web.py)."""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from entries import chat, new_entry
from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
from semula.core.cascade import Candidate
from semula.core.nearmatch import Verdict
from semula.engine.engine import Engine
from semula.engine.operations import run_operation
from semula.proxy.admin import dumps
from semula.review_web.highlight import ABSENT, FieldChange, Segment, field_changes, side_by_side, tokens, word_segments
from semula.review_web.page import Filters, QueuePage, candidate_html, page_html
from semula.review_web.server import ReviewWeb, parse_filters
from semula.store.selection import open_store

# --- the word diff ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("recorded", "incoming", "left", "right"), [
    ("list three quiet hotels", "list three calm hotels",
     [Segment("same", "list three "), Segment("removed", "quiet "), Segment("same", "hotels")],
     [Segment("same", "list three "), Segment("added", "calm "), Segment("same", "hotels")]),
    ("open on Sunday", "open on Sunday please",
     [Segment("same", "open on Sunday")],
     [Segment("same", "open on Sunday "), Segment("added", "please")]),
    ("is it not late?", "is it late?",
     [Segment("same", "is it "), Segment("removed", "not "), Segment("same", "late?")],
     [Segment("same", "is it "), Segment("same", "late?")]),
    # punctuation is its own token: a changed `!` is marked alone, not the word before it
    ("stop now.", "stop now!",
     [Segment("same", "stop now"), Segment("removed", ".")], [Segment("same", "stop now"), Segment("added", "!")]),
    # re-wrapped whitespace is no change
    ("one two\nthree", "one  two three",
     [Segment("same", "one two\nthree")], [Segment("same", "one  two three")]),
    # Chinese has no spaces: one character is one token
    ("我喜欢猫", "我喜欢狗",
     [Segment("same", "我喜欢"), Segment("removed", "猫")], [Segment("same", "我喜欢"), Segment("added", "狗")]),
])
def test_word_segments_mark_only_the_changed_tokens(recorded: str, incoming: str, left: list, right: list) -> None:
    assert word_segments(recorded, incoming) == (left, right)


@pytest.mark.parametrize("text", ["", "a", "  lead and trail  ", "x<y>&\"z\"\n\tq", "日本語とEnglish 混ざる", "é́ ß"])
def test_tokens_join_back_to_the_text(text: str) -> None:
    assert "".join(tokens(text)) == text


def test_side_by_side_marks_the_changed_word_on_each_side() -> None:
    left, right = side_by_side("When does the city museum open", "When does the town museum open")
    assert left == 'When does the <del class="w">city</del> museum open'
    assert right == 'When does the <ins class="w">town</ins> museum open'


@pytest.mark.parametrize(("recorded", "incoming", "changes"), [
    ({"temperature": 0}, {"temperature": 0}, []),
    ({"temperature": 0}, {"temperature": 0.7}, [FieldChange("temperature", "0", "0.7")]),
    ({}, {"max_tokens": 50}, [FieldChange("max_tokens", ABSENT, "50")]),
    ({"top_p": 1}, {}, [FieldChange("top_p", "1", ABSENT)]),
    ({"response_format": {"type": "text"}}, {"response_format": {"type": "json_object"}},
     [FieldChange("response_format.type", '"text"', '"json_object"')]),
    ({"stop": ["a"]}, {"stop": ["a", "b"]}, [FieldChange("stop", '["a"]', '["a","b"]')]),
    ({"n": 1}, {"n": True}, [FieldChange("n", "1", "true")]),  # as sent: 1 is not true
    (None, {"seed": 1}, [FieldChange("seed", ABSENT, "1")]),
])
def test_field_changes_name_each_differing_leaf(recorded: Any, incoming: Any, changes: list) -> None:
    assert field_changes(recorded, incoming) == changes


# --- escaping: prompts are hostile input -------------------------------------------------------------

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>&amp;'


def hostile_candidate(**overrides: Any) -> dict[str, Any]:
    shape = {"provider": "openai", "method": "POST", "endpoint": "/v1/chat/completions", "model": HOSTILE,
             "stream": False}
    return {"id": 7, "project": HOSTILE, "tier": HOSTILE, "score": 0.8, "guard_reason": HOSTILE, "reason": HOSTILE,
            "status": "open", "entry_id": 3, "request_shape": shape, "recorded_shape": {**shape, "model": "gpt"},
            "shape_differs": HOSTILE, "own_recordings": [], "recorded_text": f"ask {HOSTILE}",
            "request_text": f"ask again {HOSTILE}", "answer": HOSTILE, "answer_format": "text",
            "request_system": HOSTILE, "recorded_system": "be nice", "request_params": {HOSTILE: HOSTILE},
            "recorded_params": {}, "own_answer": HOSTILE, **overrides}


def test_every_piece_of_candidate_text_is_escaped() -> None:
    text = candidate_html(hostile_candidate())
    assert "<script" not in text and "<img" not in text and "&amp;amp;" in text
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;") >= 9


def test_the_page_has_only_its_own_script_and_escapes_the_filters_and_errors() -> None:
    page = QueuePage(Filters(project=HOSTILE, tier=HOSTILE, min_score=0.5), [HOSTILE], ["lexical", HOSTILE],
                     [hostile_candidate()], 1, error=HOSTILE)
    text = page_html(page, token="tok-123", nonce="n0nce")
    assert len(re.findall(r"<script", text)) == 1 and '<script nonce="n0nce">' in text
    assert "<img" not in text and 'data-token="tok-123"' in text


@pytest.mark.parametrize(("query", "filters", "problem"), [
    ("", Filters(), None),
    ("project=team&tier=lexical&min_score=0.75", Filters("team", "lexical", 0.75), None),
    ("min_score=lots", Filters(), "not a number"),
    ("min_score=7", Filters(), "not between 0 and 1"),
    ("project=", Filters(), None),  # "all projects" even when --project named one
])
def test_parse_filters(query: str, filters: Filters, problem: str | None) -> None:
    parsed, said = parse_filters(query, default_project=None)
    assert parsed == filters and (problem is None and said is None or problem in said)


def test_the_cli_project_is_the_default_filter() -> None:
    assert parse_filters("", default_project="team")[0] == Filters("team")


# --- the server on a real store ---------------------------------------------------------------------

VERDICT = Verdict("lexical", 0.8, serve=False, review=True, reason="score 0.80 < serve threshold 1.00",
                  guard_reason=None)


@pytest.fixture
def web(tmp_path) -> Iterator[tuple[ReviewWeb, Engine, list[int]]]:
    engine = Engine.open(open_store(None, tmp_path))
    ids = []
    for text, recorded in (("When does the town museum open?", "When does the city museum open?"),
                           (f"Is the {HOSTILE} park open?", "Is the big park open?")):
        entry_id = engine.record(new_entry(chat(recorded)))
        incoming = chat(text)
        (queued,) = engine.review.queue("p", incoming, request_fingerprint(incoming),
                                        normalised_fingerprint(incoming, (), ()), [Candidate(entry_id, VERDICT)], {})
        ids.append(queued.candidate_id)

    @contextmanager
    def operations() -> Iterator[Any]:
        yield lambda method, params: json.loads(dumps(run_operation(engine, method, params)))

    lines: list[str] = []
    server = ReviewWeb(operations, log=lines.append)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, engine, ids
    finally:
        server.shutdown()
        thread.join()
        engine.close()


def request(server: ReviewWeb, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, dict, str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    connection.request(method, path, body=data, headers={"content-type": "application/json", **headers})
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, text


def signed_in(server: ReviewWeb) -> dict[str, str]:
    status, headers, _ = request(server, "GET", f"/?token={server.token}&tier=lexical")
    assert status == 303 and headers["location"] == "/?tier=lexical", headers
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return {"cookie": cookie.split(";")[0]}


def test_the_page_needs_the_token_and_then_shows_the_queue_escaped(web) -> None:
    server, _, ids = web
    assert request(server, "GET", "/")[0] == 403
    assert request(server, "GET", "/?token=wrong")[0] == 403
    status, headers, page = request(server, "GET", "/", **signed_in(server))
    assert status == 200 and "nonce-" in headers["content-security-policy"]
    assert f'id="c-{ids[0]}"' in page and f'id="c-{ids[1]}"' in page
    assert '<del class="w">city</del>' in page and '<ins class="w">town</ins>' in page
    assert "<img" not in page and len(re.findall("<script", page)) == 1
    for query, shown in (("min_score=0.8&tier=lexical", 2), ("min_score=0.81", 0), ("tier=embedding", 0),
                         ("project=other", 0), ("project=p", 2), ("min_score=oops", 2)):
        page = request(server, "GET", f"/?{query}", **signed_in(server))[2]
        assert page.count('<article class="card"') == shown, query
    assert "min score &#x27;oops&#x27; is not a number" in page


def test_approve_and_reject_need_the_token_header_the_host_and_the_origin(web) -> None:
    server, engine, ids = web
    cookie = signed_in(server)
    token = {"x-semula-token": server.token}
    assert request(server, "POST", "/api/approve", {"id": ids[0]}, **cookie)[0] == 403  # a cookie is not enough
    assert request(server, "POST", "/api/approve", {"id": ids[0]}, **token, host="evil.example:80")[0] == 403
    assert request(server, "POST", "/api/approve", {"id": ids[0]}, **token, origin="http://evil.example")[0] == 403
    assert engine.store.candidate(ids[0])["status"] == "open"
    status, _, text = request(server, "POST", "/api/approve", {"id": ids[0]}, **token,
                              origin=f"http://127.0.0.1:{server.port}")
    answer = json.loads(text)
    assert status == 200 and answer["ok"] and f"approved #{ids[0]}" in answer["message"], answer
    assert engine.store.candidate(ids[0])["status"] == "approved"
    again = json.loads(request(server, "POST", "/api/approve", {"id": ids[0]}, **token)[2])
    assert again == {"ok": False, "error": f"candidate #{ids[0]} is already approved"}
    rejected = json.loads(request(server, "POST", "/api/reject", {"id": ids[1]}, **token)[2])
    assert rejected["ok"] and engine.store.candidate(ids[1])["status"] == "rejected"


def test_a_bad_body_is_a_clear_error_and_the_server_keeps_serving(web) -> None:
    server, _, _ = web
    for body in (b"not json", b"[]", b'{"id": "7"}', b'{"id": true}', b'{"id": -1}', b"{}"):
        status, _, text = request(server, "POST", "/api/reject", body, **{"x-semula-token": server.token})
        assert status == 200 and json.loads(text) == {"ok": False, "error": 'give the candidate\'s id as a positive '
                                                                            'integer: {"id": 7}'}, body
    missing = json.loads(request(server, "POST", "/api/reject", {"id": 999}, **{"x-semula-token": server.token})[2])
    assert missing == {"ok": False, "error": "no review candidate #999"}
    assert request(server, "POST", "/api/approve", b"x" * 5000, **{"x-semula-token": server.token})[0] == 413
    assert request(server, "GET", "/", **signed_in(server))[0] == 200


def test_a_candidate_whose_recording_was_deleted_still_renders() -> None:
    text = candidate_html(hostile_candidate(recorded_shape=None, recorded_params=None, recorded_system=None,
                                            recorded_text="", answer="(the recording was deleted)",
                                            answer_format="body", own_answer=None))
    assert "(the recording was deleted)" in text and "<img" not in text


def test_store_operations_runs_several_operations_on_one_opened_store(tmp_path) -> None:
    from semula.cli.common import store_operations

    with store_operations(tmp_path / "data") as run:
        assert run("review.list", {"status": "open"}) == [] and run("projects", {}) == []
        with pytest.raises(Exception, match="no review candidate #5"):
            run("review.show", {"id": 5})
