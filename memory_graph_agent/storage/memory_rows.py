"""One stored memory (summary or reflection): the `Memory` record and its table columns."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langchain_postgres import Column

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.core.kinds import STORED, MemoryKind

Kind = MemoryKind
"""A stored memory's kind: one of `kinds.STORED` (its value is what the row holds)."""
_NAMESPACE = uuid.UUID("6f1c2d1e-8a4b-4c36-9a57-3b8f0e2d7c11")

METADATA_COLUMNS = [
    Column("user_id", "TEXT", nullable=False),
    Column("thread_id", "TEXT"),
    Column("kind", "TEXT", nullable=False),
    Column("importance", "DOUBLE PRECISION", nullable=False),
    Column("created_at", "TIMESTAMPTZ", nullable=False),
    Column("last_accessed_at", "TIMESTAMPTZ"),
    Column("access_count", "INTEGER"),
    Column("source_ids", "TEXT[]"),
]
LIFECYCLE_COLUMNS = [
    # Added by ALTER TABLE so tables created by earlier versions gain them too.
    ("status", "TEXT NOT NULL DEFAULT 'active'"),  # active | superseded
    ("superseded_by", "TEXT"),
    ("pinned", "BOOLEAN NOT NULL DEFAULT false"),
    ("expires_at", "TIMESTAMPTZ"),  # NULL: never expires
]
_META_NAMES = [c.name for c in METADATA_COLUMNS] + [name for name, _ in LIFECYCLE_COLUMNS]
ACTIVE = "status = 'active' AND (expires_at IS NULL OR expires_at > now())"
"""SQL predicate of memories that recall, reflection and listing by default consider."""
_SINCE_REFLECTION = (
    f"s.user_id = :user_id AND s.kind = '{MemoryKind.SUMMARY}' AND "
    + ACTIVE.replace("status", "s.status").replace("expires_at", "s.expires_at")
    + " AND s.stored_at > COALESCE("
    "(SELECT max(r.stored_at) FROM {table} r "
    f"WHERE r.user_id = :user_id AND r.kind = '{MemoryKind.REFLECTION}'), '-infinity')"
)


def memory_id(user_id: str, thread_id: str | None, kind: str, source_ids: list[str]) -> str:
    """Deterministic id: the same sources always map to the same row (idempotent retry)."""
    return str(uuid.uuid5(_NAMESPACE, "|".join([user_id, thread_id or "", kind, *source_ids])))


@dataclass
class Memory:
    """One stored memory with its provenance."""

    user_id: str
    kind: Kind
    text: str
    importance: float
    source_ids: list[str]
    thread_id: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    id: str = ""
    last_accessed_at: datetime | None = None
    access_count: int = 0
    similarity: float | None = None
    status: str = "active"
    superseded_by: str | None = None
    pinned: bool = False
    expires_at: datetime | None = None

    def __post_init__(self) -> None:
        validate_id(self.user_id, "user_id")
        if self.kind not in STORED:
            known = [k.value for k in STORED]
            raise ValueError(f"a stored memory's kind is one of {known}, got {self.kind!r}")
        self.kind = MemoryKind(self.kind).value  # the plain string: state holds no enum
        self.text = self.text.replace("\x00", "")  # Postgres text cannot hold NUL
        if not self.id:
            self.id = memory_id(self.user_id, self.thread_id, self.kind, self.source_ids)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view (for state, Studio and the CLI)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "importance": self.importance,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "thread_id": self.thread_id,
            "created_at": self.created_at.isoformat(),
            "access_count": self.access_count,
            "source_ids": list(self.source_ids),
            "status": self.status,
            "superseded_by": self.superseded_by,
            "pinned": self.pinned,
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
        }


def _from_metadata(mid: str | None, content: str, meta: Any, similarity: float | None) -> Memory:
    return Memory(
        id=str(mid),
        user_id=meta["user_id"],
        thread_id=meta.get("thread_id"),
        kind=meta["kind"],
        text=content,
        importance=float(meta.get("importance") or 0.0),
        created_at=meta.get("created_at") or datetime.now(UTC),
        last_accessed_at=meta.get("last_accessed_at"),
        access_count=int(meta.get("access_count") or 0),
        source_ids=list(meta.get("source_ids") or []),
        similarity=similarity,
        status=meta.get("status") or "active",
        superseded_by=meta.get("superseded_by"),
        pinned=bool(meta.get("pinned")),
        expires_at=meta.get("expires_at"),
    )


class VectorLiteral(str):
    """A vector already written as pgvector's text literal (one query, several searches)."""


def _vector_literal(vector: list[float] | VectorLiteral) -> str:
    if isinstance(vector, VectorLiteral):
        return vector
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def vector_literal(vector: list[float]) -> VectorLiteral:
    """``vector`` as the text literal every search statement sends, written once."""
    return VectorLiteral(_vector_literal(vector))
