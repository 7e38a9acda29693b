"""The language gate through the real proxy: a near-match the lexical tier would serve in English is
queued, not served, when its language has no guard table, with the reason naming the language."""

from __future__ import annotations

import json

import openai
import pytest

from conftest import ProxyFactory
from e2e_helpers import openai_client, run_semula

pytestmark = pytest.mark.e2e
MODEL = "gpt-4o-mini"
ENGLISH = "Explain why this mushroom may be eaten raw by children."
INDONESIAN = "Jelaskan mengapa jamur ini boleh dimakan mentah oleh anak-anak."


def ask(client, text: str) -> str:
    completion = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}])
    return completion.choices[0].message.content or ""


def test_a_near_match_in_a_language_without_a_guard_goes_to_review(proxy_factory: ProxyFactory) -> None:
    recorder = proxy_factory("auto")
    data = str(recorder.data_dir)
    client = openai_client(recorder.proxy_url, recorder.ca_path)
    answers = {text: ask(client, text) for text in (ENGLISH, INDONESIAN)}
    recorder.stop()
    # "please" is a harmless edit: at a lexical serve threshold of 0.9 it is served... in English
    assert run_semula("config", "set", "lexical_serve_threshold", "0.9", "--data-dir", data).returncode == 0

    replay = proxy_factory("replay", recorder.data_dir, upstream="gone")
    client = openai_client(replay.proxy_url, replay.ca_path)
    assert ask(client, f"Please {ENGLISH[0].lower()}{ENGLISH[1:]}") == answers[ENGLISH]
    with pytest.raises(openai.NotFoundError) as miss:
        ask(client, f"Please {INDONESIAN[0].lower()}{INDONESIAN[1:]}")
    assert "no guard for" in str(miss.value), str(miss.value)

    listed = run_semula("review", "list", "--json", "--data-dir", data)
    assert listed.returncode == 0, listed.stderr + listed.stdout
    [candidate] = json.loads(listed.stdout)
    assert candidate["request"].startswith("Please jelaskan") and candidate["tier"] == "lexical"
    assert candidate["reason"].startswith("no guard for ") and ("Indonesian" in candidate["reason"]
                                                                or "Malay" in candidate["reason"]), candidate
