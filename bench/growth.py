"""Growth: what each user's storage costs as conversations go on, retention on and off.

    python -m bench.growth [--users 20] [--turns 3000] [--every 250] [--out bench/out]

Each user talks through the compiled graph (`graph.builder.build_graph` with a
`LocalScheduler` and the Postgres checkpointer, the instant fake model of
`bench.fake_model`), starting a new thread every ``--session-turns`` turns as a returning
user does; users take turns round-robin. Every ``--every`` turns per user, memory is
drained and the ``maintenance`` graph runs for all users (checkpoint retention through
`memory_graph_agent.storage.checkpoints.SaverCheckpoints`), then storage is measured:
Redis bytes by key kind (``MEMORY USAGE``) and Postgres bytes per table group: the live
rows' bytes, and the tables' size on disk with indexes and TOAST after a plain VACUUM
(autovacuum's job in production; files keep deleted rows' space, new rows reuse it).
The whole run is made twice, in two fresh databases: ``checkpoint_retention="keep_latest"``
and ``"off"``.

Reported: bytes per user per 1,000 turns at the end, per store and table group; the growth
curve (bytes per user against turns per user) of each run; and p50/p95 of the read path
(`retrieve`, the recall node's search, embedding included) on ``--queries`` questions at
the first and the last measurement. Wall-clock time is not simulated: memories keep their
``ttl_policy`` expiry and ``evict_after_days`` age, so decay does not remove any here;
what flattens is what retention bounds.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from psycopg import sql

from bench.content import memory_text, user_question
from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model
from bench.stats import bench_parser, ms_stats, pyplot, quiet_logs, write_outputs
from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from graph.maintenance import build_maintenance_graph
from memory_graph_agent.recall.retrieval import retrieve
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.storage.checkpoints import SaverCheckpoints

GROUPS = {
    "checkpoints": ("checkpoint",),
    "memories": ("memories_",),
    "episodes": ("episodes",),
    "episode_index": ("episode_vectors_",),
    "decisions": ("memory_decisions",),
}
"""Postgres table groups by name prefix; anything else counts as ``other``."""
RETENTIONS = ("keep_latest", "off")


def _group(table: str) -> str:
    for group, prefixes in GROUPS.items():
        if table.startswith(prefixes):
            return group
    return "other"


async def storage_bytes(services: Any, database_url: str) -> dict[str, dict[str, int]]:
    """Redis bytes by key kind; Postgres bytes by table group, live rows and on disk.

    ``postgres`` is the rows' own bytes (``pg_column_size``): what the data takes.
    ``postgres_disk`` is ``pg_total_relation_size`` (indexes and TOAST included) after a
    plain ``VACUUM``, which autovacuum would have run within a minute of the pass: the space
    of deleted rows stays in the files but new rows reuse it.
    """
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


async def read_path(services: Any, contexts: list[Context], n: int, rng: random.Random) -> dict:
    """p50/p95 (ms) of `retrieve` on ``n`` questions spread over the users."""
    seconds = []
    for i in range(n):
        ctx = contexts[i % len(contexts)]
        question = user_question(rng)
        started = time.perf_counter()
        await retrieve(services, ctx, question, "growth-probe", touch=False)
        seconds.append(time.perf_counter() - started)
    return ms_stats(seconds)


def _text(rng: random.Random) -> str:
    return user_question(rng) if rng.random() < 0.3 else memory_text(rng)


async def run_one(
    retention: str,
    users: int,
    turns: int,
    every: int,
    session_turns: int,
    queries: int,
    seed: int,
    quiet: bool,
) -> dict[str, Any]:
    """One whole simulation in a fresh database, with ``checkpoint_retention=retention``."""
    rng = random.Random(seed)
    async with (
        isolated_services(tag="growth") as env,
        services_session(EMBEDDING) as services,
        open_checkpointer(env.database_url) as saver,
    ):
        spec, _ = register_instant_model()
        memory = LocalScheduler()
        agent = memory.bind(build_graph(services, saver, scheduler=memory))
        maintenance = build_maintenance_graph(services, SaverCheckpoints(saver))
        contexts = [
            Context(
                user_id=f"growth-u{u:03d}",
                model=spec,
                memory_delay_s=0,
                checkpoint_retention=retention,
            )
            for u in range(users)
        ]
        samples, reads, started = [], {}, time.perf_counter()
        for done in range(1, turns + 1):
            for ctx in contexts:
                thread = f"{ctx.user_id}-s{(done - 1) // session_turns}"
                config = {"configurable": {"thread_id": thread}}
                await agent.ainvoke({"messages": [HumanMessage(_text(rng))]}, config, context=ctx)
            if done % every and done != turns:
                continue
            await memory.drain()
            await maintenance.ainvoke({"all_users": True}, context=contexts[0])
            sizes = await storage_bytes(services, env.database_url)
            samples.append({"turns_per_user": done, **sizes})
            reads.setdefault("start", await read_path(services, contexts, queries, rng))
            if not quiet:
                total = sum(sizes["redis"].values()) + sum(sizes["postgres"].values())
                print(
                    f"[{retention}] {done}/{turns} turns per user: {total / users / 1024:.0f} "
                    f"KiB per user ({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        reads["end"] = await read_path(services, contexts, queries, rng)
        if memory.failures:
            raise RuntimeError(f"{memory.failures} memory runs failed")
        machine = await machine_info(env.database_url)
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


def print_growth(data: dict[str, Any]) -> None:
    """The table of bytes per user per 1,000 turns, and the read path at start and end."""
    users = data["users"]
    print(f"growth: {users} users x {data['turns']} turns, maintenance every {data['every']}")
    for run in data["runs"]:
        rate = per_user_per_1k(run, users)
        print(f"\ncheckpoint_retention={run['retention']}: bytes per user per 1,000 turns")
        for store, groups in rate.items():
            cells = ", ".join(f"{k} {v:,}" for k, v in groups.items())
            print(f"  {store}: {cells}")
        first, last = run["samples"][0], run["samples"][-1]
        print(
            f"  total per user: {total_per_user(first, users) / 1024:,.0f} KiB after "
            f"{first['turns_per_user']} turns, {total_per_user(last, users) / 1024:,.0f} KiB "
            f"after {last['turns_per_user']}"
        )
        for when, s in run["read_path_ms"].items():
            print(f"  read path at the {when}: p50 {s['p50']} ms, p95 {s['p95']} ms")


def plot(data: dict[str, Any], path: Path) -> None:
    """Bytes per user against turns per user: all storage, and the checkpoints alone."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    users = data["users"]
    for run in data["runs"]:
        x = [s["turns_per_user"] for s in run["samples"]]
        label = f"retention {run['retention']}"
        axes[0].plot(
            x, [total_per_user(s, users) / 2**20 for s in run["samples"]], "o-", label=label
        )
        checkpoints = [s["postgres"].get("checkpoints", 0) / users / 2**20 for s in run["samples"]]
        axes[1].plot(x, checkpoints, "o-", label=label)
    titles = ("Redis + Postgres rows per user", "checkpoint rows per user")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("turns per user")
        ax.set_ylabel("MiB")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def run_growth(
    users: int,
    turns: int,
    every: int,
    out: str | Path,
    *,
    session_turns: int = 50,
    queries: int = 50,
    seed: int = 7,
    quiet: bool = False,
) -> dict[str, Any]:
    """Both runs (retention on, then off); writes ``growth.json`` and ``growth.png``."""
    if min(users, turns, every, session_turns, queries) < 1:
        raise ValueError("users, turns, every, session_turns and queries must be >= 1")
    runs = []
    for retention in RETENTIONS:
        runs.append(
            await run_one(retention, users, turns, every, session_turns, queries, seed, quiet)
        )
    data = {
        "users": users,
        "turns": turns,
        "every": every,
        "session_turns": session_turns,
        "runs": runs,
        "per_user_per_1k_turns": {r["retention"]: per_user_per_1k(r, users) for r in runs},
        "machine": runs[-1].pop("machine"),
    }
    runs[0].pop("machine")
    write_outputs(Path(out), "growth", data, plot)
    if not quiet:
        print_growth(data)
    return data


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run."""
    p = bench_parser("python -m bench.growth", __doc__)
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--turns", type=int, default=3000, help="turns per user")
    p.add_argument("--every", type=int, default=250, help="turns per user between passes")
    p.add_argument("--session-turns", type=int, default=50, help="turns per thread")
    p.add_argument("--queries", type=int, default=50, help="read-path questions per probe")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default="bench/out", help="output folder (JSON + PNG)")
    quiet_logs()
    asyncio.run(run_growth(**vars(p.parse_args(argv))))  # the flags are its parameters
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
