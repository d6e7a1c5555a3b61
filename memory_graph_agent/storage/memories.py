"""Long-term memories (summaries and reflections) in Postgres + pgvector.

`langchain_postgres.PGVectorStore`, one table per embedding dimension (``memories_384``) with
real metadata columns, so every search filters ``user_id`` in SQL; the rest is plain SQL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_postgres import PGVectorStore
from langchain_postgres.v2.indexes import DistanceStrategy, QueryOptions
from sqlalchemy.exc import ProgrammingError

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.storage import halfvec
from memory_graph_agent.storage.memory_lifecycle import MemoryLifecycle
from memory_graph_agent.storage.memory_rows import (
    _META_NAMES,
    _SINCE_REFLECTION,
    ACTIVE,
    LIFECYCLE_COLUMNS,
    METADATA_COLUMNS,
    Kind,
    Memory,
    VectorLiteral,
    _from_metadata,
    _vector_literal,
    memory_id,
)
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Database, Statement

SCHEMA_VERSION = 3
"""Raise it with a change to the DDL of `MemoryStore.open`: `Database.migrate` runs it again.
3: ``halfvec`` vectors (`halfvec.to_halfvec`)."""
FILLFACTOR = 75
"""Percent of a heap page that inserts fill, leaving room to update a row in place.

A row is 0.9 to 2 KB (the 776-byte ``halfvec`` is kept inline; a longer text is TOASTed
at ~2 KB), so a full page holds 4 to 8. Without a quarter kept free, recording a recall
(`MemoryStore.touch`) finds no room on the row's page and writes the new version
elsewhere, with a new entry in every index, the HNSW one included; with it the update
is heap-only (HOT) and the indexes are left alone.
"""


@dataclass
class _IterativeHNSW(QueryOptions):
    """HNSW options with pgvector >= 0.8 iterative scans, lest other users' rows crowd out k."""

    ef_search: int = 100
    iterative: bool = True

    def to_parameter(self) -> list[str]:
        params = [f"hnsw.ef_search = {self.ef_search}"]
        if self.iterative:
            params.append("hnsw.iterative_scan = relaxed_order")
        return params

    def to_string(self) -> str:
        return ", ".join(self.to_parameter())


@guarded("postgres")
class MemoryStore(MemoryLifecycle):
    """Summaries and reflections of every user, always queried per user."""

    def __init__(
        self, db: Database, vectors: PGVectorStore, table: str, query_options: list[str]
    ) -> None:
        self.db = db
        self.vectors = vectors
        self.table = table
        self.query_options = query_options

    @classmethod
    async def open(cls, db: Database, embeddings: Embeddings, dim: int) -> MemoryStore:
        """Create the table and indexes if needed, then return the store."""
        table = f"memories_{dim}"
        exists = await db.query(f"SELECT to_regclass('public.{table}') IS NOT NULL AS ok")
        if not exists[0]["ok"]:
            try:
                await db.vectors.ainit_vectorstore_table(
                    table_name=table, vector_size=dim, metadata_columns=list(METADATA_COLUMNS)
                )
            except ProgrammingError as exc:  # another process created it first
                if "already exists" not in str(exc):
                    raise
        await db.migrate(
            table,
            SCHEMA_VERSION,
            # `PGVectorStore` creates the column as ``vector``: half the bytes as ``halfvec``
            halfvec.to_halfvec(table, dim),
            # Keep the vectors in the row: out-of-line (TOAST) storage makes every
            # distance computation fetch a second tuple and steers the planner off HNSW.
            f'ALTER TABLE "{table}" ALTER COLUMN embedding SET STORAGE PLAIN',
            # Rows written from now on; a page filled before keeps its rows until a touch
            # moves one of them out (once), which leaves it the room.
            f'ALTER TABLE "{table}" SET (fillfactor = {FILLFACTOR})',
            f'ALTER TABLE "{table}" ADD COLUMN IF NOT EXISTS stored_at TIMESTAMPTZ '
            "NOT NULL DEFAULT clock_timestamp()",
            *(
                f'ALTER TABLE "{table}" ADD COLUMN IF NOT EXISTS {name} {decl}'
                for name, decl in LIFECYCLE_COLUMNS
            ),
            f'CREATE INDEX IF NOT EXISTS "{table}_user_kind" '
            f'ON "{table}" (user_id, kind, stored_at)',
            halfvec.hnsw_index(table),
            force=not exists[0]["ok"],  # a table created just now (again) needs its columns
        )
        query_options = _IterativeHNSW(iterative=await db.iterative_scans())
        vectors = await PGVectorStore.create(
            db.vectors,
            embedding_service=embeddings,
            table_name=table,
            metadata_columns=_META_NAMES,
            distance_strategy=DistanceStrategy.COSINE_DISTANCE,
            index_query_options=query_options,
        )
        return cls(db, vectors, table, query_options.to_parameter())

    async def add(self, memory: Memory, vector: list[float] | None = None) -> str:
        """Upsert a memory under its deterministic id; returns the id.

        A replayed write keeps the stored row's creation time, access statistics, pin,
        supersession, highest importance and latest expiry: a batch re-claimed after a lost
        acknowledgement must not revive a memory that was merged or compacted meanwhile.
        """
        existing = await self.db.query(
            "SELECT created_at, last_accessed_at, access_count, pinned, status, "
            f'superseded_by, importance, expires_at FROM "{self.table}" '
            "WHERE langchain_id = CAST(:id AS uuid) AND user_id = :user_id",
            {"id": memory.id, "user_id": memory.user_id},
        )
        if existing:
            row = existing[0]
            memory.created_at = row["created_at"] or memory.created_at
            memory.last_accessed_at = row["last_accessed_at"]
            memory.access_count = int(row["access_count"] or 0)
            memory.importance = max(memory.importance, float(row["importance"] or 0.0))
            if row["status"] == "superseded":
                memory.status, memory.superseded_by = "superseded", row["superseded_by"]
            if row["expires_at"] is None or (
                memory.expires_at is not None and row["expires_at"] > memory.expires_at
            ):
                memory.expires_at = row["expires_at"]
            if row["pinned"]:  # a pin (the user's choice) survives a replayed write
                memory.pinned, memory.expires_at = True, None
        if vector is None:
            vector = (await self.vectors.embeddings.aembed_documents([memory.text]))[0]
        metadata = {name: getattr(memory, name) for name in _META_NAMES}
        metadata.update(importance=float(memory.importance), source_ids=list(memory.source_ids))
        await self.vectors.aadd_embeddings(
            [memory.text], [vector], metadatas=[metadata], ids=[memory.id]
        )
        return memory.id

    async def search(
        self, user_id: str, vector: list[float], k: int, min_similarity: float | None = None
    ) -> list[Memory]:
        """Top-k of this user's active memories by cosine similarity (recall's search)."""
        return await self.similar(user_id, vector, k, min_similarity)

    async def similar(
        self,
        user_id: str,
        vector: list[float],
        k: int,
        min_similarity: float | None,
        kind: Kind | None = None,
        exclude_ids: list[str] | None = None,
    ) -> list[Memory]:
        """Consolidation candidates: like `search`, of one ``kind``, without ``exclude_ids``."""
        rows = await self.db.run(*self.search_statements(user_id, vector, k, kind, exclude_ids))
        return self.found(rows, min_similarity)

    def search_statements(
        self,
        user_id: str,
        vector: list[float] | VectorLiteral,
        k: int,
        kind: Kind | None = None,
        exclude_ids: list[str] | None = None,
    ) -> list[Statement]:
        """The HNSW options and the kNN query of `similar`, for `Database.run` or a pipeline."""
        # Own SQL, not the vector store's search: that one names its filter parameter
        # randomly, so Postgres would re-plan it on every call.
        validate_id(user_id, "user_id")
        where = f"user_id = :user_id AND {ACTIVE}"
        if kind:
            where += " AND kind = :kind"
        if exclude_ids:
            where += " AND NOT langchain_id = ANY(CAST(:exclude AS uuid[]))"
        return [
            *(f"SET LOCAL {p}" for p in self.query_options),
            (
                f"SELECT langchain_id, content, {', '.join(_META_NAMES)}, "
                f"{halfvec.DISTANCE} AS distance "
                f'FROM "{self.table}" WHERE {where} '
                f"ORDER BY {halfvec.DISTANCE} LIMIT :k",
                {
                    "user_id": user_id,
                    "q": _vector_literal(vector),
                    "k": k,
                    "kind": kind,
                    "exclude": list(exclude_ids or []),
                },
            ),
        ]

    @staticmethod
    def found(rows: list[dict[str, Any]], min_similarity: float | None = None) -> list[Memory]:
        """The memories of `search_statements`' rows, those under ``min_similarity`` left out."""
        scored = [(1.0 - float(row["distance"]), row) for row in rows]
        return [
            _from_metadata(str(row["langchain_id"]), row["content"], row, similarity)
            for similarity, row in scored
            if min_similarity is None or not similarity < min_similarity  # NaN is kept
        ]

    async def touch(self, user_id: str, ids: list[str]) -> None:
        """Record that these memories were recalled (best effort: no wait for the WAL flush).

        Each transaction updates at most one of the rows on a heap page: a page has room
        (`FILLFACTOR`) for one more version, and the old version of a row updated by the
        same transaction cannot be pruned to make room for a second. Rows sharing a page
        (memories formed together, often recalled together) are updated by the next
        transaction, which prunes the first one's old version: the updates are heap-only
        (HOT), unless a transaction older than that version is still open somewhere in the
        cluster, which keeps Postgres from pruning it.
        """
        pending = list(dict.fromkeys(ids))
        while pending:
            rows = await self.db.run(
                "SET LOCAL synchronous_commit = off",
                (
                    f'UPDATE "{self.table}" SET last_accessed_at = now(), '
                    "access_count = COALESCE(access_count, 0) + 1 "
                    "WHERE user_id = :user_id AND ctid = ANY(ARRAY("
                    "SELECT DISTINCT ON ((ctid::text::point)[0]) ctid "
                    f'FROM "{self.table}" WHERE user_id = :user_id '
                    "AND langchain_id = ANY(CAST(:ids AS uuid[])))) RETURNING langchain_id",
                    {"user_id": user_id, "ids": pending},
                ),
            )
            done = {uuid.UUID(str(r["langchain_id"])) for r in rows}
            if not done:  # the rest are gone, another user's, or moved by a concurrent write
                return
            # compared as UUIDs: Postgres read every id already, in whatever spelling
            pending = [i for i in pending if uuid.UUID(i) not in done]

    async def reflection_progress(self, user_id: str) -> tuple[int, float]:
        """Count and summed importance of the active summaries since the latest reflection."""
        rows = await self.db.query(
            "SELECT count(*) AS n, COALESCE(sum(importance), 0) AS total "
            f'FROM "{self.table}" s WHERE {self._since_reflection()}',
            {"user_id": validate_id(user_id, "user_id")},
        )
        return int(rows[0]["n"]), float(rows[0]["total"])

    async def list(
        self, user_id: str, kind: Kind | None = None, limit: int = 200, active_only: bool = False
    ) -> list[Memory]:
        """The user's memories, newest first: of every status unless ``active_only``."""
        validate_id(user_id, "user_id")
        where = "user_id = :user_id" + (" AND kind = :kind" if kind else "")
        if active_only:
            where += f" AND {ACTIVE}"
        return await self._rows(
            f"WHERE {where} ORDER BY stored_at DESC LIMIT :limit",
            {"user_id": user_id, "kind": kind, "limit": limit},
        )

    async def thread_summaries(self, user_id: str, thread_id: str, limit: int = 20) -> list[Memory]:
        """The newest ``limit`` summaries of one thread (any status), oldest first."""
        params = {"user_id": validate_id(user_id, "user_id"), "kind": MemoryKind.SUMMARY}
        params |= {"thread_id": validate_id(thread_id, "thread_id"), "limit": limit}
        rows = await self._rows(
            "WHERE user_id = :user_id AND thread_id = :thread_id AND kind = :kind "
            "ORDER BY stored_at DESC LIMIT :limit",
            params,
        )
        return rows[::-1]

    async def get(self, user_id: str, ids: list[str]) -> list[Memory]:
        """The user's memories with these ids (any status), in no particular order."""
        validate_id(user_id, "user_id")
        if not ids:
            return []
        return await self._rows(
            "WHERE user_id = :user_id AND langchain_id = ANY(CAST(:ids AS uuid[]))",
            {"user_id": user_id, "ids": ids},
        )

    async def summaries_since_reflection(self, user_id: str) -> list[Memory]:
        """Active summaries stored after the user's latest reflection, oldest first."""
        validate_id(user_id, "user_id")
        return await self._rows(
            f"s WHERE {self._since_reflection()} ORDER BY s.stored_at", {"user_id": user_id}
        )

    def _since_reflection(self) -> str:
        return _SINCE_REFLECTION.format(table=f'"{self.table}"')

    async def _rows(self, clauses: str, params: dict[str, Any]) -> list[Memory]:
        rows = await self.db.query(
            f'SELECT langchain_id, content, {", ".join(_META_NAMES)} FROM "{self.table}" {clauses}',
            params,
        )
        return [_from_metadata(str(r["langchain_id"]), r["content"], r, None) for r in rows]

    async def count(self, user_id: str) -> dict[str, int]:
        """Number of memories of the user per kind."""
        rows = await self.db.query(
            f'SELECT kind, count(*) AS n FROM "{self.table}" WHERE user_id = :user_id '
            "GROUP BY kind",
            {"user_id": validate_id(user_id, "user_id")},
        )
        return {r["kind"]: int(r["n"]) for r in rows}

    async def hot(self, user_id: str, limit: int) -> list[Memory]:
        """The user's ``limit`` hottest active memories: pinned, most important, most recent."""
        validate_id(user_id, "user_id")
        return await self._rows(
            f"WHERE user_id = :user_id AND {ACTIVE} ORDER BY pinned DESC, importance DESC, "
            "COALESCE(last_accessed_at, created_at) DESC, stored_at DESC LIMIT :limit",
            {"user_id": user_id, "limit": max(0, int(limit))},
        )


__all__ = ["ACTIVE", "Kind", "Memory", "MemoryStore", "memory_id"]
