"""The embedding tier wired to a real store, with the real shared model (no fake embedder)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from entries import chat, fingerprints, new_entry
from shared_paths import shared_dir

from semula.core.cascade import NearQuery
from semula.engine.engine import Engine
from semula.core.request.canonical import normalised_fingerprint, request_fingerprint
from semula.embeddings.model import Embedder, EmbeddingConfig
from semula.core.settings import ProjectSettings
from semula.store.duckdb.store import DuckDBStore

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
FOLDER = (shared_dir() or __import__("pathlib").Path("/nonexistent")) / "models" / "all-MiniLM-L6-v2-onnx"
pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason=f"shared model missing at {FOLDER}")


class CountingEmbedder:
    """The real embedder, counted: proves which paths touch the model."""

    def __init__(self, real: Embedder, fail: bool = False):
        self.real, self.calls, self.fail = real, 0, fail
        self.name = real.name

    def embed(self, texts):
        self.calls += 1
        if self.fail:
            raise RuntimeError("model exploded")
        return self.real.embed(texts)

    def truncate(self, text):
        return self.real.truncate(text)


@pytest.fixture(scope="module")
def embedder():
    return Embedder.load(EmbeddingConfig(enabled=True, model_name=MODEL, model_path=str(FOLDER), offline=True,
                                         cache_dir=FOLDER))


canonical = chat


def record(cache, text, project="p"):
    return cache.record(new_entry(chat(text), project))


def near(cache, text, settings, project="p"):
    c = chat(text)
    return cache.searcher.search(NearQuery(project, c, *fingerprints(c), settings))


@pytest.fixture
def make_cache(tmp_path, embedder):
    made = []

    def make(fail=False):
        counting = CountingEmbedder(embedder, fail)
        cache = Engine.open(DuckDBStore.open(tmp_path / str(len(made))), embedder=counting)
        made.append(cache)
        return cache, counting

    yield make
    for cache in made:
        cache.close()


PARAPHRASE = ("How can I reverse a list in Python?", "What is the way to invert the order of a Python list?")


@pytest.mark.slow
def test_a_paraphrase_is_queued_never_served_by_default(make_cache):
    cache, _ = make_cache()
    entry = record(cache, PARAPHRASE[0])
    assert cache.embeddings.worker.drain(30)
    result = near(cache, PARAPHRASE[1], ProjectSettings(embedding_review_threshold=0.6))
    assert result.served is None
    queued = [c for c in result.queued if c.verdict.tier == "embedding"]
    assert queued and queued[0].entry_id == entry and queued[0].verdict.score >= 0.6


def test_opt_in_serving_and_the_guard_still_refuses(make_cache):
    cache, _ = make_cache()
    entry = record(cache, "The hotel has 120 rooms. How many floors does it need?")
    record(cache, PARAPHRASE[0])
    assert cache.embeddings.worker.drain(30)
    settings = ProjectSettings(embedding_serve_threshold=0.6, embedding_review_threshold=0.5)
    served = near(cache, PARAPHRASE[1], settings)
    assert served.served is not None and served.served.tier == "embedding"
    refused = near(cache, "The hotel has 220 rooms. How many floors does it need?", settings)
    assert refused.served is None and refused.best.entry_id == entry
    assert "220" in (refused.best.verdict.guard_reason or "")


def test_the_worker_catches_up_after_a_burst(make_cache):
    cache, counting = make_cache()
    for i in range(60):
        record(cache, f"Write a haiku about season number {i} and its colours")
    assert cache.embeddings.worker.drain(60)
    assert cache.embeddings.index.size("p") == 60


def test_an_embedder_failure_is_a_plain_miss(make_cache):
    cache, counting = make_cache(fail=True)
    record(cache, PARAPHRASE[0])
    result = near(cache, PARAPHRASE[1], ProjectSettings(embedding_review_threshold=0.5))
    assert result.served is None and counting.calls >= 1


def test_a_hit_never_touches_the_model(make_cache):
    cache, counting = make_cache()
    record(cache, PARAPHRASE[0])
    assert cache.embeddings.worker.drain(30)
    before = counting.calls
    c = canonical(PARAPHRASE[0])
    assert cache.match("p", request_fingerprint(c), normalised_fingerprint(c)).tier == "exact"
    assert counting.calls == before


@pytest.mark.slow
def test_the_flag_without_a_model_refuses_to_start(tmp_path):
    env = {**os.environ, "SEMULA_EMBEDDINGS": "on", "SEMULA_EMBEDDINGS_OFFLINE": "on",
           "SEMULA_EMBEDDINGS_MODEL_PATH": ""}
    env.pop("SEMULA_EMBEDDINGS_MODEL_PATH")
    result = subprocess.run([sys.executable, "-m", "semula", "proxy", "--data-dir", str(tmp_path), "--listen-port", "0"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode != 0
    assert "embedding tier is on" in result.stderr and "semula embeddings fetch" in result.stderr, result.stderr


def test_thresholds_are_per_model(make_cache):
    cache, _ = make_cache()
    record(cache, PARAPHRASE[0])
    assert cache.embeddings.worker.drain(30)
    other_model_only = ProjectSettings(embedding_review_threshold={"BAAI/bge-small-en-v1.5": 0.5})
    assert not [c for c in near(cache, PARAPHRASE[1], other_model_only).queued if c.verdict.tier == "embedding"]
    this_model = ProjectSettings(embedding_review_threshold={MODEL: 0.6})
    assert [c for c in near(cache, PARAPHRASE[1], this_model).queued if c.verdict.tier == "embedding"]
