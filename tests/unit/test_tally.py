"""The proxy's own count of its calls (its last console line), read back by the run that started it."""

from __future__ import annotations

from semula.calllog.tally import STOPPED, Tally
from semula.session.run import summary_line


def test_outcomes_follow_the_call_log_query() -> None:
    tally = Tally()
    for decision, mode, reason in [("hit", "replay", None), ("hit", "auto", None), ("miss", "auto", None),
                                   ("miss", "replay", None), ("bypass", "replay", "side call: trace upload"),
                                   ("error", "replay", "store unavailable"), ("bypass", "auto", "not an API call")]:
        tally.add(decision, mode, reason)
    assert (tally.calls, tally.hits, tally.misses, tally.refused) == (7, 2, 1, 2)
    assert tally.text() == "7 calls · 2 hits · 1 miss · 2 refused · 2 other (bypass/passthrough/error)"


def test_the_stopped_line_reads_back() -> None:
    tally = Tally(calls=1, hits=1)
    assert Tally.parse(STOPPED + tally.text()) == tally
    assert Tally.parse("semula: 1 call · 1 hit · 0 misses · 0 refused") is None  # not the proxy's last line
    assert Tally.parse(STOPPED + "garbage") is None
    assert summary_line(tally) == "semula: 1 call · 1 hit · 0 misses · 0 refused"
    assert "made no calls through semula" in summary_line(Tally())


def test_mcp_traffic_that_is_not_a_call_is_not_counted() -> None:
    """The GET stream (asked for again after replay's 405), notifications and DELETE: never a call, never refused."""
    tally = Tally()
    for decision, mode, reason in [("hit", "replay", None), ("miss", "replay", None),
                                   *[("bypass", "replay", "not a call: MCP server-to-client stream (GET) to h/mcp")] * 2,
                                   ("bypass", "auto", "not a call: MCP notification to h/mcp; never recorded")]:
        tally.add(decision, mode, reason)
    assert tally.text() == "2 calls · 1 hit · 0 misses · 1 refused"
