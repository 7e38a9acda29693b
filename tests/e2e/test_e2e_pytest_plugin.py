"""The pytest plugin as a user runs it: `pytest --semula=MODE` on a small suite (pytester, in a subprocess).

Each run starts one real `semula proxy` in front of the fake provider; the inner tests use the
OpenAI SDK created inside the test, so the plugin's environment is all that points it at semula.
Five proxy start-ups: record in auto, replay from the folder (alone and under pytest-xdist),
replay without a folder, and one running proxy that the plugin reuses in its mode and refuses in another.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, map_remote_args, uniq

pytestmark = pytest.mark.e2e
pytest_plugins = ("pytester",)

SUITE = '''
import os
import re

import openai
import pytest


def ask(prompt):
    client = openai.OpenAI(max_retries=0)
    try:
        return client.chat.completions.create(
            model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt}}]).choices[0].message.content
    except openai.NotFoundError:
        return None  # code that swallows the error: only the plugin can tell the test failed


def test_default_project():
    ask("{default_prompt}")


@pytest.mark.semula_project("alpha")
def test_alpha_project(semula):
    assert semula.project == "alpha" and "alpha:" in semula.proxy_url
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    assert os.environ["HTTPS_PROXY"] == semula.proxy_url
    # The password tags the session's calls (`semula-s<hex>`), a worker's with its id after a dot.
    assert re.search(r"alpha:semula-s[0-9a-f]{{8}}" + (re.escape("." + worker) if worker else "") + "@",
                     semula.proxy_url)
    ask("{alpha_prompt}")


@pytest.mark.semula_project("beta")
def test_beta_project_sees_not_alphas_recording():
    ask("{alpha_prompt}")


def test_unrecorded():
    ask("{unrecorded_prompt}")


def test_no_call():
    # one certificate: semula's CA alone (--semula-intercept-all); else the public roots beside it
    if os.environ.get("BUNDLE_COUNT_OUT"):
        with open(os.environ["BUNDLE_COUNT_OUT"], "w") as out:
            if os.environ.get("SSL_CERT_FILE"):
                out.write(str(open(os.environ["SSL_CERT_FILE"]).read().count("BEGIN CERTIFICATE")))
            else:  # the hashed directory: one file a certificate
                out.write(str(len(os.listdir(os.environ["SSL_CERT_DIR"]))))
'''


@pytest.fixture(scope="module")
def prompts() -> dict[str, str]:
    return {"default_prompt": uniq("plugin default"), "alpha_prompt": uniq("plugin alpha"),
            "unrecorded_prompt": uniq("plugin unrecorded")}


def run_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake: FakeProvider, confdir: Path,
              mode: str, data_dir: Path, recordings: Path, source: str, *tests: str,
              options: tuple[str, ...] = ()) -> pytest.RunResult:
    pytester.makepyfile(test_suite=source)
    if mode == "replay":
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):  # the plugin's placeholders must do
            monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-plugin-not-a-real-key")
    sets = ["confdir=" + str(confdir), "ssl_insecure=true",
            *[arg for arg in map_remote_args(fake.port) if arg != "--set"]]
    selected = [f"test_suite.py::{name}" for name in tests]
    return pytester.runpytest_subprocess(
        f"--semula={mode}", f"--semula-data-dir={data_dir}", f"--semula-recordings={recordings}",
        *[f"--semula-set={item}" for item in sets], "-p", "no:cacheprovider", *options, *selected, timeout=240)


def test_record_in_auto_then_replay_fails_only_the_tests_that_missed(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider,
        mitm_confdir: Path, prompts: dict[str, str], tmp_path: Path) -> None:
    source = SUITE.format(**prompts)
    recordings = tmp_path / "recordings"
    recorded = run_suite(pytester, monkeypatch, fake_provider, mitm_confdir, "auto", tmp_path / "d-auto",
                         recordings, source, "test_default_project", "test_alpha_project")
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(["*semula ready*mode auto*", "*semula: 2 calls · 0 hits · 2 misses · 0 refused*"])
    assert sorted(p.name for p in recordings.iterdir() if p.is_dir()) == ["alpha", "default"], \
        "the marker sent the alpha test's call to project alpha"

    # Then under pytest-xdist: two workers share the controller's proxy, each fails only its own tests; that
    # proxy decrypts every host, and the workers' clients trust semula's CA alone (--semula-intercept-all).
    for data_dir, options in (("d-replay", ()), ("d-xdist", ("-n", "2", "--semula-intercept-all"))):
        replayed = run_suite(pytester, monkeypatch, fake_provider, mitm_confdir, "replay", tmp_path / data_dir,
                             recordings, source, options=options)
        replayed.assert_outcomes(passed=3, failed=2)
        output = replayed.stdout.str()
        failed = set(re.findall(r"FAILED test_suite.py::(\w+)", output))
        assert failed == {"test_beta_project_sees_not_alphas_recording", "test_unrecorded"}, output
        # Counted at line starts: under CI=… pytest also repeats the whole message in the short summary.
        refusals = re.findall(r"^This test made a call that semula refused in replay mode:$", output, re.M)
        assert len(refusals) == 2, output
        assert "no recording matches this request (project 'beta', mode replay)" in output
        assert "no recording matches this request (project 'default', mode replay)" in output
        assert "semula: 4 calls · 2 hits · 0 misses · 2 refused" in output
        count = tmp_path / f"{data_dir}-certificates"
        monkeypatch.setenv("BUNDLE_COUNT_OUT", str(count))
        run_suite(pytester, monkeypatch, fake_provider, mitm_confdir, "replay", tmp_path / data_dir, recordings,
                  source, "test_no_call", options=options).assert_outcomes(passed=1)
        assert (int(count.read_text()) == 1) is ("--semula-intercept-all" in options), count.read_text()
        monkeypatch.delenv("BUNDLE_COUNT_OUT")


def test_replay_with_no_recordings_folder_is_a_normal_start(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider,
        mitm_confdir: Path, prompts: dict[str, str], tmp_path: Path) -> None:
    after = tmp_path / "environment-after.json"
    pytester.makeconftest(f'''
import json, os, pytest

@pytest.hookimpl(trylast=True)  # after the plugin's own pytest_unconfigure
def pytest_unconfigure(config):
    names = ("HTTPS_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "OPENAI_API_KEY")
    open({str(after)!r}, "w").write(json.dumps({{n: os.environ.get(n) for n in names}}))
''')
    result = run_suite(pytester, monkeypatch, fake_provider, mitm_confdir, "replay", tmp_path / "data",
                       tmp_path / "no-such-folder", SUITE.format(**prompts), "test_unrecorded", "test_no_call")
    result.assert_outcomes(passed=1, failed=1)
    before = {n: os.environ.get(n) for n in ("HTTPS_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "OPENAI_API_KEY")}  # as run_suite left it
    assert before["OPENAI_API_KEY"] is None
    assert json.loads(after.read_text()) == before, "the session's client environment and placeholder key are undone"
    result.stdout.fnmatch_lines(["*semula ready*mode replay*", "*semula: 1 call · 0 hits · 0 misses · 1 refused*",
                                 "*FAILED test_suite.py::test_unrecorded*"])
    assert "Project 'default' has no recordings yet." in result.stdout.str()


def test_without_the_option_the_plugin_is_inactive(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain='''
import os

def test_env(semula):
    pass

def test_no_proxy_set():
    assert "semula" not in os.environ.get("SSL_CERT_FILE", "") + os.environ.get("SSL_CERT_DIR", "")
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*semula is off: run pytest --semula=MODE*"])
    assert "semula ready" not in result.stdout.str()
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    for option in ("--semula=", "--semula-recordings", "--semula-data-dir", "--semula-project"):
        assert option in help_text, option


def test_reuses_a_proxy_in_the_same_mode_and_refuses_another_mode(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, proxy_factory: ProxyFactory,
        prompts: dict[str, str]) -> None:
    running = proxy_factory("auto")
    pid = json.loads((running.data_dir / "admin.json").read_text())["pid"]
    pytester.makepyfile(test_suite=SUITE.format(**prompts))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-plugin-not-a-real-key")
    reused = pytester.runpytest_subprocess("--semula=auto", f"--semula-data-dir={running.data_dir}",
                                           "-p", "no:cacheprovider", "test_suite.py::test_default_project",
                                           timeout=240)
    reused.assert_outcomes(passed=1)
    reused.stdout.fnmatch_lines([f"*reusing the proxy already running*pid {pid}*",
                                 "*semula: 1 call · 0 hits · 1 miss · 0 refused*"])
    refused = pytester.runpytest_subprocess("--semula=replay", f"--semula-data-dir={running.data_dir}",
                                            "-p", "no:cacheprovider", timeout=240)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str() + refused.stderr.str()
    message = refused.stderr.str()
    for needle in (f"pid {pid}", "a proxy in auto mode", "--semula-data-dir DIR"):
        assert needle in message, (needle, message)
    assert (running.data_dir / "admin.json").exists(), "the running proxy is left alone"
