"""The embedding tier through the real proxy, with the real shared model."""

from __future__ import annotations

import json

import pytest
from conftest import ProxyFactory
from e2e_helpers import FakeProvider, openai_client, read_call_log, run_semula, uniq
from shared_paths import shared_dir

pytestmark = pytest.mark.e2e
FOLDER = (shared_dir() / "models" / "all-MiniLM-L6-v2-onnx") if shared_dir() else None


@pytest.mark.skipif(not (FOLDER and FOLDER.is_dir()), reason="shared model missing")
def test_a_paraphrase_is_queued_as_embedding_and_a_hit_is_exact(proxy_factory: ProxyFactory,
                                                                 fake_provider: FakeProvider,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMULA_EMBEDDINGS", "on")
    monkeypatch.setenv("SEMULA_EMBEDDINGS_MODEL", "sentence-transformers/all-MiniLM-L6-v2")
    monkeypatch.setenv("SEMULA_EMBEDDINGS_MODEL_PATH", str(FOLDER))
    proxy = proxy_factory("auto")
    data = str(proxy.data_dir)
    assert run_semula("config", "set", "embedding_review_threshold", "0.6", "--data-dir", data).returncode == 0
    client = openai_client(proxy.proxy_url, proxy.ca_path)
    tag = "".join(ch for ch in uniq("tag") if ch.isalnum())  # one word: the shared tag adds no overlap

    def ask(text: str):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}])
        return raw.headers

    ask(f"How can I reverse a list in Python? ({tag})")
    headers = ask(f"What is the way to invert the order of a Python list? ({tag})")
    assert headers["x-semula-decision"] == "miss"
    # auto mode recorded the paraphrase, which closes the candidates its call queued (issue 21)
    listed = run_semula("review", "list", "--status", "all", "--json", "--data-dir", data)
    tiers = {c["tier"] for c in json.loads(listed.stdout)}
    assert "embedding" in tiers, listed.stdout + listed.stderr
    assert {c["status"] for c in json.loads(listed.stdout)} == {"closed"}, listed.stdout
    assert ask(f"How can I reverse a list in Python? ({tag})")["x-semula-tier"] == "exact"
    proxy.stop()
    assert "embedding tier on" in proxy.output()
    # auto mode forwards the miss before the embedding tier searches (it only queues): the row of the
    # miss carries the lexical verdict, the review queue the embedding candidate
    rows = read_call_log(proxy.data_dir)
    assert not any(r["candidate_tier"] == "embedding" for r in rows), rows
