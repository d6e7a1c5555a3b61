"""Forget one user: delete everything the agent stored about them ("forget me").

Their Redis keys, rows of ``memories_<dim>``, ``episodes``, ``memory_decisions``, the
checkpoints of their threads and, given a LangGraph server, its threads of theirs. The
server and Postgres first (one transaction), Redis after: running it again finishes an
interrupted run. Caveats (shared threads, live sessions): docs/reliability-and-security.md.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from redis.asyncio import Redis

from memory_graph_agent.core.ids import validate_id
from memory_graph_agent.core.memory_threads import ALTERNATES, memory_thread_id
from memory_graph_agent.storage.failsafe import window_buffer
from memory_graph_agent.storage.keys import THREAD_ONLY_KINDS, RedisKeys, default_prefix
from memory_graph_agent.storage.postgres import Database
from memory_graph_agent.storage.server_threads import ServerThreads

CHECKPOINT_TABLES = ("checkpoint_writes", "checkpoint_blobs", "checkpoints")


async def _scan(redis: Redis, keys: RedisKeys, pattern: str) -> dict[str, tuple[str, ...]]:
    """The keys matching ``pattern``, each with its segments."""
    raws = [raw async for raw in redis.scan_iter(match=pattern, count=1000)]
    found = [raw.decode() if isinstance(raw, bytes) else raw for raw in raws]
    return {key: keys.parse(key) for key in found}


async def user_keys(redis: Redis, prefix: str, user_id: str) -> list[str]:
    """Every Redis key whose user segment (the one after the kind) is ``user_id``."""
    validate_id(user_id, "user_id")
    keys, found = RedisKeys(prefix), set()
    for pattern in keys.user_patterns(user_id):
        # ``owner:{thread}`` names a thread, not a user: handled by its value instead
        for key, parts in (await _scan(redis, keys, pattern)).items():
            if len(parts) >= 2 and parts[1] == user_id and parts[0] not in THREAD_ONLY_KINDS:
                found.add(key)
    return sorted(found)


async def thread_users(redis: Redis, prefix: str, thread_id: str) -> set[str]:
    """Users that have Redis keys in ``thread_id`` (one ``SCAN``: not for every turn)."""
    validate_id(thread_id, "thread_id")
    keys = RedisKeys(prefix)
    found = await _scan(redis, keys, keys.threads_pattern(thread_id=thread_id))
    return {p[1] for p in found.values() if len(p) == 3 and p[2] == thread_id}


async def owned_threads(redis: Redis, prefix: str, user_id: str) -> set[str]:
    """Threads whose ``owner:`` key names ``user_id``: every thread they ever wrote to."""
    keys = RedisKeys(prefix)
    names = list(await _scan(redis, keys, keys.owner_pattern()))
    owned: set[str] = set()
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        owners = await redis.mget(chunk)
        owned |= {keys.parse(k)[1] for k, o in zip(chunk, owners, strict=True) if o == user_id}
    return owned


def threads_of_keys(keys: list[str], prefix: str) -> set[str]:
    """Thread ids named by ``{prefix}:{kind}:{user}:{thread}`` keys."""
    return {p[2] for p in map(RedisKeys(prefix).parse, keys) if len(p) >= 3 and p[2]}


async def _memory_tables(conn: psycopg.AsyncConnection) -> list[str]:
    cur = await conn.execute(
        "SELECT c.table_name FROM information_schema.columns c "
        "WHERE c.table_schema = 'public' AND c.column_name = 'user_id' "
        "AND c.table_name ~ '^memories_[0-9]+$' ORDER BY 1"
    )
    return [r[0] for r in await cur.fetchall()]


async def _table_exists(conn: psycopg.AsyncConnection, table: str) -> bool:
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"public.{table}",))
    return bool((await cur.fetchone())[0])


async def _columns(conn: psycopg.AsyncConnection, table: str) -> set[str]:
    cur = await conn.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = %s",
        (table,),
    )
    return {r[0] for r in await cur.fetchall()}


async def _threads_in(conn: psycopg.AsyncConnection, table: str, user_id: str) -> set[str]:
    cur = await conn.execute(
        sql.SQL(
            "SELECT DISTINCT thread_id FROM {} WHERE user_id = %s AND thread_id IS NOT NULL"
        ).format(sql.Identifier(table)),
        (user_id,),
    )
    return {r[0] for r in await cur.fetchall()}


async def _delete(conn: psycopg.AsyncConnection, table: str, column: str, value: Any) -> int:
    op = "= ANY(%s)" if isinstance(value, list) else "= %s"
    cur = await conn.execute(
        sql.SQL("DELETE FROM {} WHERE {} " + op).format(
            sql.Identifier(table), sql.Identifier(column)
        ),
        (value,),
    )
    return cur.rowcount


async def _shared_threads(
    conn: psycopg.AsyncConnection,
    redis: Redis,
    prefix: str,
    user_id: str,
    threads: set[str],
    tables: list[str],
) -> list[str]:
    """Threads of the user that another user also has memories or Redis keys in."""
    if not threads:
        return []
    shared: set[str] = set()
    for table in tables:
        cur = await conn.execute(
            sql.SQL(
                "SELECT DISTINCT thread_id FROM {} WHERE thread_id = ANY(%s) AND user_id <> %s"
            ).format(sql.Identifier(table)),
            (sorted(threads), user_id),
        )
        shared |= {r[0] for r in await cur.fetchall()}
    keys = RedisKeys(prefix)
    found = await _scan(redis, keys, keys.threads_pattern())
    shared |= {p[2] for p in found.values() if len(p) >= 3 and p[1] != user_id and p[2] in threads}
    return sorted(shared)


def _drop_buffered(user_id: str) -> tuple[set[str], int]:
    """Drop the user's messages from this process's buffer; return their threads and count."""
    threads = {t for u, t in list(getattr(window_buffer, "_threads", {})) if u == user_id}
    return threads, sum(len(window_buffer.take(user_id, t)) for t in threads)


async def forget_user(
    user_id: str,
    *,
    redis: Redis,
    db: Database,
    prefix: str | None = None,
    server: ServerThreads | None = None,
) -> dict[str, Any]:
    """Delete everything stored about ``user_id``; return what was deleted, counted.

    With ``server``, the user's threads on that LangGraph server are deleted first: if
    the server cannot be reached, the error is raised and nothing else is deleted.

    Returns:
        ``{"user_id", "threads", "shared_threads", "redis_keys", "memories": {table: n},
        "episodes": n or None (no table), "decisions": n, "checkpoints": {table: n},
        "buffered_messages", "server_threads": [deleted ids] or None (no server)}``.
    """
    validate_id(user_id, "user_id")
    prefix = prefix if prefix is not None else default_prefix()
    threads, buffered = _drop_buffered(user_id)
    keys = await user_keys(redis, prefix, user_id)
    threads |= threads_of_keys(keys, prefix) | await owned_threads(redis, prefix, user_id)
    report: dict[str, Any] = {
        "user_id": user_id,
        "memories": {},
        "checkpoints": {},
        "buffered_messages": buffered,
    }
    async with db.psycopg() as conn:
        async with conn.transaction():
            # Lets an append-only guard (trigger) on episodes tell erasure from an edit.
            await conn.execute(
                "SELECT set_config('memory_agent.forget_user', %s, true)", (user_id,)
            )
            tables = await _memory_tables(conn)
            episode_cols = await _columns(conn, "episodes")
            has_episodes = "user_id" in episode_cols
            for table in tables:
                threads |= await _threads_in(conn, table, user_id)
            if has_episodes and "thread_id" in episode_cols:
                threads |= await _threads_in(conn, "episodes", user_id)
            report["shared_threads"] = await _shared_threads(
                conn, redis, prefix, user_id, threads, tables
            )
            # first: a failure here rolls back, so running forget again still finds them
            report["server_threads"] = (
                await server.delete_user_threads(user_id, threads) if server else None
            )
            for table in tables:
                report["memories"][table] = await _delete(conn, table, "user_id", user_id)
            report["episodes"] = (
                await _delete(conn, "episodes", "user_id", user_id) if has_episodes else None
            )
            report["decisions"] = (
                await _delete(conn, "memory_decisions", "user_id", user_id)
                if await _table_exists(conn, "memory_decisions")
                else 0
            )
            # the memory runs of the user's threads keep their state on threads of their own
            checkpointed = threads | {
                memory_thread_id(user_id, t, n) for t in threads for n in range(ALTERNATES)
            }
            for table in CHECKPOINT_TABLES:
                report["checkpoints"][table] = (
                    await _delete(conn, table, "thread_id", sorted(checkpointed))
                    if threads and await _table_exists(conn, table)
                    else 0
                )
    deleted = 0
    for start in range(0, len(keys), 500):
        deleted += int(await redis.delete(*keys[start : start + 500]))
    # Keys written between the scan and now (a turn still running) are caught here.
    if late := await user_keys(redis, prefix, user_id):
        deleted += int(await redis.delete(*late))
    for thread in sorted(threads):  # thread ownership marks held by this user
        owner_key = RedisKeys(prefix).owner(thread)
        if await redis.get(owner_key) == user_id:
            marks = RedisKeys(prefix).rejected(thread), RedisKeys(prefix).active(thread)
            deleted += int(await redis.delete(owner_key, *marks))
    report["redis_keys"] = deleted
    report["threads"] = sorted(threads)
    return report
