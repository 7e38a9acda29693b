"""The opt-in embedding tier: model loading (fastembed), vectors in DuckDB, an in-memory index and a worker.

Nothing here runs unless SEMULA_EMBEDDINGS=on (or the `semula_embeddings` option). fastembed is an
optional extra and is imported only when a model is loaded, so the default install never needs it.

Vectors and thresholds are per model name: a cosine from one model means nothing for another.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from semula.core.canonical import CanonicalRequest
from semula.core.normalise import scrub_volatile
from semula.core.redact import redact_text

log = logging.getLogger("semula")

DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
MAX_TOKENS = 128
# Cut very long texts before tokenising: 128 tokens of any real text fit well inside this.
_PRE_CUT_CHARS = 16_384
EXTRA_HINT = "the embeddings extra is not installed: pip install 'semula[embeddings]'"

_ON = {"1", "on", "true", "yes"}
_OFF = {"0", "off", "false", "no", ""}


class EmbeddingsUnavailable(Exception):
    """The embedding tier was asked for but cannot run. The message says why and what to run."""


# ---------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class EmbeddingConfig:
    enabled: bool
    model_name: str = DEFAULT_MODEL
    model_path: str | None = None
    offline: bool = False
    cache_dir: Path = Path(".semula/models")


def _flag(name: str, value: str | None) -> bool:
    v = (value or "").strip().lower()
    if v in _ON:
        return True
    if v in _OFF:
        return False
    raise ValueError(f"{name}={value!r} is not a switch: use on or off")


def config_from_env(data_dir: Path | str, option_enabled: bool | None = None,
                    environ: Mapping[str, str] | None = None) -> EmbeddingConfig:
    """The tier's settings from SEMULA_EMBEDDINGS* variables; an explicit option wins over the env flag."""
    env = os.environ if environ is None else environ
    enabled = option_enabled if option_enabled is not None else _flag("SEMULA_EMBEDDINGS", env.get("SEMULA_EMBEDDINGS"))
    model_path = (env.get("SEMULA_EMBEDDINGS_MODEL_PATH") or "").strip() or None
    return EmbeddingConfig(
        enabled=enabled,
        model_name=(env.get("SEMULA_EMBEDDINGS_MODEL") or "").strip() or DEFAULT_MODEL,
        model_path=model_path,
        offline=_flag("SEMULA_EMBEDDINGS_OFFLINE", env.get("SEMULA_EMBEDDINGS_OFFLINE")),
        cache_dir=Path(data_dir) / "models",
    )


# ---------------------------------------------------------------------------------------------
# The model


def _import_fastembed() -> Any:
    try:
        import fastembed
    except ImportError as e:
        raise EmbeddingsUnavailable(f"{EXTRA_HINT} ({e})") from e
    return fastembed


def _supported(fastembed: Any, model_name: str) -> None:
    names = {d["model"].lower() for d in fastembed.TextEmbedding.list_supported_models()}
    if model_name.lower() not in names:
        raise EmbeddingsUnavailable(
            f"fastembed does not know the model {model_name!r}: set SEMULA_EMBEDDINGS_MODEL to one of "
            "fastembed's TextEmbedding models (python -c 'from fastembed import TextEmbedding; "
            "print(TextEmbedding.list_supported_models())')"
        )


def _not_cached(config: EmbeddingConfig) -> EmbeddingsUnavailable:
    return EmbeddingsUnavailable(
        f"model {config.model_name} is not in {config.cache_dir} and SEMULA_EMBEDDINGS_OFFLINE=on forbids "
        "downloading: run `semula embeddings fetch` with network and the variable off, "
        "or set SEMULA_EMBEDDINGS_MODEL_PATH to a local model folder"
    )


def _download_failed(config: EmbeddingConfig, e: BaseException) -> EmbeddingsUnavailable:
    return EmbeddingsUnavailable(
        f"model {config.model_name} could not be downloaded into {config.cache_dir} ({type(e).__name__}: {e}): "
        "check the network and run `semula embeddings fetch`, or set SEMULA_EMBEDDINGS_MODEL_PATH to a local "
        "model folder (with SEMULA_EMBEDDINGS_MODEL naming its fastembed model)"
    )


def _construct(fastembed: Any, config: EmbeddingConfig, *, local_only: bool, lazy: bool = False) -> Any:
    """A fastembed TextEmbedding from the model folder, the cache, or (local_only=False) the hub."""
    if config.model_path:
        path = Path(config.model_path)
        if not path.is_dir():
            raise EmbeddingsUnavailable(
                f"SEMULA_EMBEDDINGS_MODEL_PATH={config.model_path} is not a folder: point it at a model folder "
                "(model.onnx, tokenizer.json, …)"
            )
        try:
            return fastembed.TextEmbedding(config.model_name, specific_model_path=str(path), threads=2,
                                           lazy_load=lazy)
        except Exception as e:  # fastembed raises ValueError, onnxruntime its own errors
            raise EmbeddingsUnavailable(
                f"model {config.model_name} did not load from {path} ({type(e).__name__}: {e}): check that the "
                "folder holds that model's files and SEMULA_EMBEDDINGS_MODEL names it"
            ) from e
    try:
        config.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmbeddingsUnavailable(f"cannot create the model cache {config.cache_dir}: {e}") from e
    return fastembed.TextEmbedding(config.model_name, cache_dir=str(config.cache_dir), threads=2,
                                   local_files_only=local_only, lazy_load=lazy)


@contextmanager
def _quiet_fastembed_logs() -> Iterator[None]:
    """fastembed logs (via loguru) each source a cache probe misses; our own message covers that."""
    try:
        from loguru import logger as loguru_logger  # type: ignore[import-not-found]
    except ImportError:
        yield
        return
    loguru_logger.disable("fastembed")
    try:
        yield
    finally:
        loguru_logger.enable("fastembed")


def fetch(config: EmbeddingConfig) -> Path:
    """Download the model into config.cache_dir (or find it there); returns the model folder."""
    fastembed = _import_fastembed()
    if config.model_path:
        if not Path(config.model_path).is_dir():
            raise EmbeddingsUnavailable(f"SEMULA_EMBEDDINGS_MODEL_PATH={config.model_path} is not a folder")
        return Path(config.model_path)
    _supported(fastembed, config.model_name)
    return Path(_cache_first(fastembed, config, lazy=True).model._model_dir)


def _cache_first(fastembed: Any, config: EmbeddingConfig, lazy: bool = False) -> Any:
    """The model from config.cache_dir without network; else downloaded, unless offline forbids it."""
    try:
        with _quiet_fastembed_logs():
            return _construct(fastembed, config, local_only=True, lazy=lazy)
    except EmbeddingsUnavailable:
        raise
    except Exception as cached_error:
        if config.offline:
            raise _not_cached(config) from cached_error
    try:
        return _construct(fastembed, config, local_only=False, lazy=lazy)
    except EmbeddingsUnavailable:
        raise
    except Exception as e:
        raise _download_failed(config, e) from e


class Embedder:
    """A loaded model: `embed` gives float32, L2-normalised rows, each text cut to 128 tokens first."""

    def __init__(self, model: Any, name: str, max_tokens: int = MAX_TOKENS):
        self._model = model
        self._name = name
        self.max_tokens = max_tokens
        self.tokenizer = _find_tokenizer(model)
        if self.tokenizer is None:
            log.warning("embeddings: %s exposes no tokenizer; cutting texts at %d words instead", name, max_tokens)
        self._lock = threading.Lock()  # one onnx session; keep calls serial

    @classmethod
    def load(cls, config: EmbeddingConfig) -> Embedder:
        fastembed = _import_fastembed()
        _supported(fastembed, config.model_name)
        if config.model_path:
            return cls(_construct(fastembed, config, local_only=True), config.model_name)
        return cls(_cache_first(fastembed, config), config.model_name)  # later starts need no network

    @property
    def name(self) -> str:
        return self._name

    def truncate(self, text: str) -> str:
        """`text` cut so the model sees at most max_tokens tokens (special tokens included)."""
        text = text[:_PRE_CUT_CHARS]
        if self.tokenizer is None:
            words = text.split()
            return " ".join(words[: self.max_tokens]) if len(words) > self.max_tokens else text
        enc = self.tokenizer.encode(text)
        content = [i for i, special in enumerate(enc.special_tokens_mask) if not special]
        budget = self.max_tokens - (len(enc.ids) - len(content))
        if len(content) <= budget:
            return text
        return text[: enc.offsets[content[budget - 1]][1]]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        cut = [self.truncate(t) for t in texts]
        with self._lock:
            rows = list(self._model.embed(cut, batch_size=max(1, min(len(cut), 64))))
        matrix = np.asarray(np.vstack(rows), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return matrix / norms


def _find_tokenizer(model: Any) -> Any:
    inner = getattr(model, "model", None)  # TextEmbedding wraps the concrete OnnxTextEmbedding
    for holder in (inner, model):
        if holder is None:
            continue
        tok = getattr(holder, "tokenizer", None)
        if tok is None and hasattr(holder, "_ensure_tokenizer"):
            try:
                holder._ensure_tokenizer()
                tok = getattr(holder, "tokenizer", None)
            except Exception:
                tok = None
        if tok is not None and hasattr(tok, "encode"):
            return tok
    return None


def embedding_text(canonical: CanonicalRequest | Mapping[str, Any], scrub_patterns: Sequence[str] = ()) -> str:
    """What is embedded: the last message with text, scrubbed and redacted."""
    if not isinstance(canonical, CanonicalRequest):
        canonical = CanonicalRequest.from_json(canonical)
    return redact_text(scrub_volatile(canonical.last_text(), scrub_patterns))


# ---------------------------------------------------------------------------------------------
# Storage (functions on the store's DuckDB connection; call them from the store thread)


def create_tables(con: Any) -> None:
    con.execute(
        """
        CREATE TABLE IF NOT EXISTS entry_vector (
            entry_id BIGINT NOT NULL,
            model VARCHAR NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            created_at TIMESTAMP NOT NULL,
            PRIMARY KEY (entry_id, model)
        )
        """
    )


def put_vectors(con: Any, model: str, rows: Iterable[tuple[int, np.ndarray]]) -> int:
    now = datetime.now(UTC).replace(tzinfo=None)
    params = []
    for entry_id, vector in rows:
        v = np.ascontiguousarray(vector, dtype=np.float32).ravel()
        params.append([int(entry_id), model, int(v.shape[0]), v.tobytes(), now])
    if params:
        con.executemany(
            "INSERT OR REPLACE INTO entry_vector (entry_id, model, dim, vector, created_at) VALUES (?, ?, ?, ?, ?)",
            params,
        )
    return len(params)


def load_vectors(con: Any, model: str, project: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids, matrix) of the project's live entries that have a vector from `model`, by entry id."""
    rows = con.execute(
        "SELECT v.entry_id, v.dim, v.vector FROM entry_vector v JOIN entries e ON e.id = v.entry_id "
        "WHERE v.model = ? AND e.project = ? ORDER BY v.entry_id",
        [model, project],
    ).fetchall()
    return _to_matrix(rows)


def _to_matrix(rows: list[tuple[int, int, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    dims = {}
    for _, dim, _ in rows:
        dims[dim] = dims.get(dim, 0) + 1
    dim = max(dims, key=dims.get)  # one model has one dim; anything else is damage, skip it
    kept = [(i, bytes(b)) for i, d, b in rows if d == dim and len(b) == dim * 4]
    ids = np.fromiter((i for i, _ in kept), dtype=np.int64, count=len(kept))
    matrix = np.frombuffer(b"".join(b for _, b in kept), dtype=np.float32).reshape(len(kept), dim).copy()
    return ids, matrix


def entries_without_vectors(con: Any, model: str, limit: int = 1000) -> list[tuple[int, str, dict[str, Any]]]:
    rows = con.execute(
        "SELECT e.id, e.project, e.canonical FROM entries e WHERE NOT EXISTS "
        "(SELECT 1 FROM entry_vector v WHERE v.entry_id = e.id AND v.model = ?) ORDER BY e.id LIMIT ?",
        [model, int(limit)],
    ).fetchall()
    return [(int(i), p, json.loads(c)) for i, p, c in rows]


def count_without_vectors(con: Any, model: str) -> int:
    return int(con.execute(
        "SELECT count(*) FROM entries e WHERE NOT EXISTS "
        "(SELECT 1 FROM entry_vector v WHERE v.entry_id = e.id AND v.model = ?)",
        [model],
    ).fetchone()[0])


def vector_counts(con: Any) -> dict[str, int]:
    return {m: int(n) for m, n in con.execute(
        "SELECT model, count(*) FROM entry_vector GROUP BY model ORDER BY model").fetchall()}


# ---------------------------------------------------------------------------------------------
# The in-memory index


class VectorIndex:
    """Per-project matrices of unit vectors, loaded through `loader(project)` when first needed or invalidated.

    Thread-safe. `loader` returns (ids, matrix) as `load_vectors` does; the owner decides which thread
    reads the store (e.g. a loader that asks the store thread and waits).
    """

    def __init__(self, loader: Callable[[str], tuple[np.ndarray, np.ndarray]]):
        self._loader = loader
        self._lock = threading.Lock()
        self._data: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._stale: set[str] = set()

    def invalidate(self, project: str | None = None) -> None:
        """The stored set changed: reload `project` (None: every project) on its next search."""
        with self._lock:
            if project is None:
                self._stale.update(self._data)
            else:
                self._stale.add(project)

    def set(self, project: str, ids: np.ndarray, matrix: np.ndarray) -> None:
        with self._lock:
            self._data[project] = (np.asarray(ids, dtype=np.int64), np.asarray(matrix, dtype=np.float32))
            self._stale.discard(project)

    def add(self, project: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        """New or re-made vectors: fold them into a loaded matrix instead of reloading it."""
        with self._lock:
            if project not in self._data or project in self._stale:
                return  # not loaded (or already due a reload): the next search loads everything
            old_ids, old_matrix = self._data[project]
            new_ids = np.asarray(ids, dtype=np.int64)
            keep = ~np.isin(old_ids, new_ids)
            matrix = np.asarray(vectors, dtype=np.float32).reshape(len(new_ids), -1)
            if old_matrix.shape[0] and old_matrix.shape[1] != matrix.shape[1]:
                self._stale.add(project)
                return
            self._data[project] = (np.concatenate([old_ids[keep], new_ids]),
                                   np.concatenate([old_matrix[keep], matrix]) if old_matrix.shape[0] else matrix)

    def _get(self, project: str) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if project in self._data and project not in self._stale:
                return self._data[project]
        ids, matrix = self._loader(project)
        self.set(project, ids, matrix)
        return self._data[project]

    def size(self, project: str) -> int:
        return int(self._get(project)[0].shape[0])

    def search(self, project: str, vector: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
        ids, matrix = self._get(project)
        if ids.shape[0] == 0:
            return []
        v = np.asarray(vector, dtype=np.float32).ravel()
        if matrix.shape[1] != v.shape[0]:
            log.warning("embeddings: query has %d dims, project %s index has %d; no search",
                        v.shape[0], project, matrix.shape[1])
            return []
        scores = matrix @ v
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top]


# ---------------------------------------------------------------------------------------------
# The background worker


class EmbeddingWorker:
    """Embeds submitted entries in batches on its own thread; vectors go out through `write(model, rows)`.

    `rows` is a list of (entry_id, vector). `on_written(projects)` (optional) runs after a successful
    write, e.g. to invalidate those projects in a VectorIndex. Failures are logged and counted in
    `failed`; the thread never dies of them.
    """

    def __init__(self, embedder: Any, write: Callable[[str, list[tuple[int, np.ndarray]]], Any],
                 batch_size: int = 32, on_written: Callable[[set[str]], Any] | None = None,
                 name: str = "semula-embeddings"):
        self.embedder = embedder
        self._write = write
        self._on_written = on_written
        self.batch_size = batch_size
        self.embedded = 0
        self.failed = 0
        self._queue: queue.Queue[tuple[int, str, str] | None] = queue.Queue()
        self._pending = 0
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, entry_id: int, project: str, text: str) -> None:
        if self._stopped:
            return
        with self._cond:
            self._pending += 1
        self._queue.put((entry_id, project, text))

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until everything submitted so far is embedded or failed; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while len(batch) < self.batch_size:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            try:
                self._process(batch)
            finally:
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()
            if stop:
                return

    def _process(self, batch: list[tuple[int, str, str]]) -> None:
        try:
            vectors = self.embedder.embed([text for _, _, text in batch])
            rows = [(entry_id, vectors[i]) for i, (entry_id, _, _) in enumerate(batch)]
            self._write(self.embedder.name, rows)
        except Exception:
            self.failed += len(batch)
            log.exception("embeddings: %d entries could not be embedded or stored; they stay without vectors",
                          len(batch))
            return
        self.embedded += len(batch)
        if self._on_written is not None:
            try:
                self._on_written({project for _, project, _ in batch})
            except Exception:
                log.exception("embeddings: on_written callback failed")
