"""The memory graph's links between raw turns: a summary's turns, a turn's neighbours.

A mixin of `episodes.EpisodeLog`, next to `episode_index.EpisodeIndex` (the searches).
The links are looked up on their own (`EpisodeLinks.linked`, one round trip), or brought
by the searches themselves: `linked_dense_statements` and `linked_keyword_statement`
return each search's hits with the neighbours of its best ones, and `with_members` makes
a memory search return the turns of the summaries it finds, so recall
(`recall.channels`) needs no second round trip for them.
"""

from __future__ import annotations

from typing import Any

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.storage.episode_index import EpisodeHit, EpisodeIndex, episode_hit
from memory_graph_agent.storage.memory_rows import VectorLiteral
from memory_graph_agent.storage.outages import guarded
from memory_graph_agent.storage.postgres import Statement

NEIGHBOUR_HOURS = 12
"""Turns further apart than this are not neighbours (another sitting of the thread)."""

Neighbours = dict[tuple[str, str], list[EpisodeHit]]
"""The neighbours of turns, by the turn's ``(thread_id, message_id)``, in message id order."""

NEIGHBOURS_SCHEMA_VERSION = 3
"""Raise it with a change to `neighbours_function`. 2: ``PARALLEL SAFE``, ``ROWS 2``;
3: ``p_reach`` turns each way (default 1, so a caller of version 2 still gets its two
rows), and ``hops``."""


def neighbours_function(table: str) -> list[str]:
    """The server-side lookup of one turn's neighbours: ``"{table}_neighbours"``.

    The ``p_reach`` turns said just before and after ``(p_user, p_thread, p_message)`` in
    its thread, if indexed and within ``p_seconds``, with how many turns away each is
    (``hops``). The version before had no ``p_reach`` and no ``hops``: it is dropped
    first, since a new argument makes another function. A PL/pgSQL
    function, so each backend plans its lookups once and keeps the plans: written inline
    in a search, the two ordered lookups and the join were planned again with every search
    (0.6 ms of a 0.7 ms plan).
    """
    old = f'DROP FUNCTION IF EXISTS "{table}_neighbours"(text, text, text, numeric)'
    return [
        old,
        f"""CREATE OR REPLACE FUNCTION "{table}_neighbours"(
        p_user text, p_thread text, p_message text, p_seconds numeric, p_reach int DEFAULT 1)
    RETURNS TABLE (thread_id text, message_id text, content text, ts timestamptz, hops int)
    LANGUAGE plpgsql STABLE PARALLEL SAFE ROWS 2 AS $fn$
    #variable_conflict use_column
    DECLARE h_seq bigint; h_ts timestamptz;
    BEGIN
      SELECT h.seq, h.ts INTO h_seq, h_ts FROM episodes h
      WHERE h.user_id = p_user AND h.thread_id = p_thread AND h.message_id = p_message;
      IF NOT FOUND THEN RETURN; END IF;
      RETURN QUERY
      SELECT v.thread_id, v.message_id, v.content, v.ts, n.hops FROM (
        (SELECT n.message_id, row_number() OVER (ORDER BY n.seq DESC)::int AS hops
         FROM episodes n WHERE n.user_id = p_user
         AND n.thread_id = p_thread AND n.seq < h_seq ORDER BY n.seq DESC LIMIT p_reach)
        UNION ALL
        (SELECT n.message_id, row_number() OVER (ORDER BY n.seq)::int AS hops
         FROM episodes n WHERE n.user_id = p_user
         AND n.thread_id = p_thread AND n.seq > h_seq ORDER BY n.seq LIMIT p_reach)
      ) AS n
      -- LIMIT 1 keeps this a lookup by primary key (a join would read the whole thread)
      CROSS JOIN LATERAL (
        SELECT v.thread_id, v.message_id, v.content, v.ts FROM "{table}" v
        WHERE v.user_id = p_user AND v.thread_id = p_thread
        AND v.message_id = n.message_id LIMIT 1) AS v
      WHERE abs(extract(epoch FROM v.ts - h_ts)) <= p_seconds;
    END $fn$""",
    ]


_NEIGHBOURS_SQL = (
    "SELECT k.thread_id AS of_thread, k.message_id AS of_message, "
    "v.thread_id, v.message_id, v.content, v.ts, v.hops "
    "FROM {keys} "
    'CROSS JOIN LATERAL "{table}_neighbours"(CAST(:user_id AS text), k.thread_id, '
    "k.message_id, CAST(:seconds AS numeric), CAST(:reach AS int)) AS v "
)
"""The :reach turns said just before and after each key of ``{keys}`` (``k``), within
:seconds (`neighbours_function`)."""


@guarded("postgres")
class EpisodeLinks(EpisodeIndex):
    """Look up the links of raw turns, alone or within a search, always per user."""

    async def turns(self, user_id: str, keys: list[tuple[str, str]]) -> list[EpisodeHit]:
        """The indexed turns of ``(thread_id, message_id)`` keys (e.g. a summary's sources)."""
        if not keys:
            return []
        return [episode_hit(r) for r in await self.db.run(self._turns_statement(user_id, keys))]

    async def neighbours(
        self, user_id: str, keys: list[tuple[str, str]], reach: int = 1
    ) -> list[tuple[tuple[str, str], EpisodeHit]]:
        """The ``reach`` indexed turns said just before and after each key's turn, in its thread.

        A neighbour more than `NEIGHBOUR_HOURS` away belongs to another sitting and is
        left out. Returns ``(key, neighbour)`` pairs.
        """
        if not keys:
            return []
        return _pairs(await self.db.run(self._neighbours_statement(user_id, keys, reach)))

    async def linked(
        self,
        user_id: str,
        members: list[tuple[str, str]],
        around: list[tuple[str, str]],
        reach: int = 1,
    ) -> tuple[list[EpisodeHit], list[tuple[tuple[str, str], EpisodeHit]]]:
        """`turns` of ``members`` and `neighbours` of ``around``, in one round trip."""
        turns, pairs = await self.db.pipeline(
            self._turns_statement(user_id, members),
            self._neighbours_statement(user_id, around, reach),
        )
        return [episode_hit(r) for r in turns], _pairs(pairs)

    def linked_dense_statements(
        self, user_id: str, vector: list[float] | VectorLiteral, k: int, around: int, reach: int = 1
    ) -> list[Statement]:
        """`dense_statements`, also returning the neighbours of its ``around`` nearest turns.

        ``reach`` turns each way. Rows for `linked_hits`; just `dense_statements` without
        ``around``.
        """
        *options, (knn, params) = self.dense_statements(user_id, vector, k)
        if around <= 0:
            return [*options, (knn, params)]
        ranked = "SELECT d.*, row_number() OVER (ORDER BY distance, message_id, thread_id) AS ord"
        return [*options, self._with_neighbours(knn, ranked, "distance", params, around, reach)]

    def linked_keyword_statement(
        self, user_id: str, text: str, k: int, around: int, reach: int = 1
    ) -> Statement | None:
        """`keyword_statement`, also returning the neighbours of its ``around`` best turns."""
        statement = self.keyword_statement(user_id, text, k)
        if statement is None or around <= 0:
            return statement
        sql, params = statement
        ranked = (
            "SELECT d.*, row_number() OVER "
            "(ORDER BY score DESC, ts DESC, message_id, thread_id) AS ord"
        )
        return self._with_neighbours(sql, ranked, "score", params, around, reach)

    def with_members(self, user_id: str, statement: Statement) -> Statement:
        """A memory search (`MemoryStore.search_statements`) that also brings its turns.

        Per summary, the indexed turns it was made from, as ``member_*`` arrays in
        ``source_ids`` order (`member_hits` reads them).
        """
        sql, params = (statement, {}) if isinstance(statement, str) else statement
        return (
            f"WITH m AS MATERIALIZED ({sql}) "
            "SELECT m.*, mb.member_ids, mb.member_contents, mb.member_ts FROM m "
            "LEFT JOIN LATERAL ("
            "  SELECT array_agg(v.message_id ORDER BY s.ord) AS member_ids, "
            "  array_agg(v.content ORDER BY s.ord) AS member_contents, "
            "  array_agg(v.ts ORDER BY s.ord) AS member_ts "
            "  FROM unnest(m.source_ids) WITH ORDINALITY AS s(message_id, ord) "
            f'  JOIN "{self._table()}" v ON v.user_id = :user_id '
            "  AND v.thread_id = m.thread_id AND v.message_id = s.message_id "
            f"  WHERE m.kind = '{MemoryKind.SUMMARY}') AS mb ON true",
            {**params, "user_id": validate_id(user_id, "user_id")},
        )

    def _with_neighbours(
        self, search: str, ranked: str, score: str, params: dict[str, Any], around: int, reach: int
    ) -> Statement:
        """``search`` (CTE ``d``), ranked by ``ranked`` (``ord``), with neighbours.

        The neighbours are those of the hits ranked ``ord <= around``: a hit row has no
        ``of_*``, a neighbour row no ``score`` (`linked_hits` tells them apart).
        """
        keys = "(SELECT thread_id, message_id, ord FROM r WHERE ord <= :around) AS k"
        return (
            f"WITH d AS MATERIALIZED ({search}), r AS ({ranked} FROM d) "
            "SELECT NULL::text AS of_thread, NULL::text AS of_message, thread_id, message_id, "
            f"content, ts, NULL::int AS hops, {score}, ord FROM r "
            "UNION ALL SELECT n.*, NULL, NULL FROM ("
            f"{_NEIGHBOURS_SQL.format(keys=keys, table=self._table())}) AS n",
            {**params, "around": around, "reach": reach, "seconds": NEIGHBOUR_HOURS * 3600},
        )

    def _turns_statement(self, user_id: str, keys: list[tuple[str, str]]) -> Statement:
        return (
            "SELECT v.thread_id, v.message_id, v.content, v.ts "
            f'FROM "{self._table()}" v JOIN unnest(CAST(:threads AS text[]), '
            "CAST(:ids AS text[])) WITH ORDINALITY AS k(thread_id, message_id, ord) "
            "ON v.thread_id = k.thread_id AND v.message_id = k.message_id "
            "WHERE v.user_id = :user_id ORDER BY k.ord",
            _keys(user_id, keys),
        )

    def _neighbours_statement(
        self, user_id: str, keys: list[tuple[str, str]], reach: int
    ) -> Statement:
        keyed = (
            "unnest(CAST(:threads AS text[]), CAST(:ids AS text[])) "
            "WITH ORDINALITY AS k(thread_id, message_id, ord)"
        )
        return (
            _NEIGHBOURS_SQL.format(keys=keyed, table=self._table())
            + "ORDER BY k.ord, v.message_id",
            {**_keys(user_id, keys), "reach": reach, "seconds": NEIGHBOUR_HOURS * 3600},
        )


def linked_hits(rows: list[dict[str, Any]], around: int) -> tuple[list[dict[str, Any]], Neighbours]:
    """Split the rows of a linked search into its hit rows and the neighbours.

    The hit rows come back in the search's rank order (for `dense_hits` or
    `keyword_hits`); every hit ranked within ``around`` has an entry in the neighbours,
    empty if it has none.
    """
    hits = sorted((r for r in rows if r["of_thread"] is None), key=lambda r: r["ord"])
    neighbours: Neighbours = {(r["thread_id"], r["message_id"]): [] for r in hits[:around]}
    for row in rows:
        if row["of_thread"] is not None:
            neighbours[(row["of_thread"], row["of_message"])].append(episode_hit(row))
    for found in neighbours.values():
        found.sort(key=lambda h: h.message_id)
    return hits, neighbours


def member_hits(rows: list[dict[str, Any]]) -> dict[tuple[str, str], EpisodeHit]:
    """The turns of the summaries a search `with_members` found, by ``(thread_id, message_id)``."""
    members: dict[tuple[str, str], EpisodeHit] = {}
    for row in rows:
        ids, contents, stamps = (row.get(f"member_{c}") or [] for c in ("ids", "contents", "ts"))
        for message_id, content, ts in zip(ids, contents, stamps, strict=True):
            members[(row["thread_id"], message_id)] = EpisodeHit(
                row["thread_id"], message_id, content, ts
            )
    return members


def _pairs(rows: list[dict[str, Any]]) -> list[tuple[tuple[str, str], EpisodeHit]]:
    return [((r["of_thread"], r["of_message"]), episode_hit(r)) for r in rows]


def _keys(user_id: str, keys: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "user_id": validate_id(user_id, "user_id"),
        "threads": [t for t, _ in keys],
        "ids": [m for _, m in keys],
    }
