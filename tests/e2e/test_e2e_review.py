"""The near-match tiers through the real proxy: review queue, approve → alias, reject → never again, guard."""

from __future__ import annotations

import json

import openai
import pytest
from conftest import ProxyFactory
from e2e_helpers import FakeProvider, openai_client, read_call_log, run_semula, uniq

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"


def ask(client, text: str):
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": text}])
    return raw.headers, raw.parse().choices[0].message.content


def review(data_dir, *args: str):
    result = run_semula("review", *args, "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def open_candidates(data_dir) -> list[dict]:
    return json.loads(review(data_dir, "list", "--json"))


def test_paraphrase_is_queued_in_auto_then_closed_by_its_own_recording(proxy_factory: ProxyFactory,
                                                                       fake_provider: FakeProvider) -> None:
    # Issue 21: auto mode records the paraphrase it forwards, and an answered request closes its own
    # candidates, the ones its own call queued included (they used to stay open, and approving one
    # deleted the paraphrase's own recording). Approve → alias is tested in replay: test_e2e_newcomer_ux,
    # test_e2e_review_shapes.
    proxy = proxy_factory("auto")
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    tag = uniq("hotel")
    original = f"Please list three quiet hotels near the old harbour for ticket {tag}"
    paraphrase = f"Please list three calm hotels near the old harbour for ticket {tag}"
    _, recorded_answer = ask(client, original)
    before = fake_provider.count()
    headers, paraphrase_answer = ask(client, paraphrase)
    assert headers["x-semula-decision"] == "miss" and fake_provider.count() == before + 1, "forwarded"
    headers, answer = ask(client, paraphrase)
    assert headers["x-semula-tier"] == "exact" and answer == paraphrase_answer != recorded_answer, dict(headers)
    assert open_candidates(proxy.data_dir) == []  # through the admin endpoint: the proxy holds the store
    (candidate,) = json.loads(review(proxy.data_dir, "list", "--status", "all", "--json"))
    assert candidate["status"] == "closed" and candidate["tier"] == "lexical" and 0.6 <= candidate["score"] < 1
    shown = review(proxy.data_dir, "show", str(candidate["id"]))
    assert "[-quiet-]" in shown and "{+calm+}" in shown and recorded_answer in shown
    proxy.stop()
    rows = read_call_log(proxy.data_dir)
    miss = next((r for r in rows if r["decision"] == "miss" and r["candidate_tier"]), None)
    assert miss is not None, [(r["decision"], r["tier"], r["candidate_tier"], r["error"]) for r in rows]
    assert miss["candidate_tier"] == "lexical" and miss["candidate_entry_id"] == candidate["entry_id"]
    events = [r["event"] for r in _review_log(proxy.data_dir)]
    assert events[:2] == ["queued", "closed"], (events, proxy.output()[-3000:])


def test_rejected_pairing_never_returns_in_replay(proxy_factory: ProxyFactory) -> None:
    recorder = proxy_factory("auto")
    tag = uniq("museum")
    ask(openai_client(recorder.proxy_url, recorder.ca_path), f"When does the city museum open on Sunday {tag}")
    recorder.stop()
    replay = proxy_factory("replay", recorder.data_dir, upstream="gone")
    client = openai_client(replay.proxy_url, replay.ca_path, max_retries=0)
    paraphrase = f"When does the town museum open on Sunday {tag}"
    with pytest.raises(openai.NotFoundError) as first:
        ask(client, paraphrase)
    message = first.value.body["message"] if isinstance(first.value.body, dict) else str(first.value)
    assert "queued for review: candidate #" in message and "semula review approve" in message, message
    [candidate] = open_candidates(replay.data_dir)
    review(replay.data_dir, "reject", str(candidate["id"]))
    with pytest.raises(openai.NotFoundError) as second:
        ask(client, paraphrase)
    assert "queued for review" not in str(second.value)
    assert open_candidates(replay.data_dir) == []
    everything = json.loads(review(replay.data_dir, "list", "--status", "all", "--json"))
    assert [c["status"] for c in everything] == ["rejected"]


def test_a_changed_number_is_never_served_at_any_threshold(proxy_factory: ProxyFactory,
                                                           fake_provider: FakeProvider) -> None:
    proxy = proxy_factory("auto")
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    result = run_semula("config", "set", "lexical_serve_threshold", "0", "--data-dir", str(proxy.data_dir))
    assert result.returncode == 0, result.stderr
    tag = uniq("rooms")
    ask(client, f"The hotel has 120 rooms; how many floors does it need {tag}")
    before = fake_provider.count()
    headers, _ = ask(client, f"The hotel has 220 rooms; how many floors does it need {tag}")
    assert headers["x-semula-decision"] == "miss" and fake_provider.count() == before + 1
    proxy.stop()
    miss = [r for r in read_call_log(proxy.data_dir) if r["decision"] == "miss" and r["candidate_tier"]]
    assert miss and "120" in miss[-1]["guard_reason"] and "220" in miss[-1]["guard_reason"], (miss, proxy.output())


def _review_log(data_dir) -> list[dict]:
    import pyarrow.parquet as pq

    rows = []
    for path in sorted((data_dir / "reviews").glob("**/*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return sorted(rows, key=lambda r: r["ts"])
