"""What memory decided, item by item: the ``memory_decisions`` table in Postgres.

One row per ``(user_id, item_kind, item_id)``, so "why is this memory gone?" has an answer;
a replayed run keeps the first decision, which is what makes consolidation idempotent.
Maintenance deletes the rows older than ``decision_retention_days`` (`DecisionLog.prune`),
except those of the threads a retry may still read them for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Database

ItemKind = MemoryKind | Literal["maintenance"]
"""What a decision is about: a kind of memory, or a maintenance run."""
TABLE = "memory_decisions"
SCHEMA_VERSION = 1  # raise it with a change to the DDL of `DecisionLog.open`


@dataclass
class Decision:
    """One recorded decision about one item."""

    user_id: str
    item_kind: str
    item_id: str
    action: str
    target_id: str | None = None
    thread_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    decided_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly view without the user (for state, Studio and the CLI)."""
        view = {k: v for k, v in vars(self).items() if k != "user_id"}
        return {**view, "decided_at": self.decided_at.isoformat()}


@guarded("postgres")
class DecisionLog:
    """Append and query the decisions of every user, always per user."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    async def open(cls, db: Database) -> DecisionLog:
        """Create the table and its indexes if needed."""
        ddl = (
            f"CREATE TABLE IF NOT EXISTS {TABLE} ("
            "id BIGSERIAL PRIMARY KEY, user_id TEXT NOT NULL, thread_id TEXT, "
            "item_kind TEXT NOT NULL, item_id TEXT NOT NULL, action TEXT NOT NULL, "
            "target_id TEXT, detail JSONB NOT NULL DEFAULT '{}'::jsonb, "
            "decided_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(), "
            "UNIQUE (user_id, item_kind, item_id))",
            f"CREATE INDEX IF NOT EXISTS {TABLE}_user_time ON {TABLE} (user_id, decided_at)",
        )
        await db.migrate(TABLE, SCHEMA_VERSION, *ddl)
        return cls(db)

    async def record(self, decision: Decision) -> tuple[Decision, bool]:
        """Store a decision unless the item has one; return the one in force and if it is new."""
        validate_id(decision.user_id, "user_id")
        detail = json.dumps(decision.detail, ensure_ascii=False, default=str)
        rows = await self.db.query(
            f"WITH ins AS (INSERT INTO {TABLE} (user_id, thread_id, item_kind, item_id, "
            "action, target_id, detail, decided_at) VALUES (:user_id, :thread_id, "
            ":item_kind, :item_id, :action, :target_id, CAST(:detail AS jsonb), "
            ":decided_at) ON CONFLICT (user_id, item_kind, item_id) DO NOTHING "
            "RETURNING *) "
            "SELECT *, true AS inserted FROM ins UNION ALL "
            f"SELECT *, false AS inserted FROM {TABLE} WHERE user_id = :user_id "
            "AND item_kind = :item_kind AND item_id = :item_id "
            "AND NOT EXISTS (SELECT 1 FROM ins)",
            {**vars(decision), "detail": detail},
        )
        if not rows:  # a concurrent writer committed it after this statement's snapshot
            existing = await self.get(decision.user_id, decision.item_kind, decision.item_id)
            assert existing is not None
            return existing, False
        return _from_row(rows[0]), bool(rows[0]["inserted"])

    async def get(self, user_id: str, item_kind: str, item_id: str) -> Decision | None:
        """The decision recorded for one item, if any."""
        validate_id(user_id, "user_id")
        rows = await self.db.query(
            f"SELECT * FROM {TABLE} WHERE user_id = :user_id AND item_kind = :item_kind "
            "AND item_id = :item_id",
            {"user_id": user_id, "item_kind": item_kind, "item_id": item_id},
        )
        return _from_row(rows[0]) if rows else None

    async def list(
        self,
        user_id: str,
        limit: int = 50,
        action: str | None = None,
        item_kind: ItemKind | None = None,
    ) -> list[Decision]:
        """The user's decisions, newest first, optionally of one action or item kind."""
        validate_id(user_id, "user_id")
        where = "user_id = :user_id"
        if action:
            where += " AND action = :action"
        if item_kind:
            where += " AND item_kind = :item_kind"
        rows = await self.db.query(
            f"SELECT * FROM {TABLE} WHERE {where} ORDER BY decided_at DESC, id DESC LIMIT :limit",
            {"user_id": user_id, "action": action, "item_kind": item_kind, "limit": limit},
        )
        return [_from_row(r) for r in rows]

    async def users(self) -> list[str]:
        """Every user with decisions (for maintenance of all users)."""
        rows = await self.db.query(f"SELECT DISTINCT user_id FROM {TABLE} ORDER BY 1")
        return [r["user_id"] for r in rows]

    async def threads_before(self, user_id: str, before: datetime) -> list[str]:
        """The threads of the user's decisions made before ``before``."""
        validate_id(user_id, "user_id")
        rows = await self.db.query(
            f"SELECT DISTINCT thread_id FROM {TABLE} WHERE user_id = :user_id "
            "AND decided_at < :before AND thread_id IS NOT NULL ORDER BY 1",
            {"user_id": user_id, "before": before},
        )
        return [r["thread_id"] for r in rows]

    async def prune(
        self, user_id: str, before: datetime, keep_threads: Sequence[str], dry_run: bool = False
    ) -> int:
        """Delete the user's decisions made before ``before``, except ``keep_threads``'.

        Returns how many went (on a dry run: would go; nothing is deleted).
        """
        validate_id(user_id, "user_id")
        where = (
            "WHERE user_id = :user_id AND decided_at < :before AND (thread_id IS NULL "
            "OR NOT thread_id = ANY(CAST(:keep AS text[])))"
        )
        sql = (
            f"SELECT count(*) AS n FROM {TABLE} {where}"
            if dry_run
            else f"WITH gone AS (DELETE FROM {TABLE} {where} RETURNING 1) "
            "SELECT count(*) AS n FROM gone"
        )
        rows = await self.db.query(
            sql, {"user_id": user_id, "before": before, "keep": list(keep_threads)}
        )
        return int(rows[0]["n"])


def _from_row(row: dict[str, Any]) -> Decision:
    detail = row.get("detail") or {}
    if isinstance(detail, str):
        detail = json.loads(detail)
    return Decision(**{f.name: row.get(f.name) for f in fields(Decision)} | {"detail": detail})
