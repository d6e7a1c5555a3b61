"""The benchmarks' re-index of the turns (a grid over ``turn_context_weight``) on the real
Postgres: the HNSW index the next questions search has no dead entries, and reaches every
turn."""

from __future__ import annotations

import psycopg

from bench.locomo_pipeline import reindex_turns
from tests.builders import log_turns

TOPICS = ["hiking", "Denver", "the cello", "sourdough", "trains"]


def _turns(n: int) -> list[str]:
    return [f"Turn {i}: Priya and I talked about {TOPICS[i % 5]} on day {i}." for i in range(n)]


async def _session(url: str) -> psycopg.AsyncConnection:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    for setting in (
        "stats_fetch_consistency = none",
        "enable_seqscan = off",
        "hnsw.iterative_scan = relaxed_order",
        "hnsw.max_scan_tuples = 1000000",
    ):
        await conn.execute(f"SET {setting}")
    return conn


async def hnsw_scan(url: str, table: str) -> tuple[int, int]:
    """(index entries read, live rows fetched) by an HNSW scan for as many rows as the table has.

    Read in this backend's own statistics, flushed at once: an entry whose row is dead
    is read but not fetched, and only VACUUM (or a rebuild) takes it out of the index.
    """
    stats = "SELECT idx_tup_read, idx_tup_fetch FROM pg_stat_user_indexes WHERE indexrelname = %s"
    async with await _session(url) as conn:
        before = await (await conn.execute(stats, (f"{table}_hnsw",))).fetchone()
        (rows,) = await (await conn.execute(f'SELECT count(*) FROM "{table}"')).fetchone()
        (probe,) = await (await conn.execute(f'SELECT embedding FROM "{table}" LIMIT 1')).fetchone()
        await conn.execute(
            f'SELECT 1 FROM "{table}" ORDER BY embedding <=> %s LIMIT %s', (probe, rows)
        )
        await conn.execute("SELECT pg_stat_force_next_flush()")
        after = await (await conn.execute(stats, (f"{table}_hnsw",))).fetchone()
    return after[0] - before[0], after[1] - before[1]


async def reached(url: str, table: str, user: str) -> tuple[int, list[int]]:
    """(rows, how many rows an HNSW scan from each of 3 of the user's turns reaches).

    The scans are not filtered by user: with a filter the planner may sort the user's
    rows instead of walking the graph.
    """
    async with await _session(url) as conn:
        (rows,) = await (await conn.execute(f'SELECT count(*) FROM "{table}"')).fetchone()
        probes = await conn.execute(
            f'SELECT embedding FROM "{table}" WHERE user_id = %s ORDER BY message_id LIMIT 3',
            (user,),
        )
        found = []
        for (probe,) in await probes.fetchall():
            scan = await conn.execute(
                f'SELECT 1 FROM "{table}" ORDER BY embedding <=> %s LIMIT %s', (probe, rows)
            )
            found.append(len(await scan.fetchall()))
    return rows, found


async def test_a_reindex_leaves_no_dead_hnsw_entries(services, make_context):
    ctx = make_context()
    ids = await log_turns(services, ctx.user_id, "t1", *_turns(60))
    assert await reindex_turns(services, ctx.user_id, ["t1"], 0.3) == len(ids)  # a grid point
    assert await reindex_turns(services, ctx.user_id, ["t1"], 0.0) == len(ids)  # restored
    read, fetched = await hnsw_scan(services.database_url, services.episodes.vector_table)
    assert read == fetched, f"{read - fetched} dead HNSW entries"


async def test_every_turn_stays_reachable_after_a_reindex(services, make_context):
    """On 1,000 similar turns, vectors updated in place and then vacuumed left an HNSW
    graph whose scans reached 200 to 600 of them (pgvector 0.8.6): the rebuild keeps
    them all within reach."""
    ctx = make_context()
    turns = _turns(1000)
    for hour, start in enumerate(range(0, len(turns), 50)):  # a minute per turn
        await log_turns(services, ctx.user_id, "t1", *turns[start : start + 50], hour=hour)
    for weight in (0.3, 0.0):  # a grid point, then the replay's vectors restored
        await reindex_turns(services, ctx.user_id, ["t1"], weight)
        rows, found = await reached(
            services.database_url, services.episodes.vector_table, ctx.user_id
        )
        assert min(found) >= 0.99 * rows, f"of {rows} rows an HNSW scan reaches {found}"
