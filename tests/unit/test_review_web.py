"""semula.review_web: the word and field highlight, the escaping of hostile prompts, and the server's
token, Origin and Host checks against a real temporary store (the browser flow: tests/e2e/test_e2e_review_web.py)."""

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
from semula.admin.protocol import dumps
from semula.review_web.highlight import ABSENT, FieldChange, Segment, field_changes, side_by_side, tokens, word_segments
from semula.review_web.page import Filters, QueuePage, candidate_html, queue_html, shell_html
from semula.review_web.server import ReviewWeb, parse_filters
from semula.store.selection import StoreSpec, open_store

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
    text = queue_html(page)
    assert "<script" not in text and "<img" not in text and "&lt;script&gt;" in text
    shell = shell_html(nonce="n0nce")
    assert len(re.findall(r"<script", shell)) == 1 and '<script nonce="n0nce">' in shell
    assert "sessionStorage" in shell and "history.replaceState" in shell and "cookie" not in shell


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
    engine = Engine.open(open_store(StoreSpec.parse(None, tmp_path)))
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
    """What the page's script sends: the token header (the same-origin GET carries no Origin)."""
    return {"x-semula-token": server.token}


def posting(server: ReviewWeb) -> dict[str, str]:
    return {**signed_in(server), "origin": f"http://127.0.0.1:{server.port}"}


def queue_page(server: ReviewWeb, query: str = "") -> str:
    status, _, text = request(server, "GET", f"/api/queue{query}", **signed_in(server))
    answer = json.loads(text)
    assert status == 200 and answer["ok"], answer
    return answer["html"]


def test_the_shell_holds_nothing_and_the_queue_needs_the_token_and_is_escaped(web) -> None:
    server, _, ids = web
    assert server.url == f"http://127.0.0.1:{server.port}/#token={server.token}"
    status, headers, shell = request(server, "GET", "/")
    assert status == 200 and "nonce-" in headers["content-security-policy"] and "set-cookie" not in headers
    assert "museum" not in shell and server.token not in shell
    assert request(server, "GET", f"/?token={server.token}")[0] == 400  # never in a query: logs, Referers
    for headers in ({}, {"x-semula-token": "wrong"}, {"cookie": f"semula_review_{server.port}={server.token}"}):
        status, answer, text = request(server, "GET", "/api/queue", **headers)
        assert status == 401 and "museum" not in text and "set-cookie" not in answer, headers
    assert request(server, "GET", "/api/queue", **signed_in(server), host="evil.example:80")[0] == 403
    page = queue_page(server)
    assert f'id="c-{ids[0]}"' in page and f'id="c-{ids[1]}"' in page
    assert '<del class="w">city</del>' in page and '<ins class="w">town</ins>' in page
    assert "<img" not in page and "<script" not in page
    for query, shown in (("min_score=0.8&tier=lexical", 2), ("min_score=0.81", 0), ("tier=embedding", 0),
                         ("project=other", 0), ("project=p", 2), ("min_score=oops", 2)):
        page = queue_page(server, f"?{query}")
        assert page.count('<article class="card"') == shown, query
    assert "min score &#x27;oops&#x27; is not a number" in page


def test_approve_and_reject_need_the_token_header_the_host_and_the_origin(web) -> None:
    server, engine, ids = web
    token, origin = signed_in(server), {"origin": f"http://127.0.0.1:{server.port}"}
    cookie = {"cookie": f"semula_review_{server.port}={server.token}"}
    assert request(server, "POST", "/api/approve", {"id": ids[0]}, **cookie, **origin)[0] == 401
    assert request(server, "POST", "/api/approve", {"id": ids[0]}, **posting(server), host="evil.example:80")[0] == 403
    assert request(server, "POST", "/api/approve", {"id": ids[0]}, **token, origin="http://evil.example")[0] == 403
    assert request(server, "POST", "/api/approve", {"id": ids[0]}, **token)[0] == 403  # no Origin: not the page
    assert engine.store.candidate(ids[0]).status == "open"
    status, _, text = request(server, "POST", "/api/approve", {"id": ids[0]}, **posting(server))
    answer = json.loads(text)
    assert status == 200 and answer["ok"] and f"approved #{ids[0]}" in answer["message"], answer
    assert engine.store.candidate(ids[0]).status == "approved"
    again = json.loads(request(server, "POST", "/api/approve", {"id": ids[0]}, **posting(server))[2])
    assert again == {"ok": False, "error": f"candidate #{ids[0]} is already approved"}
    rejected = json.loads(request(server, "POST", "/api/reject", {"id": ids[1]}, **posting(server))[2])
    assert rejected["ok"] and engine.store.candidate(ids[1]).status == "rejected"


@pytest.mark.parametrize(("bound", "host", "ok"), [
    ("127.0.0.1", "127.0.0.1:{port}", True), ("127.0.0.1", "localhost:{port}", True),
    ("127.0.0.1", "127.0.0.1:1", False), ("127.0.0.1", "rebind.example:{port}", False), ("127.0.0.1", "", False),
    ("0.0.0.0", "192.0.2.7:{port}", True), ("0.0.0.0", "rebind.example:{port}", False),
])
def test_the_host_header_must_name_this_server(bound: str, host: str, ok: bool) -> None:
    @contextmanager
    def nothing() -> Iterator[Any]:
        yield None

    server = ReviewWeb(nothing, host=bound)
    try:
        assert server.host_ok(host.format(port=server.port)) is ok
    finally:
        server.close()


def test_a_bad_body_is_a_clear_error_and_the_server_keeps_serving(web) -> None:
    server, _, _ = web
    for body in (b"not json", b"[]", b'{"id": "7"}', b'{"id": true}', b'{"id": -1}', b"{}"):
        status, _, text = request(server, "POST", "/api/reject", body, **posting(server))
        assert status == 200 and json.loads(text) == {"ok": False, "error": 'give the candidate\'s id as a positive '
                                                                            'integer: {"id": 7}'}, body
    missing = json.loads(request(server, "POST", "/api/reject", {"id": 999}, **posting(server))[2])
    assert missing == {"ok": False, "error": "no review candidate #999"}
    assert request(server, "POST", "/api/approve", b"x" * 5000, **posting(server))[0] == 413
    assert request(server, "GET", "/api/queue", **signed_in(server))[0] == 200


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
