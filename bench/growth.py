"""Growth: what each user's storage costs as conversations go on, retention on and off.

    python -m bench growth [--users 20] [--turns 3000] [--every 250] [--days-per-pass 20]

Users talk round-robin through the compiled graph (instant fake model), a new thread every
``--session-turns`` turns. Every ``--every`` turns per user, memory is drained,
``--days-per-pass`` simulated days go by (`age_stores`), maintenance runs for all users and
storage is measured: Redis bytes by key kind, Postgres bytes per table group (live rows, and
on disk after VACUUM), memories per user. The read path (`retrieve`) is timed at every
measurement, with its parts (embedding, searches, the rest) and the candidates it ranked;
each recall channel's query is run under ``EXPLAIN (ANALYZE, BUFFERS)`` on a few of the
same questions (`channel_plans`): what it costs the server, and the pages it reads. Once
with ``checkpoint_retention="keep_latest"``, once ``"off"``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from psycopg import sql
from redis.asyncio import Redis

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model
from bench.harness import main, ms_stats, say, write_results
from bench.seeding import memory_text, user_question
from bench.timing import instrument, recording
from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from graph.maintenance import build_maintenance_graph
from memory_graph_agent.recall.channels import CHANNELS
from memory_graph_agent.recall.retrieval import recall_search, retrieve
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.checkpoints import SaverCheckpoints
from memory_graph_agent.storage.keys import RedisKeys
from memory_graph_agent.storage.memory_rows import ACTIVE, vector_literal

POSTGRES_COLUMNS: dict[str, tuple[str, ...]] = {
    "memories_": ("created_at", "last_accessed_at", "expires_at"),
    "memory_decisions": ("decided_at",),
    "episodes": ("logged_at",),
}
"""Timestamp columns aged, by table name prefix (every table of the database that matches)."""
FACT_FIELDS = ("expires_at", "updated_at", "valid_from")
HISTORY_FIELDS = ("valid_from", "valid_to")
DAY_MS = 86_400_000
PLANNED = 10
"""Questions of each measurement whose channel queries are explained (`channel_plans`)."""


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
                raise RuntimeError(f"table {table} has no {sorted(missing)}: update bench.growth")
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
    """Age what maintenance reads by ``days`` (> 0), while nothing else writes; the counts.

    The product reads the real clock, so the stamps that decay, expiry, eviction, compaction
    and decision retention read move back: `POSTGRES_COLUMNS`; the profile's facts, history
    and tombstones; key TTLs (a key whose TTL is not longer is deleted). Not aged:
    ``stored_at`` (only compared between rows), message stamps, checkpoints (kept by count)
    and the queue (drained before aging).
    """
    if not days > 0:
        raise ValueError(f"days must be > 0, got {days!r}")
    return {
        "postgres": await age_postgres(database_url, days),
        "redis": await age_redis(redis, prefix, days),
    }


GROUPS = {
    "checkpoints": ("checkpoint",),
    "memories": ("memories_",),
    "episodes": ("episodes",),
    "episode_index": ("episode_vectors_",),
    "decisions": ("memory_decisions",),
}
"""Postgres table groups by name prefix; anything else counts as ``other``."""
RETENTIONS = ("keep_latest", "off")
REMOVALS = ("expired", "evicted", "compacted", "decisions_pruned", "threads_archived")
"""What a maintenance pass's report counts that each sample keeps."""
DAYS_PER_PASS = 20.0
"""Simulated days before each pass by default: the default 12 passes span 240 days."""


def _group(table: str) -> str:
    for group, prefixes in GROUPS.items():
        if table.startswith(prefixes):
            return group
    return "other"


async def storage_bytes(services: Any, database_url: str) -> dict[str, dict[str, int]]:
    """Redis bytes by key kind; Postgres bytes by table group, live and on disk after VACUUM."""
    redis: dict[str, int] = defaultdict(int)
    prefix = services.keys.prefix
    async for key in services.redis.scan_iter(match=f"{prefix}:*", count=1000):
        kind = services.keys.parse(key.decode() if isinstance(key, bytes) else key)[0]
        redis[kind] += int(await services.redis.memory_usage(key) or 0)
    live: dict[str, int] = defaultdict(int)
    disk: dict[str, int] = defaultdict(int)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("VACUUM")
        cur = await conn.execute(
            "SELECT relname, pg_total_relation_size(relid) FROM pg_stat_user_tables"
        )
        for table, size in await cur.fetchall():
            disk[_group(table)] += int(size)
            rows = sql.SQL("SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {} t")
            (size,) = await (await conn.execute(rows.format(sql.Identifier(table)))).fetchone()
            live[_group(table)] += int(size)
    return {"redis": dict(redis), "postgres": dict(live), "postgres_disk": dict(disk)}


async def memories_per_user(database_url: str, users: int) -> dict[str, float]:
    """Memories per user: ``rows``, ``active`` (what recall considers) and ``superseded``."""
    totals: dict[str, int] = defaultdict(int)
    count = sql.SQL(
        "SELECT count(*), count(*) FILTER (WHERE " + ACTIVE + "), "
        "count(*) FILTER (WHERE status = 'superseded') FROM {}"
    )
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT relname FROM pg_stat_user_tables")
        for (table,) in await cur.fetchall():
            if _group(table) != "memories":
                continue
            row = await (await conn.execute(count.format(sql.Identifier(table)))).fetchone()
            for name, n in zip(("rows", "active", "superseded"), row, strict=True):
                totals[name] += int(n)
    return {name: round(totals[name] / users, 2) for name in ("rows", "active", "superseded")}


async def read_path(
    services: Any, settings: Settings, contexts: list[Context], questions: list[str]
) -> dict[str, Any]:
    """`retrieve` on ``questions``, spread over the users: p50/p95 (ms) and its parts.

    ``parts_p50`` (ms): the query embedding; the searches (`search_channels`) without their
    wait for it; the rest (fusion, links, scoring, the budget). ``candidates_p50``: the
    candidates that competed for the budget.
    """
    seconds, candidates, parts = [], [], defaultdict(list)
    with instrument(services):
        for i, question in enumerate(questions):
            ctx = contexts[i % len(contexts)]
            with recording() as rec:
                started = time.perf_counter()
                got = await retrieve(services, settings, ctx, question, "growth-probe", touch=False)
                seconds.append(time.perf_counter() - started)
            parts["embedding"].append(rec.total("embed_query"))
            parts["searches"].append(rec.total("search") - rec.total("embed_wait"))
            parts["rest"].append(seconds[-1] - rec.total("search"))
            candidates.append(got.candidates)
    return {
        **ms_stats(seconds),
        "parts_p50": {k: round(statistics.median(v) * 1000, 3) for k, v in parts.items()},
        "candidates_p50": statistics.median(candidates),
    }


async def channel_plans(
    services: Any, settings: Settings, contexts: list[Context], questions: list[str]
) -> dict[str, dict[str, float]]:
    """Per recall channel, p50 over ``questions`` of its query under EXPLAIN (ANALYZE, BUFFERS).

    ``server_ms``: the execution time; ``pages``: shared buffers hit or read (8 KiB each);
    ``rows``: the rows it returned. The query is the one `retrieve` sends for the question.
    """
    budget = settings.window.memory_token_budget  # retrieve's, unless told another
    seen: dict[str, dict[str, list[float]]] = {}
    for i, question in enumerate(questions):
        vector = vector_literal(await services.embeddings.aembed_query(question))
        user = contexts[i % len(contexts)].user_id
        search = replace(recall_search(settings, user, question, budget), vector=vector)
        for channel in CHANNELS:
            statements = channel.statements(services, search)
            if not statements:  # a channel with nothing to search (no one named)
                continue
            *options, (query, params) = statements
            explained = ("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query, params)
            rows = await services.db.pipeline(*options, explained)
            (plan,) = rows[-1][0]["QUERY PLAN"]
            top = plan["Plan"]
            got = seen.setdefault(channel.name, defaultdict(list))
            got["server_ms"].append(plan["Execution Time"])
            got["pages"].append(top["Shared Hit Blocks"] + top["Shared Read Blocks"])
            got["rows"].append(top["Actual Rows"])
    return {
        name: {k: round(statistics.median(v), 3) for k, v in got.items()}
        for name, got in seen.items()
    }


def _text(rng: random.Random) -> str:
    return user_question(rng) if rng.random() < 0.3 else memory_text(rng)


async def run_one(retention: str, a: argparse.Namespace) -> dict[str, Any]:
    """One whole simulation in a fresh database, with ``checkpoint_retention=retention``."""
    rng = random.Random(a.seed)
    probe = random.Random(a.seed + 1)  # the timed questions leave the conversations as they are
    async with (
        isolated_services(tag="growth", keep=a.keep) as env,
        services_session(EMBEDDING) as services,
        open_checkpointer(env.database_url) as saver,
    ):
        spec, _ = register_instant_model()
        memory = LocalScheduler()
        settings = Settings.from_env().override(memory_delay_s=0, checkpoint_retention=retention)
        agent = memory.bind(build_graph(services, saver, scheduler=memory, settings=settings))
        maintenance = build_maintenance_graph(services, SaverCheckpoints(saver), settings=settings)
        contexts = [Context(user_id=f"growth-u{u:03d}", model=spec) for u in range(a.users)]
        samples, started = [], time.perf_counter()
        day, last_pass = 0.0, 0
        for done in range(1, a.turns + 1):
            for ctx in contexts:
                thread = f"{ctx.user_id}-s{(done - 1) // a.session_turns}"
                config = {"configurable": {"thread_id": thread}}
                await agent.ainvoke({"messages": [HumanMessage(_text(rng))]}, config, context=ctx)
            if done % a.every and done != a.turns:
                continue
            await memory.drain()
            days, last_pass = a.days_per_pass * (done - last_pass) / a.every, done
            if days:
                await age_stores(services.redis, services.keys.prefix, env.database_url, days)
                day += days
            state = await maintenance.ainvoke({"all_users": True}, context=contexts[0])
            sizes = await storage_bytes(services, env.database_url)
            samples.append(
                {
                    "turns_per_user": done,
                    "day": round(day, 3),
                    "memories_per_user": await memories_per_user(env.database_url, a.users),
                    "maintenance": {k: state["report"][k] for k in REMOVALS},
                    **sizes,
                }
            )
            questions = [user_question(probe) for _ in range(a.queries)]
            samples[-1]["read_path_ms"] = await read_path(services, settings, contexts, questions)
            samples[-1]["channels"] = await channel_plans(
                services, settings, contexts, questions[:PLANNED]
            )
            total = total_per_user(samples[-1], a.users) / 1024
            say(a.quiet, f"[{retention}] {done}/{a.turns} turns per user, day {day:.0f}: "
                f"{total:.0f} KiB per user ({time.perf_counter() - started:.0f} s)")  # fmt: skip
        if memory.failures:
            raise RuntimeError(f"{memory.failures} memory runs failed")
        machine = await machine_info(env.database_url)
    reads = {"start": samples[0]["read_path_ms"], "end": samples[-1]["read_path_ms"]}
    return {"retention": retention, "samples": samples, "read_path_ms": reads, "machine": machine}


def per_user_per_1k(run: dict[str, Any], users: int) -> dict[str, dict[str, float]]:
    """Bytes per user per 1,000 turns at the last measurement, per store and group."""
    last = run["samples"][-1]
    scale = users * last["turns_per_user"] / 1000
    return {
        store: {k: round(v / scale) for k, v in sorted(last[store].items())}
        for store in ("redis", "postgres", "postgres_disk")
    }


def total_per_user(sample: dict[str, Any], users: int) -> float:
    """All Redis and Postgres bytes of one measurement, per user."""
    return (sum(sample["redis"].values()) + sum(sample["postgres"].values())) / users


def plot(data: dict[str, Any], plt: Any) -> Any:
    """Bytes per user, and the read path with its parts, against turns, per retention."""
    fig, (size, read) = plt.subplots(1, 2, figsize=(12, 4.4))
    for run in data["runs"]:
        x = [s["turns_per_user"] for s in run["samples"]]
        y = [total_per_user(s, data["users"]) / 2**20 for s in run["samples"]]
        size.plot(x, y, "o-", label=f"retention {run['retention']}")
    size.set(title="Redis + Postgres rows per user", xlabel="turns per user", ylabel="MiB")
    size.legend()
    run = data["runs"][0]
    x = [s["turns_per_user"] for s in run["samples"]]
    reads = [s["read_path_ms"] for s in run["samples"]]
    read.plot(x, [r["p50"] for r in reads], "o-", label="read path (retrieve)")
    for part in reads[0]["parts_p50"]:
        read.plot(x, [r["parts_p50"][part] for r in reads], ".--", label=part)
    read.set(title=f"read path p50, retention {run['retention']}", xlabel="turns per user",
             ylabel="ms", ylim=(0, None))  # fmt: skip
    read.legend()
    return fig


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Both runs (retention on, then off); writes ``growth.json`` and ``growth.png``."""
    if min(a.users, a.turns, a.every, a.session_turns, a.queries) < 1:
        raise ValueError("users, turns, every, session_turns and queries must be >= 1")
    if not 0 <= a.days_per_pass < float("inf"):  # NaN too
        raise ValueError(f"days_per_pass must be a number of days >= 0, got {a.days_per_pass!r}")
    runs = [await run_one(retention, a) for retention in RETENTIONS]
    data = {
        "users": a.users,
        "turns": a.turns,
        "every": a.every,
        "session_turns": a.session_turns,
        "days_per_pass": a.days_per_pass,
        "runs": runs,
        "per_user_per_1k_turns": {r["retention"]: per_user_per_1k(r, a.users) for r in runs},
        "machine": [r.pop("machine") for r in runs][-1],
    }
    write_results(a.out, "growth", data, plot, show=() if a.quiet else ("growth-table",))
    return data


COMMON = ("out", "seed", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.growth` beside ``--out`` and ``--seed``."""
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--turns", type=int, default=3000, help="turns per user")
    p.add_argument("--every", type=int, default=250, help="turns per user between passes")
    p.add_argument("--session-turns", type=int, default=50, help="turns per thread")
    p.add_argument("--days-per-pass", type=float, default=DAYS_PER_PASS,
                   help="simulated days before each maintenance pass (0: none)")  # fmt: skip
    p.add_argument("--queries", type=int, default=50, help="read-path questions per probe")
    p.add_argument("--keep", action="store_true", help="keep the databases (for EXPLAIN)")


if __name__ == "__main__":
    raise SystemExit(main("growth"))
