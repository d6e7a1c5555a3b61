"""Forget one user: delete everything the agent stored about them ("forget me").

What is deleted, for one ``user_id``:

- every Redis key of the user under the prefix: ``{prefix}:{kind}:{user}`` and
  ``{prefix}:{kind}:{user}:{...}`` for any kind (window, pending, seen, profile, and
  kinds added later, e.g. leases or dead letters). Ids cannot contain ``:`` or glob
  characters, so the user segment of a key name is unambiguous and is compared exactly;
- the user's rows of every ``memories_<dim>`` table (summaries and reflections, with
  their embeddings), and of the ``episodes`` table when it exists (it is append-only
  for the agent; the deleting transaction sets ``memory_agent.forget_user`` to the
  user id, so a guard trigger can allow exactly this erasure);
- the user's rows of ``memory_decisions`` (what consolidation, reflection and
  maintenance decided about their memories);
- the LangGraph checkpoints (``checkpoints``, ``checkpoint_blobs``,
  ``checkpoint_writes``) of the user's threads. Checkpoints are keyed by ``thread_id``
  only, so the user's threads are collected from the Redis key names and from the
  ``thread_id`` columns of their memories and episodes.

Caveats (documented in the README):

- Thread ids are not namespaced by user in the checkpointer. The CLI creates a fresh
  random thread id per conversation, so its threads belong to one user. A thread id
  that another user also used is still deleted (erasure wins) and is reported in
  ``shared_threads``.
- A thread that never reached memory (every turn of it failed or was rejected before
  the window was written) cannot be attributed to the user and is not found.
- Stop the user's sessions first: a turn that runs concurrently can write again, and
  another process's degraded-mode buffer (messages waiting for Redis to come back) is
  out of reach; this process's buffer is emptied of the user.

Postgres rows go first, in one transaction; Redis keys after. If anything fails midway,
running `forget_user` again finishes the job (it is idempotent).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from redis.asyncio import Redis

from memory_graph_agent.ids import validate_id
from memory_graph_agent.storage.keys import RedisKeys, default_prefix
from memory_graph_agent.storage.postgres import Database

CHECKPOINT_TABLES = ("checkpoint_writes", "checkpoint_blobs", "checkpoints")


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def user_keys(redis: Redis, prefix: str, user_id: str) -> list[str]:
    """Every Redis key whose user segment (the one after the kind) is ``user_id``."""
    validate_id(user_id, "user_id")
    found: set[str] = set()
    keys = RedisKeys(prefix)
    for pattern in keys.user_patterns(user_id):
        async for raw in redis.scan_iter(match=pattern, count=1000):
            key = _text(raw)
            parts = keys.parse(key)
            # ``owner:{thread}`` names a thread, not a user: handled by its value instead
            if len(parts) >= 2 and parts[1] == user_id and parts[0] != "owner":
                found.add(key)
    return sorted(found)


async def thread_users(redis: Redis, prefix: str, thread_id: str) -> set[str]:
    """Users that have Redis keys (window, pending, seen...) in ``thread_id``.

    One ``SCAN`` over the prefix: meant for a CLI session start, not for every turn.
    """
    validate_id(thread_id, "thread_id")
    users = set()
    keys = RedisKeys(prefix)
    async for raw in redis.scan_iter(match=keys.threads_pattern(thread_id=thread_id), count=1000):
        parts = keys.parse(_text(raw))
        if len(parts) == 3 and parts[2] == thread_id:
            users.add(parts[1])
    return users


def threads_of_keys(keys: list[str], prefix: str) -> set[str]:
    """Thread ids named by ``{prefix}:{kind}:{user}:{thread}`` keys."""
    out = set()
    for key in keys:
        parts = RedisKeys(prefix).parse(key)
        if len(parts) >= 3 and parts[2]:
            out.add(parts[2])
    return out


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
    async for raw in redis.scan_iter(match=keys.threads_pattern(), count=1000):
        parts = keys.parse(_text(raw))
        if len(parts) >= 3 and parts[1] != user_id and parts[2] in threads:
            shared.add(parts[2])
    return sorted(shared)


def _drop_buffered(user_id: str) -> tuple[set[str], int]:
    """Drop the user's messages from this process's degraded-mode buffer (if any).

    Returns the buffered threads and how many messages were dropped. Another process's
    buffer cannot be reached: stop the user's sessions before forgetting them.
    """
    try:
        from memory_graph_agent.storage.failsafe import window_buffer
    except ImportError:  # pragma: no cover - degraded mode not present
        return set(), 0
    threads = {t for u, t in list(getattr(window_buffer, "_threads", {})) if u == user_id}
    return threads, sum(len(window_buffer.take(user_id, t)) for t in threads)


async def forget_user(
    user_id: str, *, redis: Redis, db: Database, prefix: str | None = None
) -> dict[str, Any]:
    """Delete everything stored about ``user_id``; return what was deleted, counted.

    Args:
        user_id: The user to forget (validated: no glob or separator characters).
        redis: A client of the agent's Redis.
        db: The agent's Postgres (memories, episodes, checkpoints).
        prefix: Redis key prefix; defaults to ``MEMORY_KEY_PREFIX`` (``mem``).

    Returns:
        ``{"user_id", "threads", "shared_threads", "redis_keys", "memories": {table: n},
        "episodes": n or None (no table), "decisions": n, "checkpoints": {table: n},
        "buffered_messages"}`` (the last: dropped from this process's degraded-mode
        buffer of messages waiting for Redis).
    """
    validate_id(user_id, "user_id")
    prefix = prefix if prefix is not None else default_prefix()
    threads, buffered = _drop_buffered(user_id)
    keys = await user_keys(redis, prefix, user_id)
    threads |= threads_of_keys(keys, prefix)
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
            for table in CHECKPOINT_TABLES:
                report["checkpoints"][table] = (
                    await _delete(conn, table, "thread_id", sorted(threads))
                    if threads and await _table_exists(conn, table)
                    else 0
                )
    deleted = 0
    for start in range(0, len(keys), 500):
        deleted += int(await redis.delete(*keys[start : start + 500]))
    # Keys written between the scan and now (a turn still running) are caught here.
    late = await user_keys(redis, prefix, user_id)
    if late:
        deleted += int(await redis.delete(*late))
    for thread in sorted(threads):  # thread ownership marks held by this user
        owner_key = RedisKeys(prefix).owner(thread)
        if await redis.get(owner_key) == user_id:
            deleted += int(await redis.delete(owner_key))
    report["redis_keys"] = deleted
    report["threads"] = sorted(threads)
    return report
