"""The console line and the mitmweb comment say when a call queued review candidates, and name
the host when the upstream could not be reached."""

from __future__ import annotations

from semula.calllog.schema import CallRow
from semula.core.cascade import Candidate, NearSearch, Outcome
from semula.core.decision import Decision
from semula.core.nearmatch import Verdict
from semula.proxy.call.console import console_line
from semula.proxy.call.headers import flow_comment
from semula.proxy.call.flowstate import FlowState

VERDICT = Verdict("lexical", 0.8, serve=False, review=True, reason="below the serve threshold")
ROW = CallRow(provider="openai", method="POST", path="/v1/chat/completions")


def state_with(queued: tuple[Candidate, ...], error: str | None = None) -> FlowState:
    state = FlowState(host="api.openai.com", project="default", no_cache=False, path="/v1/chat/completions")
    near = NearSearch(best=queued[0] if queued else None, queued=queued)
    state.outcome = Outcome(Decision("miss", "forward", record=True), near=near)
    state.error = error
    return state


def test_a_miss_that_queued_candidates_says_so_with_the_command_to_look() -> None:
    state = state_with((Candidate(3, VERDICT, 7), Candidate(4, VERDICT, 8)))
    for text in (console_line(state, ROW, recorded=False), flow_comment(state.decision, None, state)):
        assert "queued for review #7, #8 (`semula review show 7`)" in text, text


def test_an_unreachable_upstream_and_a_queued_candidate_are_both_said() -> None:
    state = state_with((Candidate(3, VERDICT, 7),), error="upstream api.openai.com unreachable: refused")
    line = console_line(state, ROW, recorded=False)
    assert "upstream api.openai.com unreachable" in line and "queued for review #7" in line, line
    assert line.endswith("· no response · -")


def test_nothing_queued_says_nothing() -> None:
    assert "queued" not in console_line(state_with(()), ROW, recorded=False)


def test_a_recorded_miss_says_its_queued_candidates_were_closed_not_queued() -> None:
    state = state_with((Candidate(3, VERDICT, 7),))
    line = console_line(state, ROW, recorded=True)
    assert "queued for review" not in line and "semula review show" not in line, line
    assert "review candidate(s) #7 closed: this call's recording answers the request" in line, line
