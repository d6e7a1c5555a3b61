"""Simulated time for a benchmark: age what is stored, as if days had gone by.

The product reads the real clock, so `age_stores` moves back by ``days`` the stamps that
decay, expiry, eviction, compaction and decision retention read, on the run's own database
and key prefix: `POSTGRES_COLUMNS`; the profile's facts, history and tombstones; key TTLs
(a key whose TTL is not longer is deleted). Not aged: ``stored_at`` (only compared between
rows), message stamps, checkpoints (kept by count) and the queue (drained before aging).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from redis.asyncio import Redis

from memory_graph_agent.storage.keys import RedisKeys

POSTGRES_COLUMNS: dict[str, tuple[str, ...]] = {
    "memories_": ("created_at", "last_accessed_at", "expires_at"),
    "memory_decisions": ("decided_at",),
    "episodes": ("logged_at",),
}
"""Timestamp columns aged, by table name prefix (every table of the database that matches)."""
FACT_FIELDS = ("expires_at", "updated_at", "valid_from")
HISTORY_FIELDS = ("valid_from", "valid_to")
DAY_MS = 86_400_000


def shift_iso(value: str, days: float) -> str:
    """An ISO timestamp ``days`` earlier (naive ones are UTC, as the product reads them)."""
    try:
        ts = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not an ISO timestamp, cannot age it: {value!r}") from exc
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return (ts - timedelta(days=days)).isoformat()


def shift_fields(raw: str | bytes, names: tuple[str, ...], days: float) -> str:
    """A JSON object with its timestamp ``names`` (those set) ``days`` earlier."""
    data: dict[str, Any] = json.loads(raw)
    for name in names:
        if data.get(name):
            data[name] = shift_iso(data[name], days)
    return json.dumps(data, ensure_ascii=False)


async def age_postgres(database_url: str, days: float) -> dict[str, int]:
    """Move the `POSTGRES_COLUMNS` of every matching table back ``days``; rows per table."""
    aged: dict[str, int] = {}
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT table_name::text, array_agg(column_name::text) FROM information_schema.columns "
            "WHERE table_schema = 'public' GROUP BY 1 ORDER BY 1"
        )
        for table, columns in await cur.fetchall():
            wanted = next((c for p, c in POSTGRES_COLUMNS.items() if table.startswith(p)), ())
            if not wanted:
                continue
            missing = set(wanted) - set(columns)
            if missing:  # the schema changed under the benchmark: say so, age nothing wrong
                raise RuntimeError(f"table {table} has no {sorted(missing)}: update bench.clock")
            sets = sql.SQL(", ").join(
                sql.SQL("{c} = {c} - make_interval(secs => %(s)s)").format(c=sql.Identifier(c))
                for c in wanted
            )
            query = sql.SQL("UPDATE {t} SET {sets}").format(t=sql.Identifier(table), sets=sets)
            aged[table] = (await conn.execute(query, {"s": days * 86_400.0})).rowcount
    return aged


async def age_redis(redis: Redis, prefix: str, days: float) -> dict[str, int]:
    """Age the profile's facts, history and tombstones, and shorten key TTLs, under ``prefix``."""
    keys, counts = RedisKeys(prefix), Counter()
    async for raw_key in redis.scan_iter(match=f"{prefix}:*", count=1000):
        key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
        kind = (keys.parse(key) or ("",))[0]
        if kind == "profile":
            facts = await redis.hgetall(key)
            mapping = {f: shift_fields(v, FACT_FIELDS, days) for f, v in facts.items()}
            if mapping:
                await redis.hset(key, mapping=mapping)
            counts["profile_facts"] += len(mapping)
        elif kind == "profile_history":
            entries = await redis.lrange(key, 0, -1)
            async with redis.pipeline(transaction=True) as pipe:
                for i, entry in enumerate(entries):
                    pipe.lset(key, i, shift_fields(entry, HISTORY_FIELDS, days))
                await pipe.execute()
            counts["history_entries"] += len(entries)
        elif kind == "profile_forgotten":
            stamps = await redis.hgetall(key)
            mapping = {f: shift_iso(v.decode() if isinstance(v, bytes) else v, days)
                       for f, v in stamps.items()}  # fmt: skip
            if mapping:
                await redis.hset(key, mapping=mapping)
            counts["tombstones"] += len(mapping)
        ttl_ms = await redis.pttl(key)
        if ttl_ms > 0:  # -1: no TTL; -2: gone meanwhile
            left = ttl_ms - round(days * DAY_MS)
            if left > 0:
                await redis.pexpire(key, left)
                counts["ttl_shortened"] += 1
            else:
                await redis.delete(key)
                counts["ttl_expired"] += 1
    return dict(counts)


async def age_stores(redis: Redis, prefix: str, database_url: str, days: float) -> dict[str, Any]:
    """Age what maintenance reads by ``days`` (> 0), while nothing else writes; the counts."""
    if not days > 0:
        raise ValueError(f"days must be > 0, got {days!r}")
    return {
        "postgres": await age_postgres(database_url, days),
        "redis": await age_redis(redis, prefix, days),
    }
