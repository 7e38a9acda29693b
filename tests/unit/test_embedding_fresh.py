"""The embedding tier sees what was just recorded, though writes never wait for the model.

A search embeds the project's entries the worker has not started (in the query's batch) and
waits for the ones it is embedding. A fake embedder (bag of hashed words) keeps this model-free;
a gate holds the worker thread to make the timing deterministic.
"""

from __future__ import annotations

import re
import threading
import time
import zlib

import numpy as np
import pytest
from entries import chat, fingerprints, new_entry

from semula.core.cascade import NearQuery
from semula.core.settings import ProjectSettings
from semula.embeddings.worker import EmbeddingWorker
from semula.engine.engine import Engine
from semula.store.duckdb.store import DuckDBStore

SETTINGS = ProjectSettings(embedding_review_threshold=0.5, lexical_review_threshold=1.0)
STORED = "How can I reverse a list in Python quickly"
# Too far apart for the lexical tier (review threshold 1.0 above): only the embedding tier finds it.
PARAPHRASE = "How can I reverse a Python list quickly please"


class GatedEmbedder:
    """Bag-of-words vectors; calls from the worker thread wait for `gate`."""

    name = "fake-bow"

    def __init__(self):
        self.gate = threading.Event()
        self.worker_calls = 0
        self.caller_calls = 0
        self.gate_timeouts = 0  # worker calls the gate held past its deadline

    def embed(self, texts):
        if threading.current_thread().name.startswith("semula-embeddings"):
            self.worker_calls += 1
            opened = self.gate.wait(30)
            self.gate_timeouts += not opened
            assert opened
        else:
            self.caller_calls += 1
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, zlib.crc32(word.encode()) % 64] += 1.0
            out[row] /= max(np.linalg.norm(out[row]), 1e-9)
        return out

    def truncate(self, text):
        return text


@pytest.fixture
def engine(tmp_path):
    embedder = GatedEmbedder()
    engine = Engine.open(DuckDBStore.open(tmp_path), embedder=embedder)
    yield engine, embedder
    embedder.gate.set()
    engine.close()


def record(engine, text, project="p"):
    return engine.record(new_entry(chat(text), project))


def near(engine, text, project="p"):
    c = chat(text)
    return engine.searcher.search(NearQuery(project, c, *fingerprints(c), SETTINGS))


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_an_entry_the_worker_has_not_started_is_embedded_by_the_search(engine):
    engine, embedder = engine
    record(engine, "Something else entirely", project="other")  # holds the worker thread at the gate
    wait_until(lambda: embedder.worker_calls == 1)
    entry = record(engine, STORED)
    result = near(engine, PARAPHRASE)
    assert result.best is not None and result.best.entry_id == entry and result.best.verdict.tier == "embedding"
    assert [c.entry_id for c in result.queued] == [entry]
    embedder.gate.set()
    assert engine.embeddings.worker.drain(10)
    assert embedder.worker_calls == 1, "the worker skipped the entry the search embedded"
    ids, _ = engine.store.vectors.load(embedder.name, "p")
    assert list(ids) == [entry], "the search stored the vector it made"


def test_an_entry_the_worker_is_embedding_is_waited_for(engine):
    engine, embedder = engine
    entry = record(engine, STORED)
    wait_until(lambda: embedder.worker_calls == 1)  # the worker holds it, at the gate
    threading.Timer(0.3, embedder.gate.set).start()
    started = time.monotonic()
    result = near(engine, PARAPHRASE)
    assert time.monotonic() - started >= 0.25
    assert result.best is not None and result.best.entry_id == entry


def test_writes_never_wait_for_the_model(engine):
    # No clock: the model is held at the gate (never opened here) from the first write on, so the
    # writes can only all return if none waits for it. One that did would hold until the gate's
    # deadline, which the worker then counts: a failure, not a hang.
    engine, embedder = engine
    for i in range(20):
        record(engine, f"Describe city number {i} in one sentence")
        if i == 0:
            wait_until(lambda: embedder.worker_calls == 1)  # the worker holds that write's entry, at the gate
    assert embedder.worker_calls == 1 and embedder.gate_timeouts == 0, "a write waited for the model"
    assert embedder.caller_calls == 0


def test_worker_claim_takes_the_most_recent_of_one_project():
    release = threading.Event()
    made = []

    class Slow:
        name = "slow"

        def embed(self, texts):
            release.wait(10)
            made.extend(texts)
            return np.ones((len(texts), 2), dtype=np.float32)

    worker = EmbeddingWorker(Slow(), lambda model, rows: None, batch_size=1)
    try:
        worker.submit(1, "a", "first")
        wait_until(lambda: worker.pending == 1 and not worker._waiting)  # taken by the thread
        for entry_id, project in ((2, "a"), (3, "b"), (4, "a"), (5, "a")):
            worker.submit(entry_id, project, f"text {entry_id}")
        assert worker.claim("a", 2) == [(4, "text 4"), (5, "text 5")]
        assert worker.claim("a", 0) == []
        assert not worker.wait_running("a", 0.05), "entry 1 is still being embedded"
        release.set()
        assert worker.wait_running("a", 5) and worker.drain(5)
        assert made == ["first", "text 2", "text 3"]
    finally:
        release.set()
        worker.close()
