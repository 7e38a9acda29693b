"""What a newcomer sees through the real proxy: an unreachable provider, a replay miss that says how
to approve its candidate from another machine, and the console saying a candidate was queued."""

from __future__ import annotations

import json
import re

import openai
import pytest
from conftest import ProxyFactory
from e2e_helpers import openai_client, read_call_log, run_semula, uniq

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"


def ask(client, text: str):
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": text}])
    return raw.headers, raw.parse().choices[0].message.content


def test_an_unreachable_provider_is_named_on_the_console_and_in_the_log(proxy_factory: ProxyFactory,
                                                                         dead_port: int) -> None:
    proxy = proxy_factory("auto", upstream="gone")
    client = openai_client(proxy.proxy_url, proxy.ca_path, max_retries=0)
    with pytest.raises(openai.InternalServerError) as failed:
        ask(client, f"Is anyone there {uniq('gone')}")
    assert failed.value.status_code == 502  # mitmproxy's own answer: docs/troubleshooting.md says why it can't be the provider's
    line = proxy.pump.wait_for(lambda s: "unreachable" in s, 20)
    assert line is not None, proxy.describe()
    assert f"upstream api.openai.com (sent to 127.0.0.1:{dead_port}) unreachable" in line, line
    proxy.stop()
    (row,) = [r for r in read_call_log(proxy.data_dir) if r["decision"] == "miss"]
    assert row["status"] is None and "unreachable" in row["error"], row


def test_a_ci_replay_miss_prints_an_approval_that_works_on_another_machine(proxy_factory: ProxyFactory,
                                                                            tmp_path) -> None:
    recordings = tmp_path / "semula-recordings"
    laptop = proxy_factory("auto", extra_args=("--recordings", str(recordings)))
    tag = uniq("harbour")
    original = f"Please list three quiet hotels near the old harbour for ticket {tag}"
    paraphrase = f"Please list three calm hotels near the old harbour for ticket {tag}"
    _, recorded_answer = ask(openai_client(laptop.proxy_url, laptop.ca_path), original)
    laptop.stop()

    # CI: a fresh data dir, the committed recordings, the provider gone; its store is thrown away.
    ci = proxy_factory("replay", upstream="gone", extra_args=("--recordings", str(recordings)))
    with pytest.raises(openai.NotFoundError) as missed:
        ask(openai_client(ci.proxy_url, ci.ca_path, max_retries=0), paraphrase)
    message = missed.value.body["message"] if isinstance(missed.value.body, dict) else str(missed.value)
    assert "A near-match is queued for review: candidate #" in message, message
    command = re.search(r"`(semula review approve --request \S+ --recording \S+)`", message)
    assert command is not None, message
    queued_line = ci.pump.wait_for(lambda s: "queued for review #" in s, 20)
    assert queued_line is not None and "refused" not in queued_line.split("→")[0], ci.describe()
    ci.stop()

    # The laptop replays the test once (the same candidate is queued there), then runs CI's command.
    replay = proxy_factory("replay", laptop.data_dir, upstream="gone", extra_args=("--recordings", str(recordings)))
    client = openai_client(replay.proxy_url, replay.ca_path, max_retries=0)
    with pytest.raises(openai.NotFoundError):
        ask(client, paraphrase)
    args = command.group(1).split()[1:]
    approved = run_semula(*args, "--data-dir", str(replay.data_dir))
    assert approved.returncode == 0 and "approved #" in approved.stdout, approved.stderr + approved.stdout
    headers, answer = ask(client, paraphrase)
    assert headers["x-semula-tier"] == "alias" and answer == recorded_answer
    listed = run_semula("review", "list", "--status", "all", "--data-dir", str(replay.data_dir))
    assert "status" in listed.stdout and "approved" in listed.stdout, listed.stdout
    everything = json.loads(run_semula("review", "list", "--status", "all", "--json", "--data-dir",
                                       str(replay.data_dir)).stdout)
    assert [c["status"] for c in everything] == ["approved"]
