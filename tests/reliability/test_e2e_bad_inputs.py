"""Bad strings, deep nesting and control characters through the real proxy (items 3, 12, 15)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import ProxyFactory
from e2e_helpers import FakeProvider, ProxyHandle, clean_env, curl, read_call_log, uniq

pytestmark = pytest.mark.e2e

CHAT_URL = "https://api.openai.com/v1/chat/completions"


def chat(proxy: ProxyHandle, text: str, **kwargs):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    return curl(CHAT_URL, proxy_url=kwargs.pop("proxy_url", proxy.proxy_url), ca_path=proxy.ca_path,
                data={**body, **kwargs.pop("extra", {})}, **kwargs)


def post_raw(proxy: ProxyHandle, body: bytes, tmp: Path) -> tuple[str, str]:
    path = tmp / "body.json"
    path.write_bytes(body)
    res = subprocess.run(["curl", "-sS", "--max-time", "30", "--proxy", proxy.proxy_url, "--cacert", str(proxy.ca_path),
                          "-H", "content-type: application/json", "-o", "-", "-w", "\n%{http_code}",
                          "--data-binary", f"@{path}", CHAT_URL], capture_output=True, text=True, env=clean_env())
    out, _, code = res.stdout.rpartition("\n")
    return code, out


def test_one_bad_string_does_not_lose_the_other_rows(proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    run = uniq("badrow")
    for i in range(3):
        assert chat(proxy, f"{run} good {i}").status == 200
    bad = chat(proxy, f"{run} bad", extra={"model": "\ud800"}, headers=["x-semula-project: \udcff\udcfe"])
    assert bad.returncode == 0, bad.stderr
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    assert len(rows) == 4, (rows, proxy.output()[-3000:])
    assert "Traceback" not in proxy.output()


DEEP = b'{"a":' + b"[" * 10_000 + b"]" * 10_000 + b"}"
SURROGATE = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"lone \\ud800 half"}]}'


def test_deep_nesting_and_a_lone_surrogate_are_unparsable_bodies(proxy_factory: ProxyFactory, tmp_path: Path,
                                                                 fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    for body in (DEEP, SURROGATE):
        post_raw(proxy, body, tmp_path)
    proxy.stop()
    output = proxy.output()
    assert "Traceback" not in output and "internal error" not in output, output[-3000:]
    assert "nested too deeply" in output and "lone surrogate" in output, output[-3000:]
    rows = read_call_log(proxy.data_dir)
    assert [r["decision"] for r in rows] == ["bypass", "bypass"], rows
    assert "nested too deeply" in rows[0]["bypass_reason"] and "lone surrogate" in rows[1]["bypass_reason"], rows

    replay = proxy_factory("replay", proxy.data_dir, upstream="gone")
    answers = [post_raw(replay, body, tmp_path) for body in (DEEP, SURROGATE)]
    replay.stop()
    assert [code for code, _ in answers] == ["404", "404"], answers
    assert "nested too deeply" in answers[0][1] and "lone surrogate" in answers[1][1], answers
    assert "Traceback" not in replay.output()


def test_control_characters_in_the_proxy_user_never_reach_the_terminal(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    body = f'{{"model":"gpt-4o-mini","messages":[{{"role":"user","content":"{uniq("ctl")}"}}]}}'
    res = subprocess.run(["curl", "-sS", "--max-time", "30", "--proxy", proxy.proxy_url, "--proxy-user",
                          "evil\nforged line\x1b[2J:pw", "--cacert", str(proxy.ca_path),
                          "-H", "content-type: application/json", "--data-binary", body, CHAT_URL],
                         capture_output=True, text=True, env=clean_env())
    assert res.returncode == 0, res.stderr
    proxy.stop()
    output = proxy.output()
    assert "\x1b" not in output, output[-2000:]
    assert not any(line.startswith("forged") for line in output.splitlines()), output[-2000:]
    assert "evil\\nforged line\\x1b[2J" in output, output[-2000:]
