"""The entity edges of the memory graph: ``(user, key) -> turn``, stored with the turn.

``<vector table>_entities`` has one row per indexed turn and key (`entities.entity_keys`),
written in the same transaction as the turn's vector (`EpisodeIndex.index`) and deleted
with it (``ON DELETE CASCADE`` from the turn's row, itself deleted with its episode, so a
forgotten user leaves no edge). Every read is per user: another user's turns are never
reached. `reach_statement` is recall's expansion: the user's turns that share the best
turns' rarer keys, in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_graph_agent.core.entities import entity_keys
from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Database, Statement

SCHEMA_VERSION = 1
"""Raise it with a change to `_schema`: `Database.migrate` runs it again."""
MAX_DF = 30
"""A key more of the user's turns have than this links too much to count (a speaker's
name, "work"): it is left out of the expansion. Bounds the rows each key reads."""
REACH_LIMIT = 60
"""Turns the expansion returns at most, those sharing the rarest keys first."""
BACKFILL_BATCH = 2000


def _schema(table: str, turns: str) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS "{table}" (
            user_id TEXT NOT NULL, entity TEXT NOT NULL,
            thread_id TEXT NOT NULL, message_id TEXT NOT NULL,
            PRIMARY KEY (user_id, entity, thread_id, message_id),
            FOREIGN KEY (user_id, thread_id, message_id)
                REFERENCES "{turns}" (user_id, thread_id, message_id) ON DELETE CASCADE
        )""",
        # the cascade from a deleted turn looks its edges up by turn
        f'CREATE INDEX IF NOT EXISTS "{table}_turn" ON "{table}" (user_id, thread_id, message_id)',
    ]


_REACH_SQL = (
    "WITH keys AS (SELECT DISTINCT k AS entity FROM unnest(CAST(:keys AS text[])) AS k), "
    "df AS MATERIALIZED ("
    '  SELECT k.entity, (SELECT count(*) FROM (SELECT 1 FROM "{table}" e '
    "    WHERE e.user_id = :user_id AND e.entity = k.entity LIMIT :cap + 1) AS c) AS df "
    "  FROM keys k), "
    "rare AS (SELECT entity, df FROM df WHERE df BETWEEN 2 AND :cap), "
    "reached AS ("
    "  SELECT e.thread_id, e.message_id, array_agg(r.entity) AS shared, "
    "  array_agg(r.df) AS dfs, sum(1.0 / r.df) AS weight "
    '  FROM rare r JOIN "{table}" e ON e.user_id = :user_id AND e.entity = r.entity '
    "  GROUP BY e.thread_id, e.message_id ORDER BY weight DESC, e.thread_id, e.message_id "
    "  LIMIT :limit) "
    "SELECT r.shared, r.dfs, v.thread_id, v.message_id, v.content, v.ts, "
    '  (SELECT n FROM "{turns}_corpus" c WHERE c.user_id = :user_id) AS n '
    'FROM reached r JOIN "{turns}" v ON v.user_id = :user_id '
    "AND v.thread_id = r.thread_id AND v.message_id = r.message_id ORDER BY r.weight DESC"
)
"""The user's turns with the seeds' keys that at most :cap turns have (2 or more)."""


@guarded("postgres")
class EntityLinks:
    """The ``(user, key) -> turn`` edges of the indexed turns in ``<turns>_entities``."""

    def __init__(self, db: Database, turns: str) -> None:
        self.db = db
        self.turns = turns
        self.table = f"{turns}_entities"

    async def migrate(self) -> None:
        """Create the edges' table; the first time, link the turns indexed before it."""
        if await self.db.migrate(self.table, SCHEMA_VERSION, *_schema(self.table, self.turns)):
            await self.backfill()

    def write_statements(
        self, user_id: str, thread_id: str, ids: Sequence[str], contents: Sequence[str]
    ) -> list[Statement]:
        """Replace the edges of these turns (``Speaker: text``) by their keys'.

        Run after the turns' upsert, in its transaction.
        """
        params = {"user_id": user_id, "thread_id": thread_id, "ids": list(ids)}
        pairs = [(m, k) for m, c in zip(ids, contents, strict=True) for k in entity_keys(c)]
        delete = (
            f'DELETE FROM "{self.table}" WHERE user_id = :user_id AND thread_id = :thread_id '
            "AND message_id = ANY(CAST(:ids AS text[]))",
            params,
        )
        if not pairs:
            return [delete]
        insert = (
            f'INSERT INTO "{self.table}" (user_id, entity, thread_id, message_id) '
            "SELECT DISTINCT :user_id, p.entity, :thread_id, p.id "
            "FROM unnest(CAST(:pair_ids AS text[]), CAST(:entities AS text[])) AS p(id, entity) "
            "ON CONFLICT DO NOTHING",
            {**params, "pair_ids": [m for m, _ in pairs], "entities": [k for _, k in pairs]},
        )
        return [delete, insert]

    async def backfill(self, user_id: str | None = None) -> int:
        """Link every indexed turn (of ``user_id``, or all) to its keys; count the turns."""
        after: tuple[str, str, str] = ("", "", "")
        where = "AND user_id = :user_id " if user_id else ""
        total = 0
        while True:
            rows = await self.db.query(
                f'SELECT user_id, thread_id, message_id, content FROM "{self.turns}" '
                f"WHERE (user_id, thread_id, message_id) > (:u, :t, :m) {where}"
                "ORDER BY user_id, thread_id, message_id LIMIT :batch",
                {
                    "u": after[0],
                    "t": after[1],
                    "m": after[2],
                    "user_id": validate_id(user_id, "user_id") if user_id else None,
                    "batch": BACKFILL_BATCH,
                },
            )
            if not rows:
                return total
            groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for r in rows:
                groups.setdefault((r["user_id"], r["thread_id"]), []).append(r)
            statements: list[Statement] = []
            for (user, thread), turns in groups.items():
                ids, contents = [r["message_id"] for r in turns], [r["content"] for r in turns]
                statements += self.write_statements(user, thread, ids, contents)
            await self.db.run(*statements)
            total += len(rows)
            last = rows[-1]
            after = (last["user_id"], last["thread_id"], last["message_id"])

    def reach_statement(self, user_id: str, keys: Sequence[str]) -> Statement:
        """The user's turns sharing any of ``keys`` that 2 to `MAX_DF` turns have.

        Rows: ``shared`` keys and their ``dfs``, the turn (``thread_id``, ``message_id``,
        ``content``, ``ts``) and ``n``, the user's indexed turns; the turns sharing the
        rarest keys first, at most `REACH_LIMIT`.
        """
        return (
            _REACH_SQL.format(table=self.table, turns=self.turns),
            {
                "user_id": validate_id(user_id, "user_id"),
                "keys": list(dict.fromkeys(keys)),
                "cap": MAX_DF,
                "limit": REACH_LIMIT,
            },
        )

    async def reach(self, user_id: str, keys: Sequence[str]) -> list[dict[str, Any]]:
        """Run `reach_statement` on a pooled connection (`Database.pipeline`)."""
        if not keys:
            return []
        return (await self.db.pipeline(self.reach_statement(user_id, keys)))[-1]
