"""The embedding tier's building blocks, with the real shared model (no fake model anywhere)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from entries import chat, new_entry
from semula.core.request.canonical import CanonicalRequest, Message
from semula.embeddings.model import Embedder, EmbeddingConfig, EmbeddingsUnavailable, config_from_env, embedding_text, fetch
from semula.embeddings.worker import EmbeddingWorker, VectorIndex
from semula.store.duckdb.store import DuckDBStore
from shared_paths import shared_dir

pytest.importorskip("fastembed", reason="the embeddings extra (fastembed) is not installed")

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def _model_dir() -> Path | None:
    shared = shared_dir()
    if shared is None:
        return None
    folder = shared / "models" / "all-MiniLM-L6-v2-onnx"
    return folder if (folder / "model.onnx").is_file() else None


MODEL_DIR = _model_dir()
needs_model = pytest.mark.skipif(
    MODEL_DIR is None,
    reason="shared model missing: expected models/all-MiniLM-L6-v2-onnx under $SEMULA_SHARED_DIR, ../shared or /work/shared",
)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    if MODEL_DIR is None:
        pytest.skip("shared model missing: models/all-MiniLM-L6-v2-onnx under $SEMULA_SHARED_DIR, ../shared or /work/shared")
    data_dir = tmp_path_factory.mktemp("data")
    config = config_from_env(data_dir, environ={
        "SEMULA_EMBEDDINGS": "on",
        "SEMULA_EMBEDDINGS_MODEL": MODEL_NAME,
        "SEMULA_EMBEDDINGS_MODEL_PATH": str(MODEL_DIR),
        "SEMULA_EMBEDDINGS_OFFLINE": "on",
    })
    return Embedder.load(config)


def test_config_from_env(tmp_path):
    config = config_from_env(tmp_path, environ={})
    assert config == EmbeddingConfig(enabled=False, model_name="BAAI/bge-small-en-v1.5", model_path=None,
                                     offline=False, cache_dir=tmp_path / "models")
    assert config_from_env(tmp_path, option_enabled=True, environ={"SEMULA_EMBEDDINGS": "off"}).enabled
    on = config_from_env(tmp_path, environ={"SEMULA_EMBEDDINGS": "on", "SEMULA_EMBEDDINGS_OFFLINE": "1"})
    assert on.enabled and on.offline
    with pytest.raises(ValueError, match="SEMULA_EMBEDDINGS"):
        config_from_env(tmp_path, environ={"SEMULA_EMBEDDINGS": "maybe"})


@needs_model
def test_loads_the_shared_model_and_gives_unit_vectors(embedder):
    assert embedder.name == MODEL_NAME
    assert embedder.tokenizer is not None, "the model's own tokenizer should be reachable"
    vectors = embedder.embed(["How do I sort a list in Python?", "python list sorting"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@needs_model
def test_the_session_runs_on_two_threads_that_do_not_spin(embedder):
    """Spinning pool threads took the core a miss's other work needs (benchmark/results/embedding.md)."""
    options = embedder._model.model.model.get_session_options()
    assert options.intra_op_num_threads == 2
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


@needs_model
def test_paraphrases_are_closer_than_unrelated_texts(embedder):
    a, b, c = embedder.embed([
        "How do I sort a list in Python?",
        "python list sorting",
        "What is the capital of Australia?",
    ])
    assert float(a @ b) > 0.8
    assert float(a @ b) > float(a @ c) + 0.3


@needs_model
def test_texts_are_cut_to_128_tokens_with_the_models_tokenizer(embedder):
    long = " ".join(f"Sentence {i} is about apples, pears and the weather in town." for i in range(200))
    cut = embedder.truncate(long)
    assert len(cut) < len(long)
    assert len(embedder.tokenizer.encode(cut).ids) <= 128  # special tokens included
    assert len(embedder.tokenizer.encode(cut).ids) >= 120
    short = "How do I sort a list in Python?"
    assert embedder.truncate(short) == short

    whole, first = embedder.embed([long, cut])
    assert float(whole @ first) > 0.9999
    # A different tail after the first 128 tokens changes nothing.
    other_tail = cut + " " + " ".join(f"Completely different text about cars {i}." for i in range(100))
    np.testing.assert_allclose(embedder.embed([other_tail])[0], first, atol=1e-5)
    # fastembed by itself would have read up to 512 tokens.
    untruncated = np.asarray(next(iter(embedder._model.embed([long]))), dtype=np.float32)
    assert float(untruncated @ first) < 0.999


def test_offline_without_a_model_refuses_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a mistaken download must fail fast, not hang
    config = EmbeddingConfig(enabled=True, offline=True, cache_dir=tmp_path / "models")
    with pytest.raises(EmbeddingsUnavailable) as e:
        Embedder.load(config)
    message = str(e.value)
    assert "BAAI/bge-small-en-v1.5" in message and str(tmp_path / "models") in message
    assert "SEMULA_EMBEDDINGS_OFFLINE=on" in message and "semula embeddings fetch" in message
    assert "SEMULA_EMBEDDINGS_MODEL_PATH" in message
    with pytest.raises(EmbeddingsUnavailable, match="SEMULA_EMBEDDINGS_OFFLINE=on forbids downloading"):
        fetch(config)


def test_a_failed_download_becomes_a_clear_error(tmp_path, monkeypatch):
    # No network here: HF_HUB_OFFLINE makes fastembed's real download path fail at the network boundary.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = EmbeddingConfig(enabled=True, offline=False, cache_dir=tmp_path / "models")
    for attempt in (Embedder.load, fetch):
        with pytest.raises(EmbeddingsUnavailable, match="could not be downloaded into") as e:
            attempt(config)
        assert "semula embeddings fetch" in str(e.value) and "SEMULA_EMBEDDINGS_MODEL_PATH" in str(e.value)


def test_a_missing_model_folder_or_unknown_model_is_named(tmp_path):
    with pytest.raises(EmbeddingsUnavailable, match="is not a folder"):
        Embedder.load(EmbeddingConfig(enabled=True, model_name=MODEL_NAME, model_path=str(tmp_path / "nope"),
                                      cache_dir=tmp_path / "models"))
    with pytest.raises(EmbeddingsUnavailable, match="does not know the model 'acme/nonsense'"):
        Embedder.load(EmbeddingConfig(enabled=True, model_name="acme/nonsense", offline=True,
                                      cache_dir=tmp_path / "models"))


def test_without_fastembed_the_extra_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastembed", None)  # `import fastembed` now raises ImportError
    config = EmbeddingConfig(enabled=True, model_name=MODEL_NAME, model_path=str(tmp_path), cache_dir=tmp_path)
    with pytest.raises(EmbeddingsUnavailable, match=r"pip install 'semula\[embeddings\]'"):
        Embedder.load(config)
    with pytest.raises(EmbeddingsUnavailable, match="embeddings extra is not installed"):
        fetch(config)


def test_embedding_text_is_the_last_text_scrubbed_and_redacted():
    canonical = CanonicalRequest(
        provider="openai", method="POST", endpoint="/v1/chat/completions", query=(), headers=(),
        model="gpt-4o", system="be brief",
        messages=(Message("user", "first question"),
                  Message("user", "trace 123e4567-e89b-12d3-a456-426614174000 key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"),
                  Message("assistant", "")),
        tools=(), params={}, stream=False, body=None,
    )
    text = embedding_text(canonical)
    assert text == embedding_text(canonical.to_json())
    assert "123e4567" not in text and "<uuid>" in text
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789" not in text and "[REDACTED]" in text
    assert "first question" not in text


def test_vector_index_ranks_by_cosine_and_reloads_when_invalidated():
    loads = []
    data = {
        "p": (np.array([10, 11, 12]), np.eye(3, dtype=np.float32)),
        "q": (np.array([], dtype=np.int64), np.zeros((0, 0), dtype=np.float32)),
    }

    def loader(project):
        loads.append(project)
        return data[project]

    index = VectorIndex(loader)
    query = np.array([0.1, 0.9, 0.4], dtype=np.float32)
    query /= np.linalg.norm(query)
    hits = index.search("p", query, k=2)
    assert [h[0] for h in hits] == [11, 12]
    assert hits[0][1] == pytest.approx(float(query[1]))
    assert [h[0] for h in index.search("p", query, k=10)] == [11, 12, 10]
    assert index.search("q", query) == []
    assert loads == ["p", "q"]  # cached until invalidated
    data["p"] = (np.array([10, 11, 12, 13]), np.vstack([np.eye(3), query]).astype(np.float32))
    index.invalidate("p")
    assert index.search("p", query, k=1)[0][0] == 13
    assert loads == ["p", "q", "p"]


@needs_model
def test_worker_catches_up_after_a_burst_and_survives_a_failing_embedder(embedder):
    written: dict[int, np.ndarray] = {}
    projects_seen: set[str] = set()
    lock = threading.Lock()

    def write(model, rows):
        assert model == MODEL_NAME
        with lock:
            written.update({entry_id: vector for entry_id, vector in rows})

    worker = EmbeddingWorker(embedder, write, on_written=projects_seen.update)
    try:
        for i in range(200):
            worker.submit(i, f"p{i % 3}", f"question number {i}: how do I read a file in language {i % 7}?")
        assert worker.drain(timeout=120), f"worker did not catch up: {worker.pending} pending"
        assert worker.embedded == 200 and worker.failed == 0
        assert sorted(written) == list(range(200))
        assert projects_seen == {"p0", "p1", "p2"}
        assert written[5].shape == (384,)
        np.testing.assert_allclose(written[5], embedder.embed([
            "question number 5: how do I read a file in language 5?"])[0], atol=1e-5)

        # The real model behind a wrapper that blows up on some batches.
        class Flaky:
            name = embedder.name
            calls = 0

            def embed(self, texts):
                Flaky.calls += 1
                if any("boom" in t for t in texts):
                    raise RuntimeError("onnxruntime exploded")
                return embedder.embed(texts)

        worker.embedder = Flaky()
        worker.submit(1000, "p0", "boom")
        assert worker.drain(timeout=30)
        assert worker.failed == 1 and 1000 not in written
        worker.submit(1001, "p0", "still alive?")
        assert worker.drain(timeout=30)
        assert 1001 in written and worker.embedded == 201

        def broken_write(model, rows):
            raise OSError("store is gone")

        worker._write = broken_write
        worker.submit(1002, "p0", "lost write")
        assert worker.drain(timeout=30) and worker.failed == 2
        worker._write = write
        worker.submit(1003, "p0", "after the broken write")
        assert worker.drain(timeout=30) and 1003 in written
    finally:
        worker.close()


@pytest.mark.slow
def test_vectors_round_trip_through_duckdb(tmp_path):
    store = DuckDBStore.open(tmp_path)
    store.vectors.ensure_table()
    store.vectors.ensure_table()  # idempotent
    a = store.upsert_entry(new_entry(chat("sort a list"), "p"))
    b = store.upsert_entry(new_entry(chat("read a file"), "p"))
    c = store.upsert_entry(new_entry(chat("capital of France"), "other"))
    rng = np.random.default_rng(0)
    va, vb, vc = (v / np.linalg.norm(v) for v in rng.normal(size=(3, 384)).astype(np.float32))

    assert [e[0] for e in store.vectors.entries_without("m1", 10)] == [a, b, c]
    assert store.vectors.put("m1", [(b, vb), (a, va), (c, vc)]) == 3
    store.vectors.put("m2", [(a, va[:16])])
    assert store.vectors.entries_without("m1", 10) == []
    missing = store.vectors.entries_without("m2", 10)
    assert [(i, p) for i, p, _ in missing] == [(b, "p"), (c, "other")]
    assert embedding_text(missing[0][2]) == "read a file"

    ids, matrix = store.vectors.load("m1", "p")
    assert ids.tolist() == [a, b] and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix, np.vstack([va, vb]))
    ids2, matrix2 = store.vectors.load("m2", "p")
    assert ids2.tolist() == [a] and matrix2.shape == (1, 16)
    empty_ids, empty = store.vectors.load("m1", "nobody")
    assert empty_ids.shape == (0,) and empty.shape[0] == 0

    store.vectors.put("m1", [(a, vb)])  # re-embedding replaces
    np.testing.assert_array_equal(store.vectors.load("m1", "p")[1][0], vb)
    store.delete_entry(b)  # a deleted entry's vector is deleted with it (as on Postgres), so it no longer loads
    assert store.vectors.load("m1", "p")[0].tolist() == [a]
    assert store.vectors.counts() == {"m1": 2, "m2": 1}
    store.close()

    reopened = DuckDBStore.open(tmp_path)
    assert reopened.vectors.load("m1", "other")[0].tolist() == [c]
    reopened.close()
