"""The peers of `bench.peers` on the run's database, filled with our rows, layout checked.

Mem0 OSS (pgvector, local MiniLM), LangGraph's `AsyncPostgresStore` with a vector index and
langchain-postgres' `PGVectorStore`, each configured the way its docs show, plus the floor
(query embedding + one raw filtered kNN). Each `Peer` has two calls, with the query
embedding and pre-embedded (through `LookupEmbeddings`, the run's precomputed vectors).
`fill` copies our rows into each peer's tables inside Postgres, in the layout its own write
path produces; `check_layout` writes one memory through each peer's API and compares rows.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.embeddings import Embeddings

from bench.env import versions
from bench.seeding import MAINTENANCE_WORK_MEM, TABLE
from memory_graph_agent.storage.postgres import sqlalchemy_url

PEER_NAMES = ("mem0", "langgraph", "pgvectorstore")
DIM = 384
MEM0_TABLE, PGVS_TABLE, LG_NAMESPACE = "peer_mem0", "peer_pgvectorstore", "memories"
PROBE_USER = "layout-probe"
PEER_PACKAGES = ("mem0ai", "langgraph-checkpoint-postgres", "langchain-postgres",
                 "langchain-huggingface", "sentence-transformers", "torch", "psycopg",
                 "spacy")  # fmt: skip
"""Versions recorded next to the numbers (spaCy absent: Mem0 then skips lemmas/entities)."""
COPIED = "bulk rows copied in that layout"
ISO = """to_char(stored_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""


def package_versions() -> dict[str, str | None]:
    """Installed versions of the peers' packages (None when absent)."""
    return versions(PEER_PACKAGES)


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
    """One system under test: its two timed calls, how it was set up and how it is filled."""

    name: str
    search: Callable[[str], Awaitable[int]]
    """With the query embedding: the text in, the number of results out."""
    search_pre: Callable[[str, list[float]], Awaitable[int]]
    """Pre-embedded: the text and its vector in (each peer takes what its API takes)."""
    settings: dict[str, Any] = field(default_factory=dict)
    probe: Callable[[], Awaitable[None]] | None = None
    """Writes one memory of `PROBE_USER` through the peer's own API (`check_layout`)."""
    tables: tuple[str, ...] = ()
    fills: tuple[str, ...] = ()
    """The statements that copy our rows into ``tables``, in the peer's own layout."""
    layout_sql: str = ""
    """One row of a user (``%s``) as the layout to compare; ``clean_sql`` deletes the user's."""
    clean_sql: str = ""


@dataclass
class Where:
    """What every peer is set up with."""

    stack: contextlib.AsyncExitStack
    url: str
    user_id: str
    k: int
    embeddings: Embeddings
    lookup: LookupEmbeddings
    model_path: str
    home: Path


def vector_literal(v: list[float]) -> str:
    """The text form pgvector parses."""
    return "[" + ",".join(map(str, v)) + "]"


async def floor_peer(
    stack: contextlib.AsyncExitStack, database_url: str, model: Any, user_id: str, k: int,
    session_options: list[str],
) -> Peer:  # fmt: skip
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
        return await knn(text, model.encode(text, normalize_embeddings=True).tolist())

    return Peer("floor", search, knn, {
        "embedding": "SentenceTransformer(all-MiniLM-L6-v2).encode(query), same process",
        "sql": sql,
        "session": session_options,
        "driver": "psycopg AsyncConnection, autocommit (prepared after 5 runs)",
    })  # fmt: skip


async def mem0_peer(w: Where) -> Peer:
    """Mem0 OSS `Memory` on pgvector with the local MiniLM (huggingface embedder).

    The LLM is configured (Mem0 requires one) but never called: memories are added with
    ``infer=False``. Telemetry is off and Mem0's home (its SQLite history) is ``home``.
    """
    os.environ["MEM0_TELEMETRY"] = "False"  # read when mem0 is imported
    os.environ.setdefault("MEM0_DIR", str(w.home))
    from mem0 import Memory

    def memory(embedder: dict[str, Any], history: str) -> Memory:
        store = {"connection_string": w.url, "collection_name": MEM0_TABLE,
                 "embedding_model_dims": DIM, "hnsw": True}  # fmt: skip
        return Memory.from_config({
            "vector_store": {"provider": "pgvector", "config": store},
            "embedder": embedder,
            "llm": {"provider": "openai", "config": {"api_key": "unused-with-infer-false"}},
            "history_db_path": str(w.home / history),
        })  # fmt: skip

    hf = {"model": w.model_path, "embedding_dims": DIM}
    real = memory({"provider": "huggingface", "config": hf}, "history.db")
    pre = memory({"provider": "langchain", "config": {"model": w.lookup}}, "history-pre.db")
    for m in (real, pre):  # closed before the run's database is dropped
        w.stack.callback(m.vector_store.connection_pool.close)
        w.stack.callback(m.close)
    real.vector_store.create_col()  # its own DDL: table, HNSW and full-text indexes
    filters = {"user_id": w.user_id}

    async def search(text: str) -> int:
        return len(real.search(text, top_k=w.k, filters=filters)["results"])

    async def search_pre(text: str, _vec: list[float]) -> int:
        return len(pre.search(text, top_k=w.k, filters=filters)["results"])

    async def probe() -> None:
        real.add([{"role": "user", "content": "layout probe"}], user_id=PROBE_USER, infer=False)

    fill = f"""
INSERT INTO "{MEM0_TABLE}" (id, vector, payload)
SELECT langchain_id, embedding, jsonb_build_object(
    'user_id', user_id, 'role', 'user', 'data', content, 'hash', md5(content),
    'created_at', {ISO}, 'updated_at', {ISO}, 'text_lemmatized', content)
FROM "{TABLE}" ON CONFLICT (id) DO NOTHING"""
    settings = {
        "api": "Memory.search(query, top_k=k, filters={'user_id': ...}) (sync)",
        "vector_store": {"provider": "pgvector", "hnsw": True, "table": MEM0_TABLE},
        "embedder": {"provider": "huggingface", "model": "all-MiniLM-L6-v2 (local path)"},
        "pre_embedded": "a second Memory whose embedder (provider 'langchain') looks the "
        "query vector up",
        "writes": f"add(messages, user_id=..., infer=False); {COPIED}",
        "notes": "search = semantic top max(4k, 60) + keyword (full-text) search + scoring; "
        "without spaCy (mem0ai's nlp extra) no lemmas and no entity boosts; "
        "MEM0_TELEMETRY=False",
    }
    who = f"FROM \"{MEM0_TABLE}\" WHERE payload->>'user_id' = %s"
    return Peer("Mem0", search, search_pre, settings, probe, (MEM0_TABLE,), (fill,),
                f"SELECT payload AS row {who} LIMIT 1", f"DELETE {who}")  # fmt: skip


async def langgraph_peer(w: Where) -> Peer:
    """`AsyncPostgresStore` with an HNSW cosine index on the ``text`` field."""
    from langgraph.store.postgres import AsyncPostgresStore

    def index(embed: Embeddings) -> dict[str, Any]:
        return {"dims": DIM, "embed": embed, "fields": ["text"], "distance_type": "cosine",
                "ann_index_config": {"kind": "hnsw", "vector_type": "vector"}}  # fmt: skip

    async def store(embed: Embeddings) -> AsyncPostgresStore:
        return await w.stack.enter_async_context(
            AsyncPostgresStore.from_conn_string(w.url, index=index(embed))
        )

    real = await store(w.embeddings)
    await real.setup()
    pre = await store(w.lookup)
    namespace = (LG_NAMESPACE, w.user_id)

    async def search(text: str) -> int:
        return len(await real.asearch(namespace, query=text, limit=w.k))

    async def search_pre(text: str, _vec: list[float]) -> int:
        return len(await pre.asearch(namespace, query=text, limit=w.k))

    async def probe() -> None:
        await real.aput((LG_NAMESPACE, PROBE_USER), "probe", {"text": "layout probe"})

    prefix = f"'{LG_NAMESPACE}.' || user_id, langchain_id::text"
    fills = (
        f"""INSERT INTO store (prefix, key, value, created_at, updated_at)
SELECT {prefix}, jsonb_build_object('text', content), stored_at, stored_at
FROM "{TABLE}" ON CONFLICT DO NOTHING""",
        f"""INSERT INTO store_vectors (prefix, key, field_name, embedding, created_at, updated_at)
SELECT {prefix}, 'text', embedding, stored_at, stored_at
FROM "{TABLE}" ON CONFLICT DO NOTHING""",
    )
    settings = {
        "api": "asearch(('memories', user_id), query=..., limit=k)",
        "index": {k_: v for k_, v in index(w.embeddings).items() if k_ != "embed"},
        "embed": "langchain_huggingface.HuggingFaceEmbeddings(all-MiniLM-L6-v2, normalized)",
        "pre_embedded": "a second store on the same tables whose embed looks the vector up",
        "writes": f"aput(namespace, key, {{'text': ...}}); {COPIED}",
    }
    layout = ("SELECT jsonb_build_object('value', s.value, 'field', v.field_name) AS row "
              "FROM store s JOIN store_vectors v USING (prefix, key) "
              f"WHERE s.prefix = '{LG_NAMESPACE}.' || %s LIMIT 1")  # fmt: skip
    clean = f"DELETE FROM store WHERE prefix = '{LG_NAMESPACE}.' || %s"
    return Peer("LangGraph AsyncPostgresStore", search, search_pre, settings, probe,
                ("store", "store_vectors"), fills, layout, clean)  # fmt: skip


async def pgvectorstore_peer(w: Where) -> Peer:
    """`PGVectorStore` on its own table with a ``user_id`` column and an HNSW index."""
    from langchain_postgres import Column, PGEngine, PGVectorStore
    from langchain_postgres.v2.indexes import HNSWIndex

    engine = PGEngine.from_connection_string(sqlalchemy_url(w.url))
    w.stack.push_async_callback(engine.close)
    await engine.ainit_vectorstore_table(
        PGVS_TABLE, DIM, metadata_columns=[Column("user_id", "TEXT")], overwrite_existing=True
    )
    store = await PGVectorStore.create(
        engine, table_name=PGVS_TABLE, embedding_service=w.embeddings, metadata_columns=["user_id"]
    )
    await store.aapply_vector_index(HNSWIndex())
    filt = {"user_id": w.user_id}

    async def search(text: str) -> int:
        return len(await store.asimilarity_search(text, k=w.k, filter=filt))

    async def search_pre(_text: str, vec: list[float]) -> int:
        return len(await store.asimilarity_search_by_vector(vec, k=w.k, filter=filt))

    async def probe() -> None:
        await store.aadd_texts(["layout probe"], metadatas=[{"user_id": PROBE_USER}])

    fill = f"""
INSERT INTO "{PGVS_TABLE}" (langchain_id, content, embedding, user_id, langchain_metadata)
SELECT langchain_id, content, embedding, user_id, '{{}}'::json
FROM "{TABLE}" ON CONFLICT DO NOTHING"""
    settings = {
        "api": "asimilarity_search(query, k=k, filter={'user_id': ...}); pre-embedded: "
        "asimilarity_search_by_vector",
        "table": "ainit_vectorstore_table(metadata_columns=[Column('user_id', 'TEXT')])",
        "index": "aapply_vector_index(HNSWIndex()) (cosine, default m/ef_construction)",
        "embedding_service": "langchain_huggingface.HuggingFaceEmbeddings(all-MiniLM-L6-v2)",
        "writes": f"aadd_texts(texts, metadatas=[{{'user_id': ...}}]); {COPIED}",
    }
    layout = ("SELECT jsonb_build_object('metadata', langchain_metadata, 'user_id', user_id, "
              "'has_embedding', embedding IS NOT NULL) AS row "
              f'FROM "{PGVS_TABLE}" WHERE user_id = %s LIMIT 1')  # fmt: skip
    clean = f'DELETE FROM "{PGVS_TABLE}" WHERE user_id = %s'
    return Peer("langchain-postgres PGVectorStore", search, search_pre, settings, probe,
                (PGVS_TABLE,), (fill,), layout, clean)  # fmt: skip


PEERS = {"mem0": mem0_peer, "langgraph": langgraph_peer, "pgvectorstore": pgvectorstore_peer}


async def open_peers(which: tuple[str, ...], where: Where) -> tuple[list[Peer], dict[str, str]]:
    """The peers whose packages import; the others with the reason."""
    peers, missing = [], {}
    for name in which:
        if name not in PEERS:
            raise ValueError(f"unknown peer {name!r}; known: {PEER_NAMES}")
        try:
            peers.append(await PEERS[name](where))
        except ImportError as exc:
            missing[name] = f"not installed ({exc}); install the 'peers' extra"
    return peers, missing


async def fill(database_url: str, peers: list[Peer]) -> dict:
    """Copy every row of our table into the peers' tables (new rows only), timed.

    The peers' HNSW indexes are dropped first and recreated from their own definitions.
    """
    tables = [t for p in peers for t in p.tables]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        cur = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) "
            "AND indexdef ILIKE '%%USING hnsw%%'",
            (tables,),
        )
        indexes = await cur.fetchall()
        for name, _ in indexes:
            await conn.execute(f'DROP INDEX "{name}"')
        t0 = time.perf_counter()
        for sql in (s for p in peers for s in p.fills):
            await conn.execute(sql)
        t1 = time.perf_counter()
        for _, definition in indexes:
            await conn.execute(definition)
        t2 = time.perf_counter()
        for table in tables:
            await conn.execute(f'VACUUM (ANALYZE) "{table}"')
    return {"copy_s": round(t1 - t0, 3), "hnsw_build_s": round(t2 - t1, 3),
            "hnsw_indexes": [d for _, d in indexes]}  # fmt: skip


def _shape(row: Any) -> Any:
    """The keys (recursively) and the non-text values of a row: what a layout is."""
    if isinstance(row, dict):
        return {k: _shape(v) for k, v in sorted(row.items())}
    return row if isinstance(row, bool | int) or row is None else type(row).__name__


async def check_layout(database_url: str, peers: list[Peer], user_id: str) -> dict[str, Any]:
    """Write one memory through each peer's API; compare its row with a copied one."""
    out: dict[str, Any] = {}
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for peer in (p for p in peers if p.probe and p.layout_sql):
            await peer.probe()
            rows = []
            for who in (PROBE_USER, user_id):
                found = await (await conn.execute(peer.layout_sql, (who,))).fetchone()
                rows.append(_shape(found[0]) if found else None)
            out[peer.name] = {"same": rows[0] == rows[1], "api_write": rows[0], "copied": rows[1]}
        for peer in (p for p in peers if p.clean_sql):
            await conn.execute(peer.clean_sql, (PROBE_USER,))
    return out
