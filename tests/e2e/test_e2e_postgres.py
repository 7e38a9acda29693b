"""Two `semula proxy` processes on one Postgres store (a real server, tests/support/pg_helpers.py).

Recorded through one, replayed through the other; the same new request to both at once is one
recording; an approval made with the CLI is served as an alias by both; a proxy keeps serving hits
while Postgres is down and records again after it comes back.
"""

from __future__ import annotations

import json
import threading
import time

import openai
import pytest
from conftest import ProxyFactory
from e2e_helpers import FakeProvider, openai_client, run_semula, uniq

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"
PATIENCE_SECONDS = 30  # a safety net for a stuck follower, never the measure of freshness (the benchmark's)


def ask(client, text: str):
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": text}])
    return raw.headers, raw.parse().choices[0].message.content


def ask_until(client, text: str, tier: str | None = None):
    """Ask until the answer is a hit (of `tier`): another proxy's write reaches this one by the change log."""
    import openai

    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        try:
            headers, answer = ask(client, text)
            if headers["x-semula-decision"] == "hit" and (tier is None or headers["x-semula-tier"] == tier):
                return headers, answer
        except openai.NotFoundError:  # replay: not there yet
            pass
        assert time.monotonic() < deadline, f"{text!r} never became a hit"
        time.sleep(0.1)


def semula_json(url: str, *args: str):
    result = run_semula(*args, "--store", url, "--json")
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def test_two_proxies_share_recordings_reviews_and_survive_a_postgres_restart(
        proxy_factory: ProxyFactory, fake_provider: FakeProvider, postgres_server, pg_url) -> None:
    store = ("--store", pg_url)
    a = proxy_factory("auto", extra_args=store)
    b = proxy_factory("auto", extra_args=store)
    replay = proxy_factory("replay", extra_args=store)
    client_a, client_b = openai_client(a.proxy_url, a.ca_path), openai_client(b.proxy_url, b.ca_path)
    client_replay = openai_client(replay.proxy_url, replay.ca_path)

    # recorded through A, replayed through the replay proxy
    question = uniq("Name the capital of Portugal")
    headers, answer = ask(client_a, question)
    assert headers["x-semula-decision"] == "miss"
    _, replayed = ask_until(client_replay, question)
    assert replayed == answer

    # the same new request to both at once: one recording
    both = uniq("Count the moons of Mars")
    answers: list[str] = []
    barrier = threading.Barrier(2)

    def send(client):
        barrier.wait()
        answers.append(ask(client, both)[1])

    threads = [threading.Thread(target=send, args=(c,)) for c in (client_a, client_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 2
    listed = [e for e in semula_json(pg_url, "entries", "list", "--limit", "1000") if both in e["last_text"]]
    assert len(listed) == 1, listed
    ask_until(client_a, both)
    ask_until(client_b, both)

    # one review queue: approved with the CLI, served as an alias by both proxies
    tag = uniq("hotel")
    original = f"Please list three quiet hotels near the old harbour for ticket {tag}"
    paraphrase = f"Please list three calm hotels near the old harbour for ticket {tag}"
    headers, recorded = ask(client_a, original)
    original_id = int(headers["x-semula-entry"])
    ask_until(client_b, original)
    ask_until(client_replay, original)
    # queued by a replay miss: an auto proxy would record the paraphrase, which closes its own candidates
    with pytest.raises(openai.NotFoundError):
        ask(client_replay, paraphrase)
    [candidate] = [c for c in semula_json(pg_url, "review", "list") if c["entry_id"] == original_id]
    approved = run_semula("review", "approve", str(candidate["id"]), "--store", pg_url)
    assert approved.returncode == 0, approved.stderr
    assert ask_until(client_a, paraphrase, "alias")[1] == recorded
    assert ask_until(client_b, paraphrase, "alias")[1] == recorded

    # Postgres stops: hits from memory go on, a miss goes upstream unrecorded; after the restart, A records again
    postgres_server.stop()
    try:
        headers, again = ask(client_a, question)
        assert headers["x-semula-decision"] == "hit" and again == answer
        headers, _ = ask(client_a, uniq("Spell the word harbour backwards"))
        assert headers["x-semula-decision"] == "miss" and not headers.get("x-semula-entry")
    finally:
        postgres_server.start()
    fresh = uniq("Translate good morning into Basque")
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not ask(client_a, fresh)[0].get("x-semula-entry"):  # reconnects by itself, then records
        assert time.monotonic() < deadline, a.output()[-3000:]
        time.sleep(0.2)
    ask_until(client_b, fresh)
    assert "lost the Postgres store" in a.output() and "hunter" not in a.output()
