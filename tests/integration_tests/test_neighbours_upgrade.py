"""A database whose neighbours function is the version before ``neighbour_reach`` (one
turn each way, four arguments; real Postgres) is upgraded in place: the old function is
replaced, not overloaded, and a caller of either form gets its neighbours."""

from __future__ import annotations

from memory_graph_agent.storage.episode_links import NEIGHBOURS_SCHEMA_VERSION
from memory_graph_agent.storage.postgres import SCHEMA_TABLE
from tests.builders import log_turns, without_component

PREVIOUS = """CREATE FUNCTION "{table}_neighbours"(
    p_user text, p_thread text, p_message text, p_seconds numeric)
RETURNS TABLE (thread_id text, message_id text, content text, ts timestamptz)
LANGUAGE plpgsql STABLE PARALLEL SAFE ROWS 2 AS $fn$
#variable_conflict use_column
DECLARE h_seq bigint; h_ts timestamptz;
BEGIN
  SELECT h.seq, h.ts INTO h_seq, h_ts FROM episodes h
  WHERE h.user_id = p_user AND h.thread_id = p_thread AND h.message_id = p_message;
  IF NOT FOUND THEN RETURN; END IF;
  RETURN QUERY
  SELECT v.thread_id, v.message_id, v.content, v.ts FROM (
    (SELECT n.message_id FROM episodes n WHERE n.user_id = p_user
     AND n.thread_id = p_thread AND n.seq < h_seq ORDER BY n.seq DESC LIMIT 1)
    UNION ALL
    (SELECT n.message_id FROM episodes n WHERE n.user_id = p_user
     AND n.thread_id = p_thread AND n.seq > h_seq ORDER BY n.seq LIMIT 1)
  ) AS n
  CROSS JOIN LATERAL (
    SELECT v.thread_id, v.message_id, v.content, v.ts FROM "{table}" v
    WHERE v.user_id = p_user AND v.thread_id = p_thread
    AND v.message_id = n.message_id LIMIT 1) AS v
  WHERE abs(extract(epoch FROM v.ts - h_ts)) <= p_seconds;
END $fn$"""
"""The function as version 2 made it (the code before ``neighbour_reach``)."""

CALL = (
    "SELECT message_id FROM \"{table}_neighbours\"(CAST(:u AS text), 't1', CAST(:m AS text), "
    "CAST(43200 AS numeric)) ORDER BY message_id"
)
"""A lookup as version 2's searches wrote it (four arguments)."""


async def _functions(services, table: str) -> list[int]:
    rows = await services.db.query(
        "SELECT pronargs FROM pg_proc WHERE proname = :f", {"f": f"{table}_neighbours"}
    )
    return [r["pronargs"] for r in rows]


async def test_the_neighbours_function_of_the_version_before_is_upgraded(services, make_context):
    table, user = services.episodes.vector_table, make_context().user_id
    ids = await log_turns(services, user, "t1", "one", "two", "three", "four", "five")
    drop = f'DROP FUNCTION "{table}_neighbours"(text, text, text, numeric, int)'
    component = f"{table}_neighbours"
    async with without_component(services, component, drop):
        await services.db.run(
            PREVIOUS.format(table=table),
            (
                f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES (:c, 2)",
                {"c": component},
            ),
        )
        assert await _functions(services, table) == [4]
        old = await services.db.query(CALL.format(table=table), {"u": user, "m": ids[2]})
        assert [r["message_id"] for r in old] == sorted([ids[1], ids[3]])
    # reopened: migrated to the current version, one function, no overload left
    assert await _functions(services, table) == [5]
    version = await services.db.query(
        f"SELECT version FROM {SCHEMA_TABLE} WHERE component = :c", {"c": component}
    )
    assert version[0]["version"] == NEIGHBOURS_SCHEMA_VERSION
    # a caller of the version before (four arguments) still gets one turn each way
    same = await services.db.query(CALL.format(table=table), {"u": user, "m": ids[2]})
    assert [r["message_id"] for r in same] == [r["message_id"] for r in old]
    pairs = await services.episodes.neighbours(user, [("t1", ids[2])], reach=2)
    assert sorted((h.hops, h.message_id) for _, h in pairs) == sorted(
        [(1, ids[1]), (1, ids[3]), (2, ids[0]), (2, ids[4])]
    )
