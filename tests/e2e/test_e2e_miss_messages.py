"""Replay misses a CI log can act on, through a real `semula proxy` and the fake provider.

A laptop records in auto mode into a recordings folder; "CI" replays from a fresh data dir with
that folder and the provider gone (so store ids differ from the laptop's). A refused call's message
must name the refused method and path, the nearest recording's file in the folder and the field
that differs; an unrelated prompt names no nearest; a miss carries no empty x-semula-* header; in
sequence mode a repeated miss still names its queued candidate. Plus `--web --set
web_open_browser=false`, which semula itself also sets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import ProxyHandle, curl, free_port, openai_client, uniq

pytestmark = pytest.mark.e2e

TAG = uniq("ci-miss")
MODEL = "gpt-4o-mini"
SALES = f"Summarise the quarterly sales report for the northern region in two sentences {TAG}"
HOTELS = f"Please list three quiet hotels near the old harbour for ticket {TAG}"
HOTELS_PARAPHRASE = f"Please list three calm hotels near the old harbour for ticket {TAG}"
CHAT_URL = "https://api.openai.com/v1/chat/completions"


def unparsed_body(request_id: str) -> dict[str, Any]:
    """A chat body the OpenAI adapter cannot read (a message without a role): replayed by exact bytes."""
    return {"model": MODEL, "messages": [{"content": f"look up the order {TAG}", "id": request_id}]}


@dataclass(frozen=True)
class Recorded:
    folder: Path
    files: dict[str, str]  # a prompt's marker -> its recording file, relative to the folder


def file_holding(folder: Path, needle: str) -> str:
    found = [p for p in folder.rglob("*.json") if needle in p.read_text(encoding="utf-8")
             and not p.name.startswith("_")]
    assert len(found) == 1, (needle, found)
    return found[0].relative_to(folder).as_posix()


@pytest.fixture(scope="module")
def recorded(module_proxy_factory: ProxyFactory, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    folder = tmp_path_factory.mktemp("miss-folder") / "semula-recordings"
    laptop = module_proxy_factory("auto", extra_args=("--recordings", str(folder)))
    client = openai_client(laptop.proxy_url, laptop.ca_path)
    for text in (SALES, HOTELS):
        client.chat.completions.create(model=MODEL, temperature=0, messages=[{"role": "user", "content": text}])
    answer = curl(CHAT_URL, proxy_url=laptop.proxy_url, ca_path=laptop.ca_path, data=unparsed_body("req_aaaa1111"),
                  headers=["authorization: Bearer sk-test-not-a-real-key"])
    assert answer.status == 200, (answer, laptop.describe())
    laptop.stop()
    return Recorded(folder, {"sales": file_holding(folder, "northern region"),
                             "unparsed": file_holding(folder, "req_aaaa1111"),
                             "hotels": file_holding(folder, "quiet hotels")})


@pytest.fixture(scope="module")
def ci(recorded: Recorded, module_proxy_factory: ProxyFactory) -> ProxyHandle:
    """Replay from a fresh data dir and the committed folder: its store ids are not the laptop's."""
    return module_proxy_factory("replay", upstream="gone", extra_args=("--recordings", str(recorded.folder)))


def refusal(client: Any, text: str, **params: Any) -> str:
    with pytest.raises(openai.NotFoundError) as missed:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}], **params)
    body = missed.value.body
    return body["message"] if isinstance(body, dict) else str(missed.value)


def test_a_changed_parameter_names_the_call_the_file_and_the_field(ci: ProxyHandle, recorded: Recorded) -> None:
    message = refusal(openai_client(ci.proxy_url, ci.ca_path), SALES, temperature=0.7)
    assert "no recording matches this request (project 'default', mode replay): POST /v1/chat/completions." \
        in message, message
    assert f"Nearest recording: {recorded.files['sales']} (similarity 1.00): " in message, message
    assert "parameters differ: temperature 0 → 0.7" in message, message
    assert "Nearest recording: #" not in message, "a store id means nothing on another machine"


def test_an_unparsed_body_names_the_first_differing_json_path(ci: ProxyHandle, recorded: Recorded) -> None:
    refused = curl(CHAT_URL, proxy_url=ci.proxy_url, ca_path=ci.ca_path, data=unparsed_body("req_bbbb2222"),
                   headers=["authorization: Bearer sk-test-not-a-real-key"])
    assert refused.status == 404, refused
    message = json.loads(refused.body)["error"]["message"]
    assert f"Nearest recording: {recorded.files['unparsed']} " in message, message
    assert 'body differs at $.messages[0].id "req_aaaa1111" → "req_bbbb2222"' in message, message
    assert "body differs;" not in message and "body differs." not in message, message


def test_an_unrelated_prompt_names_no_nearest_recording(ci: ProxyHandle) -> None:
    message = refusal(openai_client(ci.proxy_url, ci.ca_path), "Translate 'good morning' into Finnish, Welsh")
    assert "Nearest recording" not in message, message
    assert "No recording in project 'default' is close to this request" in message, message
    assert "POST /v1/chat/completions" in message, message


def test_a_miss_sends_no_empty_semula_header(ci: ProxyHandle) -> None:
    refused = curl(CHAT_URL, proxy_url=ci.proxy_url, ca_path=ci.ca_path,
                   data={"model": MODEL, "messages": [{"role": "user", "content": uniq("never recorded")}]},
                   headers=["authorization: Bearer sk-test-not-a-real-key"])
    assert refused.status == 404 and refused.headers.get("x-semula-decision") == "miss", refused
    assert "x-semula-score" not in refused.headers and "x-semula-entry" not in refused.headers, refused.headers
    assert all(value for name, value in refused.headers.items() if name.startswith("x-semula-")), refused.headers


def test_a_repeated_miss_in_sequence_mode_still_names_its_candidate(recorded: Recorded,
                                                                     proxy_factory: ProxyFactory) -> None:
    replay = proxy_factory("replay", upstream="gone", extra_args=(
        "--recordings", str(recorded.folder), "--set", "semula_repeats=sequence"))
    client = openai_client(replay.proxy_url, replay.ca_path)
    first = refusal(client, HOTELS_PARAPHRASE, temperature=0)
    second = refusal(client, HOTELS_PARAPHRASE, temperature=0)
    for message in (first, second):
        assert "A near-match is queued for review: candidate #" in message, message
        assert f"recording {recorded.files['hotels']}" in message, message
        assert "`semula review approve --request " in message, message
    assert first.split("candidate #")[1].split(" ")[0] == second.split("candidate #")[1].split(" ")[0]


def test_web_ui_starts_with_the_users_own_web_open_browser(proxy_factory: ProxyFactory) -> None:
    proxy = proxy_factory("auto", extra_args=("--web", "--set", "web_open_browser=false",
                                              "--set", f"web_port={free_port()}"))
    assert "Received multiple values" not in proxy.output(), proxy.describe()
    assert proxy.proc.poll() is None, proxy.describe()
