"""Answers scoped per test (core/scope.py, proxy/run/scopes.py): the scoped project's name, its settings,
the proxy's record of which test each tag is in, and the addon keying, counting and blaming by it."""

from __future__ import annotations

import base64
import json

import pytest
from test_addon import call, provider_flow, run

from semula.core.scope import base_project, scope_problem, scoped_project
from semula.core.settings import PROJECT_NAME, ProjectSettings
from semula.engine.index import FingerprintIndex
from semula.proxy.run.refusals import Refusals
from semula.proxy.run.scopes import CurrentTests


@pytest.mark.parametrize(("project", "scope", "expected"), [
    ("default", "", "default"),
    ("default", "tests/test_a.py::test_one", "default.t-test-a-py-test-one-"),
    ("alpha", "test_suite.py::test_two[gpt-4o x]", "alpha.t-test-suite-py-test-two-gpt-4o-x-"),
    ("default", "::", "default.t-"),  # nothing readable: the digest alone
])
def test_a_scoped_project_is_named_after_its_base_and_test(project, scope, expected):
    name = scoped_project(project, scope)
    assert name.startswith(expected) and PROJECT_NAME.match(name)
    assert len(name) <= 50, "room for the API key's `.k<hash>`"
    assert base_project(name) == (None if not scope else project)
    assert base_project(name + ".k0123456789ab") == (None if not scope else project + ".k0123456789ab")


def test_scoped_names_stay_valid_and_apart_for_long_names():
    long_scope = "tests/" + "x" * 900 + "::test_" + "y" * 100
    names = {scoped_project(project, scope) for project in ("default", "p" * 64)
             for scope in (long_scope, long_scope + "2", "a::b")}
    assert len(names) == 6 and all(PROJECT_NAME.match(n) and len(n) <= 50 for n in names)
    assert base_project("default") is None and base_project("default.k0123456789ab") is None


@pytest.mark.parametrize(("scope", "problem"), [
    ("tests/test_a.py::test_one[x]", None), ("a\nb", "control characters"), ("x" * 2000, "longer than")])
def test_scope_names_are_checked(scope, problem):
    found = scope_problem(scope)
    assert (found is None) if problem is None else (problem in found)


def test_a_scoped_project_without_settings_has_its_base_projects():
    index = FingerprintIndex()
    strict = ProjectSettings(bypass_temperature=0.0)
    index.set_settings("default", strict)
    scoped = scoped_project("default", "t.py::test_one")
    assert index.settings_for(scoped) == strict
    own = ProjectSettings(bypass_temperature=0.9)
    index.set_settings(scoped, own)
    assert index.settings_for(scoped) == own and index.settings_for("other") == ProjectSettings()


def test_the_proxy_knows_which_test_each_tag_is_in():
    tests = CurrentTests()
    assert tests.answer({"tag": "s1", "test": "t.py::test_one", "scope": "test"})["scope"] == "test"
    tests.answer({"tag": "s2", "test": "t.py::test_one", "scope": "project"})
    one = tests.for_flow("s1", "", "")
    assert (one.test, one.scope) == ("t.py::test_one", "t.py::test_one") and one.run == "~s1::t.py::test_one"
    assert (tests.for_flow("s2", "", "").test, tests.for_flow("s2", "", "").scope) == ("t.py::test_one", "")
    assert tests.for_flow("s2", "", "").run != tests.for_flow("s1", "", "").run, "each session counts on its own"
    header = tests.for_flow("", "other-runner::case", "")
    assert (header.test, header.scope) == ("other-runner::case", "other-runner::case")
    assert tests.for_flow("", "bad\x00name", "r").scope == "" and tests.for_flow("", "", "r").run == "r"
    tests.answer({"tag": "s1", "test": None})
    assert tests.for_flow("s1", "", "").test == ""
    for bad in ({"test": "x"}, {"tag": "s1", "scope": "module"}, {"tag": "s1", "test": 3}):
        with pytest.raises(ValueError):
            tests.answer(bad)


def test_refusals_carry_their_test_and_a_tag_finds_its_workers():
    refusals = Refusals()
    refusals.add("s1", "default", "in a test", "t.py::test_one")
    refusals.add("s1.gw0", "default", "a worker's, between tests")
    refusals.add("", "default", "untagged")
    refusals.add("s2", "default", "another session's")
    found = refusals.answer({"after": 0, "tag": "s1"})["refusals"]
    assert [(r["message"], r["test"]) for r in found] == [("in a test", "t.py::test_one"),
                                                          ("a worker's, between tests", None)]
    with_untagged = refusals.answer({"after": 0, "tag": "s1", "untagged": True})["refusals"]
    assert [r["message"] for r in with_untagged][-1] == "untagged" and len(with_untagged) == 3


def _tagged(tag: str, headers: dict | None = None) -> dict:
    auth = base64.b64encode(f"default:semula-{tag}".encode()).decode()
    return {"proxy-authorization": f"Basic {auth}", **(headers or {})}


def _text(flow) -> str | None:
    return json.loads(flow.response.content).get("choices", [{}])[0].get("message", {}).get("content")


def test_each_test_keeps_its_own_answer_and_the_header_is_not_sent_on(tmp_path):
    async def scenario(addon, tctx):
        addon.life.admin_call(CurrentTests.METHOD, {"tag": "s1", "test": "t.py::test_one", "scope": "test"})
        one = await call(addon, provider_flow(headers=_tagged("s1")), answer="one's answer")
        addon.life.admin_call(CurrentTests.METHOD, {"tag": "s1", "test": "t.py::test_two", "scope": "test"})
        two = await call(addon, provider_flow(headers=_tagged("s1")), answer="two's answer")
        assert one.response.headers["x-semula-decision"] == two.response.headers["x-semula-decision"] == "miss"
        header = provider_flow(headers={"x-semula-scope": "runner::case"})
        await call(addon, header, answer="the runner's answer")
        assert "x-semula-scope" not in header.request.headers

        tctx.configure(addon, semula_mode="replay")
        addon.life.admin_call(CurrentTests.METHOD, {"tag": "s1", "test": "t.py::test_one", "scope": "test"})
        assert _text(await call(addon, provider_flow(headers=_tagged("s1")), answer=None)) == "one's answer"
        addon.life.admin_call(CurrentTests.METHOD, {"tag": "s1", "test": "t.py::test_two", "scope": "test"})
        assert _text(await call(addon, provider_flow(headers=_tagged("s1")), answer=None)) == "two's answer"
        runner = await call(addon, provider_flow(headers={"x-semula-scope": "runner::case"}), answer=None)
        assert _text(runner) == "the runner's answer"
        addon.life.admin_call(CurrentTests.METHOD, {"tag": "s1", "test": None})
        between = await call(addon, provider_flow(headers=_tagged("s1")), answer=None)
        assert between.response.status_code == 404, "between tests: the project's, which has no recording"
        found = addon.life.admin_call(Refusals.METHOD, {"after": 0, "tag": "s1"})["refusals"]
        assert [r["test"] for r in found] == [None], "a refusal outside any test is no test's"

    run(scenario, tmp_path)
