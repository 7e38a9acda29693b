"""Options a run is given, the ways users give them: a misspelt one stops the run before anything starts,
and the pytest plugin loads in a real project's layout and keeps its placeholder keys out of the suite's way.

A misspelt option in each place semula reads options (`--set` on exec and proxy, the plugin's
`--semula-set`, a SEMULA_* variable) is one line naming the closest option, exit 2 (pytest's own
usage-error code, 4, under the plugin), no proxy, no command run, no data dir and no recording. The
plugin runs, recording then replaying under pytest-xdist, in a generated project with nested
conftest.py files, a local plugin given with `-p` and pytest-recording (installed) loaded beside
it. A replay session's Google placeholder never makes google-genai see two key variables, whichever
one the suite's fixture sets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from e2e_helpers import FakeProvider, clean_env, map_remote_args, semula_cmd, uniq

pytestmark = pytest.mark.e2e
pytest_plugins = ("pytester",)

TOUCH = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')"


def assert_nothing_started(data_dir: Path, recordings: Path, marker: Path | None = None) -> None:
    assert not data_dir.exists(), f"no proxy started, no data dir made: {list(data_dir.iterdir())}"
    assert not recordings.exists(), "no recording made"
    assert marker is None or not marker.exists(), "the command never ran"


@pytest.mark.parametrize("argv_extra, environ, closest", [
    (["--set", "semula_mdoe=replay"], {}, "unknown option 'semula_mdoe' in --set: did you mean semula_mode?"),
    (["--set", "semula_mode=bogus"], {}, "semula_mode='bogus' is not one of auto, replay, record, passthrough"),
    ([], {"SEMULA_MDOE": "replay"}, "unknown environment variable SEMULA_MDOE: did you mean SEMULA_MODE?"),
    ([], {"SEMULA_RECORD_ERRORS": "true"}, "SEMULA_RECORD_ERRORS is not read from the environment: set the "
                                            "option with --set semula_record_errors=VALUE"),
], ids=["set-name", "set-value", "env-typo", "env-option"])
@pytest.mark.parametrize("command", ["exec", "proxy"])
def test_a_misspelt_option_stops_exec_and_proxy_before_anything_starts(
        tmp_path: Path, mitm_confdir: Path, command: str, argv_extra: list[str], environ: dict[str, str],
        closest: str) -> None:
    data_dir, recordings, marker = tmp_path / "data", tmp_path / "recordings", tmp_path / "ran"
    argv = [*semula_cmd(), command, "--data-dir", str(data_dir), "--recordings", str(recordings),
            "--listen-port", "0", *argv_extra, "--set", f"confdir={mitm_confdir}"]
    if command == "exec":
        argv += ["--", sys.executable, "-c", TOUCH, str(marker)]
    result = subprocess.run(argv, capture_output=True, text=True, env=clean_env(**environ), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("semula: ") and closest in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert_nothing_started(data_dir, recordings, marker)


@pytest.mark.parametrize("args, environ, closest", [
    (["--semula-set=semula_mdoe=replay"], {}, "unknown option 'semula_mdoe' in --semula-set: did you mean "
                                              "semula_mode?"),
    ([], {"SEMULA_RECORDNGS": "elsewhere"}, "unknown environment variable SEMULA_RECORDNGS: did you mean "
                                            "SEMULA_RECORDINGS?"),
], ids=["semula-set", "env"])
def test_a_misspelt_option_stops_the_plugin_before_the_proxy_starts(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str],
        environ: dict[str, str], closest: str) -> None:
    data_dir, recordings, marker = tmp_path / "data", tmp_path / "recordings", tmp_path / "ran"
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_marker=f'''
import pathlib

def test_runs():
    pathlib.Path({str(marker)!r}).write_text("ran")
''')
    result = pytester.runpytest_subprocess("--semula=replay", f"--semula-data-dir={data_dir}",
                                           f"--semula-recordings={recordings}", *args, "-p", "no:cacheprovider",
                                           timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert f"ERROR: semula: {closest}" in result.stderr.str(), result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert_nothing_started(data_dir, recordings, marker)


def test_semula_mode_sets_the_mode_of_exec(tmp_path: Path, mitm_confdir: Path, dead_port: int) -> None:
    """SEMULA_MODE, the variable `semula drift` already heeds, is exec's and proxy's --mode when none is given."""
    argv = [*semula_cmd(), "exec", "--data-dir", str(tmp_path / "data"), "--no-recordings",
            "--set", f"confdir={mitm_confdir}", *map_remote_args(dead_port), "--", sys.executable, "-c", "pass"]
    result = subprocess.run(argv, capture_output=True, text=True, env=clean_env(SEMULA_MODE="replay"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "· mode replay ·" in result.stderr, result.stderr


NESTED_CONFTEST = '''
import pytest

@pytest.fixture
def prompt():
    return {prompt!r}
'''
NESTED_TEST = '''
import openai
import pytest


def test_asks_through_semula(prompt, semula, local_value):
    client = openai.OpenAI(max_retries=0)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    assert answer.choices[0].message.content and local_value == 42
    assert semula.mode in ("auto", "replay")


@pytest.mark.vcr  # pytest-recording's marker: its plugin loads beside semula's
def test_other_plugins_marker(prompt):
    assert prompt
'''
LOCAL_PLUGIN = '''
import pytest

@pytest.fixture
def local_value():
    return 42
'''


def test_the_plugin_runs_in_a_project_with_nested_conftests_and_other_plugins(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider,
        mitm_confdir: Path, tmp_path: Path) -> None:
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef top_level():\n    return 1\n")
    pytester.makepyfile(**{"tests/conftest.py": "", "tests/sub/conftest.py":
                           NESTED_CONFTEST.format(prompt=uniq("nested conftest")),
                           "tests/sub/test_nested.py": NESTED_TEST, "tests/test_top.py": "def test_top(top_level):"
                                                                                           "\n    assert top_level",
                           "localplugin.py": LOCAL_PLUGIN})
    sets = [f"confdir={mitm_confdir}", "ssl_insecure=true", *[a for a in map_remote_args(fake_provider.port)
                                                              if a != "--set"]]
    recordings = tmp_path / "recordings"
    for mode, data_dir, extra in (("auto", "d-auto", ()), ("replay", "d-replay", ()),
                                  ("replay", "d-xdist", ("-n", "2"))):
        if mode == "auto":
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test-nested-not-a-real-key")
        else:
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the placeholder must do
        result = pytester.runpytest_subprocess(
            f"--semula={mode}", f"--semula-data-dir={tmp_path / data_dir}", f"--semula-recordings={recordings}",
            *[f"--semula-set={item}" for item in sets], "-p", "localplugin", "-p", "no:cacheprovider", *extra,
            timeout=240)
        output = result.stdout.str() + result.stderr.str()
        assert "INTERNALERROR" not in output, output
        result.assert_outcomes(passed=3)
        hits = "0 hits · 1 miss" if mode == "auto" else "1 hit · 0 misses"
        assert f"semula: 1 call · {hits} · 0 refused" in output, output


GOOGLE_SUITE = '''
import logging

import pytest
from google import genai


@pytest.fixture
def google_key(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "suite-google-key")


@pytest.fixture
def gemini_key(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "suite-gemini-key")


def both_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "Both GOOGLE_API_KEY and GEMINI_API_KEY" in r.getMessage()]


def test_suite_sets_google_api_key(google_key, caplog):
    caplog.set_level(logging.WARNING)
    client = genai.Client()
    assert both_warnings(caplog) == [] and client._api_client.api_key == "suite-google-key"


def test_suite_sets_gemini_api_key(gemini_key, caplog):
    caplog.set_level(logging.WARNING)
    client = genai.Client()
    assert both_warnings(caplog) == [] and client._api_client.api_key == "suite-gemini-key"


def test_suite_sets_none_gets_the_placeholder(caplog):
    caplog.set_level(logging.WARNING)
    client = genai.Client()
    assert both_warnings(caplog) == [] and client._api_client.api_key == "{placeholder}"
'''


def test_google_placeholder_never_makes_google_genai_see_two_keys(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mitm_confdir: Path, tmp_path: Path) -> None:
    from semula.session.clientenv import PLACEHOLDER_KEY

    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_google=GOOGLE_SUITE.format(placeholder=PLACEHOLDER_KEY))
    result = pytester.runpytest_subprocess(
        "--semula=replay", f"--semula-data-dir={tmp_path / 'data'}", "--semula-set=semula_recordings=off",
        f"--semula-set=confdir={mitm_confdir}", "-p", "no:cacheprovider", timeout=240)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, output
    result.assert_outcomes(passed=3)
