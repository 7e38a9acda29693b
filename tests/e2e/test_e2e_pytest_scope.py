"""The pytest plugin's per-test answers, ordered repeats, no-test refusals and port (issue 21).

Inner pytest runs (pytester, in a subprocess) through a real `semula proxy` in front of the fake
provider, with the OpenAI SDK — created at module level, before any test runs, as real suites do:
- `--semula-scope=test`: two tests send the same first request (a Responses call) and then
  `GET /v1/responses/{id}` of their own id; recorded in auto, replayed offline, each keeps its own.
- ordered repeats are the plugin's default, counted per test, and from 1 again in a second session
  that reuses the running proxy;
- a refused call made outside any test fails no test and is listed in the summary; `--semula-port`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, free_port, map_remote_args, uniq

pytestmark = pytest.mark.e2e
pytest_plugins = ("pytester",)

SCOPE_SUITE = '''
import json, os

import openai

client = openai.OpenAI(max_retries=0)  # before any test: only the proxy can tell the tests apart


def note(**fields):
    with open(os.environ["SEMULA_TEST_OUT"], "a") as f:
        f.write(json.dumps(fields) + "\\n")


def converse(name):
    first = client.responses.create(model="gpt-4o-mini", input="{prompt}")
    again = client.responses.retrieve(first.id)  # the follow-up names this test's own answer
    assert again.id == first.id
    note(test=name, id=first.id, text=first.output_text, again=again.output_text)


def test_one():
    converse("one")


def test_two():
    converse("two")


def test_repeats():
    answers = [client.chat.completions.create(model="gpt-4o-mini", messages=[
        {{"role": "user", "content": "{repeat}"}}]).choices[0].message.content for _ in range(2)]
    note(test="repeats", answers=answers)
'''

REPEAT_SUITE = '''
import json, os

import openai


def ask_twice(name):
    client = openai.OpenAI(max_retries=0)
    answers = [client.chat.completions.create(model="gpt-4o-mini", messages=[
        {{"role": "user", "content": "{repeat}"}}]).choices[0].message.content for _ in range(2)]
    with open(os.environ["SEMULA_TEST_OUT"], "a") as f:
        f.write(json.dumps({{"test": name, "answers": answers}}) + "\\n")


def test_a():
    ask_twice("a")


def test_b():
    ask_twice("b")
'''

OUTSIDE_SUITE = '''
import os

import openai
import pytest

client = openai.OpenAI(max_retries=0)


def ask(prompt):
    try:
        return client.chat.completions.create(
            model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt}}]).choices[0].message.content
    except openai.NotFoundError:
        return None  # swallowed: only the plugin can tell which test made the call


ask("{at_import}")  # made while collecting: before any test


def test_port():
    assert os.environ["HTTPS_PROXY"].endswith(":{port}")


def test_unrecorded():
    ask("{in_test}")
'''

AFTER_LAST_TEST = '''
import openai
import pytest


@pytest.hookimpl(tryfirst=True)  # before the plugin's own: after the last test, with the proxy still up
def pytest_sessionfinish(session):
    try:
        openai.OpenAI(max_retries=0).chat.completions.create(
            model="gpt-4o-mini", messages=[{{"role": "user", "content": "{after}"}}])
    except openai.NotFoundError:
        pass
'''


def inner_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake: FakeProvider, confdir: Path,
              mode: str, data_dir: Path, *options: str, recordings: Path | None = None) -> pytest.RunResult:
    if mode == "replay":
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the plugin's placeholder must do
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-scope-not-a-real-key")
    sets = ["confdir=" + str(confdir), "ssl_insecure=true",
            *[arg for arg in map_remote_args(fake.port) if arg != "--set"]]
    where = (f"--semula-recordings={recordings}",) if recordings else ()
    return pytester.runpytest_subprocess(
        f"--semula={mode}", f"--semula-data-dir={data_dir}", *where, *[f"--semula-set={s}" for s in sets],
        "-p", "no:cacheprovider", *options, timeout=120)


def notes(path: Path) -> dict[str, dict]:
    found = {}
    for line in path.read_text().splitlines():
        note = json.loads(line)
        found[note["test"]] = note
    path.unlink()
    return found


def test_each_test_keeps_its_own_answer_and_follow_up_under_scope_test(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider,
        mitm_confdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "notes.jsonl"
    monkeypatch.setenv("SEMULA_TEST_OUT", str(out))
    pytester.makepyfile(test_suite=SCOPE_SUITE.format(prompt=uniq("scoped first"), repeat=uniq("scoped repeat")))
    recordings = tmp_path / "recordings"

    recorded = inner_run(pytester, monkeypatch, fake_provider, mitm_confdir, "auto", tmp_path / "d-auto",
                         "--semula-scope=test", recordings=recordings)
    recorded.assert_outcomes(passed=3)
    recorded.stdout.fnmatch_lines(["*semula: 6 calls · 0 hits · 6 misses · 0 refused*"])
    first = notes(out)
    assert first["one"]["id"] != first["two"]["id"], "the same first request, each test its own upstream answer"
    assert first["one"]["text"] != first["two"]["text"]
    assert len(set(first["repeats"]["answers"])) == 2, "ordered repeats are the plugin's default"
    projects = sorted(p.name for p in recordings.iterdir() if p.is_dir())
    assert len(projects) == 3 and all(p.startswith("default.t-test-suite-py-test-") for p in projects), projects
    assert [p for p in projects if "-test-one-" in p] and [p for p in projects if "-test-two-" in p], projects
    files = sorted(str(f.relative_to(recordings)) for f in recordings.rglob("*.json") if f.parent != recordings)
    assert len([f for f in files if "-test-one-" in f]) == 2, files  # its Responses call and its GET

    # Replay (never the network) from a fresh data dir that loads the folder: each test gets its own again.
    replayed = inner_run(pytester, monkeypatch, fake_provider, mitm_confdir, "replay", tmp_path / "d-replay",
                         "--semula-scope=test", recordings=recordings)
    replayed.assert_outcomes(passed=3)
    replayed.stdout.fnmatch_lines(["*semula: 6 calls · 6 hits · 0 misses · 0 refused*"])
    assert notes(out) == first


def test_a_second_session_on_a_running_proxy_counts_repeats_from_one(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, proxy_factory: ProxyFactory,
        tmp_path: Path) -> None:
    running = proxy_factory("auto", extra_args=("--set", "semula_repeats=sequence"))
    out = tmp_path / "notes.jsonl"
    monkeypatch.setenv("SEMULA_TEST_OUT", str(out))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-scope-not-a-real-key")
    pytester.makepyfile(test_suite=REPEAT_SUITE.format(repeat=uniq("session repeat")))
    runs = []
    for _ in range(2):
        result = pytester.runpytest_subprocess("--semula=auto", f"--semula-data-dir={running.data_dir}",
                                               "-p", "no:cacheprovider", timeout=120)
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(["*reusing the proxy already running*"])
        runs.append((notes(out), result.stdout.str()))
    (first, first_output), (second, second_output) = runs
    assert len(set(first["a"]["answers"])) == 2, "two identical calls in a test: two answers, in order"
    assert first["b"] == {**first["a"], "test": "b"}, "each test counts from 1 (project scope shares the answers)"
    assert second == first, "the second session counts from 1 again: the same answers in the same order"
    assert "semula: 4 calls · 2 hits · 2 misses · 0 refused" in first_output, first_output
    assert "semula: 4 calls · 4 hits · 0 misses · 0 refused" in second_output, second_output


def test_a_refusal_outside_any_test_fails_none_and_the_port_is_the_one_given(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider,
        mitm_confdir: Path, tmp_path: Path) -> None:
    port = free_port()
    prompts = {"at_import": uniq("outside at import"), "in_test": uniq("outside in test"),
               "after": uniq("outside after the last test")}
    pytester.makepyfile(test_suite=OUTSIDE_SUITE.format(port=port, **prompts))
    pytester.makeconftest(AFTER_LAST_TEST.format(**prompts))
    result = inner_run(pytester, monkeypatch, fake_provider, mitm_confdir, "replay", tmp_path / "data",
                       f"--semula-port={port}", recordings=tmp_path / "none")
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    assert set(re.findall(r"FAILED test_suite.py::(\w+)", output)) == {"test_unrecorded"}, output
    assert f"semula ready: http://127.0.0.1:{port}" in output, output
    assert "semula: 3 calls · 0 hits · 0 misses · 3 refused" in output, output
    assert "semula: 2 call(s) refused in replay outside any test" in output, output
    summary = output[output.index("outside any test"):]
    assert len(re.findall(r"^- project default: ", summary, re.M)) == 2, summary
    failure = output[output.index("_ test_unrecorded _"):output.index("semula: 2 call(s)")]
    assert "This test made a call that semula refused in replay mode" in failure
    assert failure.count("This test made a call") == 1, failure


def test_bad_port_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--semula=replay", "--semula-port=70000", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--semula-port 70000 is not a port" in result.stderr.str()
