"""The peers of `bench.peers`, set up on the run's database and filled with our rows.

Mem0 OSS (pgvector vector store, local MiniLM), LangGraph's `AsyncPostgresStore` with a
vector index and langchain-postgres' `PGVectorStore`, each configured the way its docs
show, plus the floor (query embedding + one raw filtered kNN). Each is a `Peer`: two
calls, with the query embedding and pre-embedded, that return how many results came
back, and the settings that make the run reproducible.

Each peer creates its own tables; `bench.peer_fill` fills them with our rows.
Pre-embedded calls get the vector through `LookupEmbeddings`, an
`Embeddings` that hands back the run's precomputed query vectors (Mem0 and the LangGraph
store embed inside ``search``, so a second instance with this embedder measures them
without the model).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.embeddings import Embeddings

from bench.seeding import TABLE
from memory_graph_agent.storage.postgres import sqlalchemy_url

DIM = 384
MEM0 = "Mem0"
LANGGRAPH = "LangGraph AsyncPostgresStore"
PGVS = "langchain-postgres PGVectorStore"
MEM0_TABLE = "peer_mem0"
PGVS_TABLE = "peer_pgvectorstore"
LG_NAMESPACE = "memories"
PROBE_USER = "layout-probe"
PEER_PACKAGES = (
    "mem0ai",
    "langgraph-checkpoint-postgres",
    "langchain-postgres",
    "langchain-huggingface",
    "sentence-transformers",
    "torch",
    "psycopg",
    "spacy",
)
"""Versions recorded next to the numbers (spaCy absent: Mem0 then skips lemmas/entities)."""


def package_versions() -> dict[str, str | None]:
    """Installed versions of the peers' packages (None when absent)."""
    out: dict[str, str | None] = {}
    for name in PEER_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


class LookupEmbeddings(Embeddings):
    """The run's precomputed query vectors, by text: a peer's search without the model."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The stored vector of each text (KeyError for a text never embedded)."""
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """The stored vector of ``text``."""
        return self.vectors[text]


@dataclass
class Peer:
    """One system under test: its two timed calls and how it was configured."""

    name: str
    search: Callable[[str], Awaitable[int]]
    """With the query embedding: the text in, the number of results out."""
    search_pre: Callable[[str, list[float]], Awaitable[int]]
    """Pre-embedded: the text and its vector in (each peer takes what its API takes)."""
    settings: dict[str, Any] = field(default_factory=dict)
    probe: Callable[[], Awaitable[None]] | None = None
    """Writes one memory of `PROBE_USER` through the peer's own API (`check_layout`)."""


def vector_literal(v: list[float]) -> str:
    """The text form pgvector parses."""
    return "[" + ",".join(map(str, v)) + "]"


# ------------------------------------------------------------------------------ floor


async def floor_peer(
    stack: contextlib.AsyncExitStack,
    database_url: str,
    model: Any,
    user_id: str,
    k: int,
    session_options: list[str],
) -> Peer:
    """Query embedding (sentence-transformers ``encode``) + one raw filtered kNN (psycopg).

    ``session_options`` are our recall's ``SET`` options (iterative HNSW scans), so the
    floor returns k like our search does instead of what one HNSW pass leaves after the
    user filter.
    """
    conn = await stack.enter_async_context(
        await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    )
    for option in session_options:
        await conn.execute(f"SET {option}")
    sql = (
        f'SELECT langchain_id FROM "{TABLE}" WHERE user_id = %s '
        "ORDER BY embedding <=> %s::halfvec LIMIT %s"
    )

    async def knn(_text: str, vec: list[float]) -> int:
        cur = await conn.execute(sql, (user_id, vector_literal(vec), k))
        return len(await cur.fetchall())

    async def search(text: str) -> int:
        vec = model.encode(text, normalize_embeddings=True).tolist()
        return await knn(text, vec)

    return Peer(
        "floor",
        search,
        knn,
        {
            "embedding": "SentenceTransformer(all-MiniLM-L6-v2).encode(query), same process",
            "sql": sql,
            "session": session_options,
            "driver": "psycopg AsyncConnection, autocommit (prepared after 5 runs)",
        },
    )


# ------------------------------------------------------------------------------- Mem0


def mem0_peer(
    stack: contextlib.ExitStack | contextlib.AsyncExitStack,
    database_url: str,
    model_path: str,
    lookup: LookupEmbeddings,
    user_id: str,
    k: int,
    home: Path,
) -> Peer:
    """Mem0 OSS `Memory` on pgvector with the local MiniLM (huggingface embedder).

    The LLM is configured (Mem0 requires one) but never called: memories are added with
    ``infer=False``. Telemetry is off and Mem0's home (its SQLite history) is ``home``.
    """
    os.environ["MEM0_TELEMETRY"] = "False"  # read when mem0 is imported
    os.environ.setdefault("MEM0_DIR", str(home))
    from mem0 import Memory

    def config(embedder: dict[str, Any], history: str) -> dict[str, Any]:
        return {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": database_url,
                    "collection_name": MEM0_TABLE,
                    "embedding_model_dims": DIM,
                    "hnsw": True,
                },
            },
            "embedder": embedder,
            "llm": {"provider": "openai", "config": {"api_key": "unused-with-infer-false"}},
            "history_db_path": str(home / history),
        }

    real = Memory.from_config(
        config(
            {"provider": "huggingface", "config": {"model": model_path, "embedding_dims": DIM}},
            "history.db",
        )
    )
    pre = Memory.from_config(
        config({"provider": "langchain", "config": {"model": lookup}}, "history-pre.db")
    )
    for memory in (real, pre):  # closed before the run's database is dropped
        stack.callback(memory.vector_store.connection_pool.close)
        stack.callback(memory.close)
    real.vector_store.create_col()  # its own DDL: table, HNSW and full-text indexes
    filters = {"user_id": user_id}

    async def search(text: str) -> int:
        return len(real.search(text, top_k=k, filters=filters)["results"])

    async def search_pre(text: str, _vec: list[float]) -> int:
        return len(pre.search(text, top_k=k, filters=filters)["results"])

    async def probe() -> None:
        real.add([{"role": "user", "content": "layout probe"}], user_id=PROBE_USER, infer=False)

    return Peer(
        MEM0,
        search,
        search_pre,
        {
            "api": "Memory.search(query, top_k=k, filters={'user_id': ...}) (sync)",
            "vector_store": {"provider": "pgvector", "hnsw": True, "table": MEM0_TABLE},
            "embedder": {"provider": "huggingface", "model": "all-MiniLM-L6-v2 (local path)"},
            "pre_embedded": "a second Memory whose embedder (provider 'langchain') looks the "
            "query vector up",
            "writes": "add(messages, user_id=..., infer=False); bulk rows copied in that layout",
            "notes": "search = semantic top max(4k, 60) + keyword (full-text) search + scoring; "
            "without spaCy (mem0ai's nlp extra) no lemmas and no entity boosts; "
            "MEM0_TELEMETRY=False",
        },
        probe,
    )


# -------------------------------------------------------------------- LangGraph store


async def langgraph_peer(
    stack: contextlib.AsyncExitStack,
    database_url: str,
    embeddings: Embeddings,
    lookup: LookupEmbeddings,
    user_id: str,
    k: int,
) -> Peer:
    """`AsyncPostgresStore` with an HNSW cosine index on the ``text`` field."""
    from langgraph.store.postgres import AsyncPostgresStore

    def index(embed: Embeddings) -> dict[str, Any]:
        return {
            "dims": DIM,
            "embed": embed,
            "fields": ["text"],
            "distance_type": "cosine",
            "ann_index_config": {"kind": "hnsw", "vector_type": "vector"},
        }

    store = await stack.enter_async_context(
        AsyncPostgresStore.from_conn_string(database_url, index=index(embeddings))
    )
    await store.setup()
    pre = await stack.enter_async_context(
        AsyncPostgresStore.from_conn_string(database_url, index=index(lookup))
    )
    namespace = (LG_NAMESPACE, user_id)

    async def search(text: str) -> int:
        return len(await store.asearch(namespace, query=text, limit=k))

    async def search_pre(text: str, _vec: list[float]) -> int:
        return len(await pre.asearch(namespace, query=text, limit=k))

    async def probe() -> None:
        await store.aput((LG_NAMESPACE, PROBE_USER), "probe", {"text": "layout probe"})

    return Peer(
        LANGGRAPH,
        search,
        search_pre,
        {
            "api": "asearch(('memories', user_id), query=..., limit=k)",
            "index": {k_: v for k_, v in index(embeddings).items() if k_ != "embed"},
            "embed": "langchain_huggingface.HuggingFaceEmbeddings(all-MiniLM-L6-v2, normalized)",
            "pre_embedded": "a second store on the same tables whose embed looks the vector up",
            "writes": "aput(namespace, key, {'text': ...}); bulk rows copied in that layout",
        },
        probe,
    )


# ---------------------------------------------------------------- langchain-postgres


async def pgvectorstore_peer(
    stack: contextlib.AsyncExitStack,
    database_url: str,
    embeddings: Embeddings,
    user_id: str,
    k: int,
) -> Peer:
    """`PGVectorStore` on its own table with a ``user_id`` column and an HNSW index."""
    from langchain_postgres import Column, PGEngine, PGVectorStore
    from langchain_postgres.v2.indexes import HNSWIndex

    engine = PGEngine.from_connection_string(sqlalchemy_url(database_url))
    stack.push_async_callback(engine.close)
    await engine.ainit_vectorstore_table(
        PGVS_TABLE, DIM, metadata_columns=[Column("user_id", "TEXT")], overwrite_existing=True
    )
    store = await PGVectorStore.create(
        engine, table_name=PGVS_TABLE, embedding_service=embeddings, metadata_columns=["user_id"]
    )
    await store.aapply_vector_index(HNSWIndex())
    filt = {"user_id": user_id}

    async def search(text: str) -> int:
        return len(await store.asimilarity_search(text, k=k, filter=filt))

    async def search_pre(_text: str, vec: list[float]) -> int:
        return len(await store.asimilarity_search_by_vector(vec, k=k, filter=filt))

    async def probe() -> None:
        await store.aadd_texts(["layout probe"], metadatas=[{"user_id": PROBE_USER}])

    return Peer(
        PGVS,
        search,
        search_pre,
        {
            "api": "asimilarity_search(query, k=k, filter={'user_id': ...}); pre-embedded: "
            "asimilarity_search_by_vector",
            "table": "ainit_vectorstore_table(metadata_columns=[Column('user_id', 'TEXT')])",
            "index": "aapply_vector_index(HNSWIndex()) (cosine, default m/ef_construction)",
            "embedding_service": "langchain_huggingface.HuggingFaceEmbeddings(all-MiniLM-L6-v2)",
            "writes": "aadd_texts(texts, metadatas=[{'user_id': ...}]); bulk rows copied in "
            "that layout",
        },
        probe,
    )
