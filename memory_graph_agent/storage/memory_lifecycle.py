"""The lifecycle of stored memories (a `MemoryStore` mixin): supersede, pin, expire, evict."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.storage.memory_rows import ACTIVE, Memory
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Database


@guarded("postgres")
class MemoryLifecycle:
    """Writes that change a memory's status, importance, pin or expiry, per user."""

    db: Database
    table: str
    _rows: Callable[[str, dict[str, Any]], Awaitable[list[Memory]]]  # MemoryStore's

    async def supersede(self, user_id: str, ids: list[str], by_id: str) -> int:
        """Mark unpinned memories superseded by ``by_id`` (kept as provenance); count them."""
        validate_id(user_id, "user_id")
        ids = [i for i in ids if i != by_id]
        if not ids:
            return 0
        rows = await self.db.query(
            f"UPDATE \"{self.table}\" SET status = 'superseded', superseded_by = :by "
            "WHERE user_id = :user_id AND langchain_id = ANY(CAST(:ids AS uuid[])) "
            "AND NOT pinned RETURNING langchain_id",
            {"user_id": user_id, "ids": ids, "by": by_id},
        )
        return len(rows)

    async def strengthen(
        self, user_id: str, memory_id: str, bump: float, expires_at: datetime | None = None
    ) -> float | None:
        """Raise a memory's importance by ``bump`` (max 1), count an access; None if missing."""
        validate_id(user_id, "user_id")
        rows = await self.db.query(
            f'UPDATE "{self.table}" SET importance = LEAST(1.0, importance + :bump), '
            "access_count = COALESCE(access_count, 0) + 1, last_accessed_at = now(), "
            "expires_at = CASE WHEN pinned THEN NULL "
            "ELSE COALESCE(CAST(:expires AS timestamptz), expires_at) END "
            "WHERE user_id = :user_id AND langchain_id = CAST(:id AS uuid) RETURNING importance",
            {"user_id": user_id, "id": memory_id, "bump": float(bump), "expires": expires_at},
        )
        return float(rows[0]["importance"]) if rows else None

    async def extend_expiry(self, user_id: str, memory_id: str, until: datetime | None) -> bool:
        """Make a memory live at least ``until`` (``None``: never expire); True if found."""
        validate_id(user_id, "user_id")
        rows = await self.db.query(
            f'UPDATE "{self.table}" SET expires_at = CASE '
            "WHEN expires_at IS NULL OR CAST(:forever AS boolean) THEN NULL "
            "ELSE GREATEST(expires_at, CAST(:until AS timestamptz)) END "
            "WHERE user_id = :user_id AND langchain_id = CAST(:id AS uuid) "
            "RETURNING langchain_id",
            {"user_id": user_id, "id": memory_id, "forever": until is None, "until": until},
        )
        return bool(rows)

    async def set_pinned(
        self, user_id: str, memory_id: str, pinned: bool, expires_at: datetime | None
    ) -> bool:
        """Pin (never expires, never evicted) or unpin a memory; ``False`` if there is none."""
        validate_id(user_id, "user_id")
        expires = None if pinned else expires_at
        rows = await self.db.query(
            f'UPDATE "{self.table}" SET pinned = :pinned, expires_at = :expires '
            "WHERE user_id = :user_id AND langchain_id = CAST(:id AS uuid) "
            "RETURNING langchain_id",
            {"user_id": user_id, "id": memory_id, "pinned": pinned, "expires": expires},
        )
        return bool(rows)

    async def delete(self, user_id: str, ids: list[str]) -> int:
        """Delete these memories of the user; returns how many rows went."""
        validate_id(user_id, "user_id")
        if not ids:
            return 0
        rows = await self.db.query(
            f'DELETE FROM "{self.table}" WHERE user_id = :user_id '
            "AND langchain_id = ANY(CAST(:ids AS uuid[])) RETURNING langchain_id",
            {"user_id": user_id, "ids": ids},
        )
        return len(rows)

    async def users(self) -> list[str]:
        """Every user that has memories (for maintenance of all users)."""
        rows = await self.db.run(f'SELECT DISTINCT user_id FROM "{self.table}" ORDER BY 1')
        return [r["user_id"] for r in rows]

    async def expired(self, user_id: str) -> list[Memory]:
        """The user's memories whose expiry has passed (pinned ones never expire)."""
        validate_id(user_id, "user_id")
        return await self._rows(
            # superseded rows stay while what replaced them does (`orphaned`)
            "WHERE user_id = :user_id AND status = 'active' AND expires_at IS NOT NULL "
            "AND expires_at <= now() AND NOT pinned ORDER BY stored_at",
            {"user_id": user_id},
        )

    async def orphaned(self, user_id: str, gone: Sequence[str] = ()) -> list[Memory]:
        """Unpinned superseded memories whose successor is gone, or in ``gone``.

        A superseded row is the provenance of the memory that replaced it; once that one
        is deleted it is the provenance of nothing. Chains are followed: a row superseded
        by such an orphan is one too.
        """
        validate_id(user_id, "user_id")
        t = f'"{self.table}"'
        doomed = (
            f"WITH RECURSIVE doomed AS (SELECT o.langchain_id FROM {t} o "
            "WHERE o.user_id = :user_id AND o.status <> 'active' AND NOT o.pinned "
            "AND (o.superseded_by IS NULL OR o.superseded_by = ANY(CAST(:gone AS text[])) "
            f"OR NOT EXISTS (SELECT 1 FROM {t} k WHERE k.user_id = :user_id "
            "AND k.langchain_id::text = o.superseded_by)) "
            f"UNION SELECT o.langchain_id FROM {t} o JOIN doomed d "
            "ON o.superseded_by = d.langchain_id::text WHERE o.user_id = :user_id "
            "AND o.status <> 'active' AND NOT o.pinned) SELECT langchain_id FROM doomed"
        )
        return await self._rows(
            f"WHERE user_id = :user_id AND langchain_id IN ({doomed}) ORDER BY stored_at",
            {"user_id": user_id, "gone": list(gone)},
        )

    async def evictable(
        self, user_id: str, below_importance: float, older_than_days: float
    ) -> list[Memory]:
        """Unpinned memories below ``below_importance`` created over ``older_than_days`` ago."""
        validate_id(user_id, "user_id")
        return await self._rows(
            "WHERE user_id = :user_id AND status = 'active' AND importance < :below AND NOT pinned "
            "AND created_at < now() - make_interval(secs => :days * 86400) ORDER BY stored_at",
            {"user_id": user_id, "below": float(below_importance), "days": float(older_than_days)},
        )

    async def duplicate_pairs(
        self, user_id: str, min_similarity: float
    ) -> list[tuple[str, str, float]]:
        """Pairs of the user's active memories of one kind at least this similar (cosine)."""
        validate_id(user_id, "user_id")
        active = ACTIVE.replace("status", "{t}.status").replace("expires_at", "{t}.expires_at")
        rows = await self.db.query(
            "SELECT a.langchain_id AS a, b.langchain_id AS b, "
            "1 - (a.embedding <=> b.embedding) AS similarity "
            f'FROM "{self.table}" a JOIN "{self.table}" b '
            "ON b.user_id = a.user_id AND b.kind = a.kind AND a.langchain_id < b.langchain_id "
            f"WHERE a.user_id = :user_id AND {active.format(t='a')} AND {active.format(t='b')} "
            "AND (a.embedding <=> b.embedding) <= 1 - :sim",
            {"user_id": user_id, "sim": float(min_similarity)},
        )
        return [(str(r["a"]), str(r["b"]), float(r["similarity"])) for r in rows]
