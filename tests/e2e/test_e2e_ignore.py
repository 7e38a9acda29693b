"""Fields the user declares volatile (`semula config set ignore …`, semula_ignore) through a real
`semula proxy`, the HTTPS fake provider and the OpenAI SDK.

A laptop records with `run_tag.id=A` and `seed=123` in the prompt; CI replays from a fresh data dir
and the committed recordings folder (the setting travels in `_settings.json`) with `run_tag.id=B`
and `seed=456`: a hit. A change outside the declared fields misses, and the refusal names the rule.
Recordings made before the setting match once it is set (both fingerprints are recomputed), and
stop matching when it is removed. Hostile settings are one-line errors; a pathological pattern on a
long prompt is answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, clean_env, openai_client, run_semula, semula_cmd, uniq

pytestmark = pytest.mark.e2e
pytest_plugins = ("pytester",)

MODEL = "gpt-4o-mini"
RULES = {"paths": ["run_tag.id", "metadata.run_id"], "patterns": [r"seed=\d+"]}


def ask(client: Any, text: str, run_id: str, **params: Any) -> tuple[dict[str, str], str | None]:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": text}],
        extra_body={"run_tag": {"id": run_id, "suite": "nightly"}, "metadata": {"run_id": run_id}}, **params)
    return dict(raw.headers), raw.parse().choices[0].message.content


def refusal(client: Any, text: str, run_id: str, **params: Any) -> str:
    with pytest.raises(openai.NotFoundError) as missed:
        ask(client, text, run_id, **params)
    body = missed.value.body
    return body["message"] if isinstance(body, dict) else str(missed.value)


def config_set(data_dir: Path, key: str, value: str) -> Any:
    return run_semula("config", "set", key, value, "--data-dir", str(data_dir))


def test_declared_fields_replay_and_anything_else_misses_naming_the_rule(
        proxy_factory: ProxyFactory, tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    laptop = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    result = config_set(laptop.data_dir, "ignore", json.dumps(RULES))  # through the running proxy's admin endpoint
    assert result.returncode == 0, result.stderr
    tag = uniq("colour")
    client = openai_client(laptop.proxy_url, laptop.ca_path)
    _, recorded = ask(client, f"Pick a colour at random, seed=123 ({tag})", "A")
    laptop.stop()
    settings = json.loads((folder / "default" / "_settings.json").read_text(encoding="utf-8"))
    assert settings["settings"]["ignore"] == RULES, settings

    ci = proxy_factory("replay", upstream="gone", extra_args=("--recordings", str(folder)))
    client = openai_client(ci.proxy_url, ci.ca_path)
    headers, answer = ask(client, f"Pick a colour at random, seed=456 ({tag})", "B")
    assert headers["x-semula-decision"] == "hit" and headers["x-semula-tier"] == "exact", headers
    assert answer == recorded

    # outside the declared fields: a word of the prompt, a parameter, a sibling of the ignored key
    for text, params in ((f"Pick an animal at random, seed=456 ({tag})", {}),
                         (f"Pick a colour at random, seed=456 ({tag})", {"temperature": 0.9})):
        message = refusal(client, text, "C", **params)
        assert "no recording matches this request" in message, message
        assert r"Ignored by semula_ignore: run_tag.id, /seed=\d+/" in message, message
        assert "every other field counts" in message, message
        assert "differ: run_tag" not in message and "seed=4" not in message, message  # near tiers see placeholders
    sibling = client.chat.completions.with_raw_response
    with pytest.raises(openai.NotFoundError):
        sibling.create(model=MODEL, messages=[{"role": "user", "content": f"Pick a colour at random, seed=1 ({tag})"}],
                       extra_body={"run_tag": {"id": "D", "suite": "weekly"}, "metadata": {"run_id": "D"}})


def test_recordings_made_before_the_setting_match_once_it_is_set(proxy_factory: ProxyFactory,
                                                                 fake_provider: FakeProvider, tmp_path: Path) -> None:
    folder = tmp_path / "semula-recordings"
    proxy = proxy_factory("auto", extra_args=("--recordings", str(folder)))
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    tag = uniq("weather")
    _, recorded = ask(client, f"Describe tomorrow's weather, seed=7 ({tag})", "A")
    before = fake_provider.count()
    headers, _ = ask(client, f"Describe tomorrow's weather, seed=8 ({tag})", "B")
    assert headers["x-semula-decision"] == "miss" and fake_provider.count() == before + 1  # recorded anew

    result = config_set(proxy.data_dir, "ignore", json.dumps(RULES))
    assert result.returncode == 0 and "re-fingerprinted 2 recordings" in result.stdout, result.stdout + result.stderr
    before = fake_provider.count()
    headers, answer = ask(client, f"Describe tomorrow's weather, seed=9 ({tag})", "C")
    assert headers["x-semula-decision"] == "hit" and headers["x-semula-tier"] == "exact", headers
    assert fake_provider.count() == before  # answered from a recording made before the setting existed

    # The two files recorded before the setting now record one request: the check names the second.
    check = run_semula("recordings", "check", str(folder))
    assert check.returncode == 1 and "records the same request as" in check.stdout + check.stderr, check

    assert config_set(proxy.data_dir, "ignore", "null").returncode == 0
    headers, _ = ask(client, f"Describe tomorrow's weather, seed=10 ({tag})", "E")
    assert headers["x-semula-decision"] == "miss" and fake_provider.count() == before + 1


@pytest.mark.parametrize(("value", "said"), [
    ('{"paths": ["model"]}', "reaches into the model, the prompt or the tools ('model')"),
    ('{"paths": ["messages[*].content"]}', "('messages')"),
    ('{"patterns": ["(a)\\\\1"]}', "not a valid RE2 regular expression"),
    ('{"patterns": [".*"]}', "matches the empty text"),
    ('{"patterns": ["[^0-9]+"]}', "replaces most of an ordinary prompt"),
    (json.dumps({"patterns": [f"id{i}=\\d+" for i in range(5000)]}), "at most 32 patterns"),
    (json.dumps({"patterns": ["x" * 100_000]}), "at most 500 characters"),
    ('{"paths": ["a.b"', "is not JSON"),
])
def test_hostile_settings_are_one_line_errors(module_proxy_factory: ProxyFactory, value: str, said: str) -> None:
    proxy = _hostile_proxy(module_proxy_factory)
    result = config_set(proxy.data_dir, "ignore", value)
    assert result.returncode != 0, result.stdout
    assert said in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_pathological_pattern_on_a_long_prompt_is_answered(module_proxy_factory: ProxyFactory) -> None:
    """RE2 has no backtracking: `(a+)+$` against a long run of a's followed by b finishes."""
    proxy = _hostile_proxy(module_proxy_factory)
    assert config_set(proxy.data_dir, "ignore", '{"patterns": ["(a+)+$", "(x|x|xx)*y"]}').returncode == 0
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    text = "a" * 300_000 + "b" + "x" * 100_000
    headers, _ = ask(client, text, "A")
    assert headers["x-semula-decision"] == "miss", headers
    headers, _ = ask(client, text, "A")
    assert headers["x-semula-decision"] == "hit", headers


def test_the_option_sets_the_project_setting_at_start(proxy_factory: ProxyFactory, fake_provider: FakeProvider,
                                                      tmp_path: Path) -> None:
    """`--set semula_ignore=…` (semula proxy, exec, the plugin's --semula-set) sets the project's setting
    as `semula config set` does: a later run without the option keeps it (the recordings are keyed by it)."""
    data_dir = tmp_path / "data"
    option = ("--set", f"semula_ignore={json.dumps(RULES)}")
    laptop = proxy_factory("auto", data_dir, extra_args=option)
    client = openai_client(laptop.proxy_url, laptop.ca_path)
    tag = uniq("option")
    ask(client, f"Name a river, seed=1 ({tag})", "A")
    laptop.stop()
    assert "semula_ignore: project 'default' ignores" in laptop.output(), laptop.output()

    again = proxy_factory("replay", data_dir, upstream="gone")  # no option: the setting stays
    client = openai_client(again.proxy_url, again.ca_path)
    headers, _ = ask(client, f"Name a river, seed=2 ({tag})", "B")
    assert headers["x-semula-tier"] == "exact", headers
    shown = json.loads(run_semula("config", "show", "--json", "--data-dir", str(data_dir)).stdout)
    assert shown["ignore"] == RULES, shown


@pytest.mark.parametrize("command", ["proxy", "exec"])
def test_a_bad_option_stops_the_run_before_anything_starts(tmp_path: Path, mitm_confdir: Path, command: str) -> None:
    data_dir, marker = tmp_path / "data", tmp_path / "ran"
    argv = [*semula_cmd(), command, "--data-dir", str(data_dir), "--recordings", "off", "--listen-port", "0",
            "--set", 'semula_ignore={"paths": ["model"]}', "--set", f"confdir={mitm_confdir}"]
    if command == "exec":
        argv += ["--", sys.executable, "-c", "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')",
                 str(marker)]
    result = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "semula_ignore: path 'model' reaches into the model" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    assert not data_dir.exists() and not marker.exists()


def test_a_bad_option_stops_the_plugin_before_the_proxy_starts(pytester: pytest.Pytester, tmp_path: Path) -> None:
    data_dir, marker = tmp_path / "data", tmp_path / "ran"
    pytester.makepyfile(test_marker=f'''
import pathlib

def test_runs():
    pathlib.Path({str(marker)!r}).write_text("ran")
''')
    result = pytester.runpytest_subprocess("--semula=replay", f"--semula-data-dir={data_dir}", "--semula-recordings=off",
                                           '--semula-set=semula_ignore={"patterns": ["(?=x)y"]}', "-p",
                                           "no:cacheprovider", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert "not a valid RE2 regular expression" in result.stderr.str(), result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not data_dir.exists() and not marker.exists()


_PROXIES: dict[int, ProxyHandle] = {}


def _hostile_proxy(factory: ProxyFactory) -> ProxyHandle:
    """One auto proxy for the hostile-input tests of this module."""
    if id(factory) not in _PROXIES:
        _PROXIES[id(factory)] = factory("auto")
    return _PROXIES[id(factory)]
