"""The proxy's numbered replay refusals (what the pytest plugin asks for) and the run tag of a proxy password."""

from __future__ import annotations

import base64

import pytest

from semula.proxy.call.identity import proxy_credentials, proxy_user
from semula.proxy.run.refusals import SEQ_FILE, Refusals, tag_of


def basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("header, expected", [
    (basic("alpha:semula"), ("alpha", "semula")),
    (basic("alpha:semula-gw1"), ("alpha", "semula-gw1")),
    (basic("alpha"), ("alpha", None)),
    (basic(":pw"), (None, "pw")),
    ("Bearer x", (None, None)),
    ("Basic !!!", (None, None)),
    (None, (None, None)),
])
def test_proxy_credentials(header: str | None, expected: tuple[str | None, str | None]) -> None:
    assert proxy_credentials(header) == expected
    assert proxy_user(header) == expected[0]


@pytest.mark.parametrize("password, tag", [
    ("semula-gw0", "gw0"), ("semula", ""), ("hunter2", ""), (None, ""), ("semula-", ""),
])
def test_tag_of(password: str | None, tag: str) -> None:
    assert tag_of(password) == tag


def test_refusals_since_a_number_and_of_one_tag() -> None:
    refusals = Refusals(keep=3)
    assert refusals.since(None) == {"last": 0, "refusals": []}
    refusals.add("", "default", "first")
    start = refusals.since(None)["last"]
    refusals.add("gw0", "default", "second")
    refusals.add("gw1", "alpha", "third")
    assert [r["message"] for r in refusals.since(start)["refusals"]] == ["second", "third"]
    assert [r["message"] for r in refusals.since(start, "gw1")["refusals"]] == ["third"]
    assert refusals.since(3) == {"last": 3, "refusals": []}
    refusals.add("", "default", "fourth")
    refusals.add("", "default", "fifth")
    assert [r["seq"] for r in refusals.since(0)["refusals"]] == [3, 4, 5], "only the newest are kept"


def test_the_published_number_is_the_last_refusal_s_before_the_next_question(tmp_path):
    refusals = Refusals()
    said = refusals.publish(tmp_path)
    assert said == {"refusals_file": str(tmp_path / SEQ_FILE)}
    assert int((tmp_path / SEQ_FILE).read_bytes()) == 0 == refusals.since(None)["last"]
    for n in (1, 2, 3):
        refusals.add("t", "p", f"refused {n}")
        assert int((tmp_path / SEQ_FILE).read_bytes()) == n == refusals.since(None)["last"]
    assert (tmp_path / SEQ_FILE).stat().st_mode & 0o077 == 0
    refusals.close()
    assert not (tmp_path / SEQ_FILE).exists()  # a plugin that cannot read it asks every time


def test_a_link_where_the_number_goes_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep me")
    (tmp_path / SEQ_FILE).symlink_to(target)
    refusals = Refusals()
    assert refusals.publish(tmp_path) == {}  # admin.json names no file: the plugin asks after every test
    refusals.add("t", "p", "refused")
    assert target.read_text() == "keep me" and refusals.since(0)["refusals"][0]["message"] == "refused"
    refusals.close()
