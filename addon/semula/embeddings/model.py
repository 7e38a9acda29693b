"""The opt-in embedding tier's model: configuration, loading (fastembed), `Embedder` and what is embedded.

The in-memory index and the background worker are in `embeddings.worker`, the tier wired to a
store in `engine.tiers.embedding`; vectors are stored by `semula.store.duckdb.vectors`. Nothing here runs unless SEMULA_EMBEDDINGS=on (or the `semula_embeddings` option). fastembed is an
optional extra and is imported only when a model is loaded, so the default install never needs it.

Vectors and thresholds are per model name: a cosine from one model means nothing for another.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semula.core.settings import parse_switch
from semula.core.request.canonical import CanonicalRequest
from semula.core.request.normalise import scrub_volatile
from semula.core.redact import redact_text
from semula.store.datadir import make_data_dir

log = logging.getLogger("semula")

DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
MAX_TOKENS = 128
# Cut very long texts before tokenising: 128 tokens of any real text fit well inside this.
_PRE_CUT_CHARS = 16_384
ONNX_THREADS = 2  # each text's run on two cores; misses and the worker share the one session (`Embedder`)
EXTRA_HINT = "the embeddings extra is not installed: pip install 'semula[embeddings]'"



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


def config_from_env(data_dir: Path | str, option_enabled: bool | None = None,
                    environ: Mapping[str, str] | None = None) -> EmbeddingConfig:
    """The tier's settings from SEMULA_EMBEDDINGS* variables; an explicit option wins over the env flag."""
    env = os.environ if environ is None else environ
    enabled = option_enabled if option_enabled is not None else parse_switch("SEMULA_EMBEDDINGS", env.get("SEMULA_EMBEDDINGS"))
    model_path = (env.get("SEMULA_EMBEDDINGS_MODEL_PATH") or "").strip() or None
    return EmbeddingConfig(
        enabled=enabled,
        model_name=(env.get("SEMULA_EMBEDDINGS_MODEL") or "").strip() or DEFAULT_MODEL,
        model_path=model_path,
        offline=parse_switch("SEMULA_EMBEDDINGS_OFFLINE", env.get("SEMULA_EMBEDDINGS_OFFLINE")),
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
            return _loaded(fastembed.TextEmbedding(config.model_name, specific_model_path=str(path),
                                                   threads=ONNX_THREADS, lazy_load=True), lazy)
        except Exception as e:  # fastembed raises ValueError, onnxruntime its own errors
            raise EmbeddingsUnavailable(
                f"model {config.model_name} did not load from {path} ({type(e).__name__}: {e}): check that the "
                "folder holds that model's files and SEMULA_EMBEDDINGS_MODEL names it"
            ) from e
    try:
        make_data_dir(config.cache_dir.parent)  # the cache sits in the data dir: maybe its first file
        config.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmbeddingsUnavailable(f"cannot create the model cache {config.cache_dir}: {e}") from e
    return _loaded(fastembed.TextEmbedding(config.model_name, cache_dir=str(config.cache_dir), threads=ONNX_THREADS,
                                           local_files_only=local_only, lazy_load=True), lazy)


def _loaded(model: Any, lazy: bool) -> Any:
    """fastembed's model, made lazily, with its onnx session loaded now (unless `lazy`) with threads that
    sleep between runs. fastembed's own session keeps its pool's threads spinning after each run: on a
    small machine they take the core that the proxy's event loop, the store and the vector search need
    (10,000 recordings, 2 cores: a miss p50 of 28-34 ms against 20 ms, the vector search 2.6 ms against
    0.8; benchmark/results/embedding.md). A model with external data files, or a machine with CUDA, is
    left to fastembed's own loader, and so is a fastembed whose internals differ."""
    if lazy:
        return model
    inner: Any = getattr(model, "model", None)
    try:
        import onnxruntime as ort

        description = inner.model_description
        if description.additional_files or "CUDAExecutionProvider" in ort.get_available_providers():
            raise AttributeError("not a plain CPU model")
        path = Path(inner._model_dir) / description.model_file
    except (AttributeError, ImportError):
        if hasattr(inner, "load_onnx_model"):
            inner.load_onnx_model()
        return model
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = ONNX_THREADS
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    inner.model = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"], sess_options=options)
    inner._ensure_tokenizer()  # what fastembed's loader does after the session
    return model


@contextmanager
def _quiet_fastembed_logs() -> Iterator[None]:
    """fastembed logs (via loguru) each source a cache probe misses; our own message covers that."""
    try:
        from loguru import logger as loguru_logger
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
