"""Throughput of concurrent conversations through the compiled memory graph.

    python -m bench.throughput [--concurrency 1,10,50] [--turns 100] [--out bench/out]

For each concurrency level C, C conversations (each its own user and thread) run their
``--turns`` turns at the same time through ``graph.builder.build_graph`` compiled with
the Postgres checkpointer (``AsyncPostgresSaver`` on a psycopg connection pool, as a
server would run it; ``--checkpointer memory`` for ``InMemorySaver``), an instant fake
chat model and local MiniLM embeddings, on a fresh database and Redis key prefix
(dropped afterwards). Memory forms in background runs (`graph.background`), as shipped;
``--memory-mode inline`` forms it inside each turn's run. Reported per level: turns/s
(all turns / wall time, including the drain of the background runs), p50/p95/p99 turn
latency (the turn's run), the query-embedding call time (it includes waiting for the
embedding lock/thread pool, where concurrent turns queue) and errors.

After each level (and the drain) every conversation is checked: each message that left
its window is in exactly one summary's ``source_ids`` or still pending (0 lost/duplicated).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
import uuid
from pathlib import Path
from typing import Any

from bench.content import user_question
from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model
from bench.harness import main, ms_stats, parse_ints, say, write_results
from bench.timing import TurnRecord, instrument, timed_turn
from bench.verify import verify_conversation
from graph.background import LocalScheduler
from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.services.stores import services_session
from memory_graph_agent.settings import Settings

VERIFY_KEYS = (
    "pushed",
    "left_window",
    "summarized",
    "pending",
    "summaries",
    "lost",
    "duplicated",
    "foreign",
)


async def _open_checkpointer(
    kind: str, database_url: str, pool_size: int, stack: contextlib.AsyncExitStack
) -> Any:
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    if kind != "postgres":
        raise ValueError(f"checkpointer must be postgres|memory, got {kind!r}")
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        conninfo=database_url,
        min_size=1,
        max_size=pool_size,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=False,
    )
    await pool.open()
    stack.push_async_callback(pool.close)
    saver = AsyncPostgresSaver(conn=pool)
    await saver.setup()
    return saver


async def _conversation(
    agent: Any,
    ctx: Context,
    thread: str,
    turns: int,
    rng: random.Random,
    latencies: list[float],
    records: list[TurnRecord],
    errors: list[str],
) -> None:
    for t in range(turns):
        text = f"{user_question(rng)} (turn {t})"
        try:
            rec, seconds, _state = await timed_turn(agent, ctx, thread, text)
            latencies.append(seconds)
            records.append(rec)
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(f"{ctx.user_id}/{thread} turn {t}: {type(exc).__name__}: {exc}"[:300])


async def run(a: argparse.Namespace) -> bool:
    """Write ``throughput.json`` / ``.png``; true when no level lost, doubled or failed.

    ``--turns`` is per conversation. Without ``--database-url`` a fresh database and key
    prefix are used and dropped at the end; with them (pytest) they are used as is.
    """
    out = Path(a.out)
    tag = uuid.uuid4().hex[:8]
    levels: list[dict[str, Any]] = []
    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            isolated_services(a.database_url, a.redis_url, a.key_prefix, tag="bench_throughput")
        )
        say(
            a.quiet,
            f"[throughput] database {env.database_url.split('?')[0]}, prefix {env.key_prefix}",
        )
        # opened once the environment points at the run's database, closed before it is
        # dropped (the stack unwinds in reverse)
        services = await stack.enter_async_context(services_session(EMBEDDING))
        info = await machine_info(env.database_url)
        stack.enter_context(instrument(services))
        saver = await _open_checkpointer(a.checkpointer, env.database_url, a.pool_size, stack)
        memory = LocalScheduler()
        settings = Settings.from_env().override(
            summary_mode=a.summary_mode, memory_mode=a.memory_mode
        )
        graph = build_graph(services, checkpointer=saver, scheduler=memory, settings=settings)
        agent = memory.bind(graph)
        spec, _model = register_instant_model()

        def context(user: str) -> Context:
            return Context(user_id=user, model=spec)

        if a.warmup:
            say(a.quiet, f"[throughput] {a.warmup} warm-up turns")
            await _conversation(
                agent,
                context(f"warm-{tag}"),
                f"warm-{tag}",
                a.warmup,
                random.Random(a.seed),
                [],
                [],
                [],
            )

        for c in a.concurrency:
            say(a.quiet, f"[throughput] concurrency {c}: {c} conversations x {a.turns} turns")
            latencies: list[float] = []
            records: list[TurnRecord] = []
            errors: list[str] = []
            # thread ids must be unique across users: the checkpointer keys state by thread only
            convs = [(f"tp{c}-{i}-{tag}", f"t{c}-{i}-{tag}") for i in range(c)]
            start = time.perf_counter()
            await asyncio.gather(
                *(
                    _conversation(
                        agent,
                        context(user),
                        thread,
                        a.turns,
                        random.Random(f"{a.seed}:{c}:{i}"),
                        latencies,
                        records,
                        errors,
                    )
                    for i, (user, thread) in enumerate(convs)
                )
            )
            replies_done = time.perf_counter() - start
            await memory.drain()  # background memory runs finish before the check
            elapsed = time.perf_counter() - start
            checks = [await verify_conversation(services, u, t) for u, t in convs]
            verification = {k: sum(ch[k] for ch in checks) for k in VERIFY_KEYS}
            verification["conversations"] = len(checks)
            verification["ok"] = (
                verification["lost"] == 0
                and verification["duplicated"] == 0
                and verification["foreign"] == 0
            )
            embed = [x for r in records for x in r.parts.get("embed_query", ())]
            embed_docs = [x for r in records for x in r.parts.get("embed_documents", ())]
            compute = [x for r in records for x in r.parts.get("embed_compute", ())]
            level = {
                "concurrency": c,
                "turns": len(latencies),
                "turns_per_conversation": a.turns,
                "elapsed_s": round(elapsed, 3),
                "memory_drain_after_last_reply_s": round(elapsed - replies_done, 3),
                "memory_run_failures": memory.failures,
                "turns_per_s": round(len(latencies) / elapsed, 3) if elapsed else None,
                "latency": ms_stats(latencies),
                "embed_query_call": ms_stats(embed),
                "embed_documents_call": ms_stats(embed_docs),
                "embed_compute": ms_stats(compute),
                # share of the wall time MiniLM was computing (embeddings are serialized
                # by LocalEmbeddings' lock: close to 1.0 means embedding-bound)
                "embedding_busy_fraction": round(sum(compute) / elapsed, 3) if elapsed else None,
                "search_call": ms_stats([x for r in records for x in r.parts.get("search", ())]),
                "errors": len(errors),
                "error_samples": errors[:5],
                "verification": verification,
            }
            levels.append(level)
            say(a.quiet, f"[throughput] {level['concurrency']}: {level['turns_per_s']} turns/s")

        data = {
            "benchmark": "throughput",
            "machine": info,
            "config": {
                "concurrency": list(a.concurrency),
                "turns_per_conversation": a.turns,
                "checkpointer": a.checkpointer,
                "pool_size": a.pool_size,
                "summary_mode": a.summary_mode,
                "memory_mode": a.memory_mode,
                "warmup": a.warmup,
                "seed": a.seed,
                "embedding_model": EMBEDDING,
                "chat_model": "InstantChatModel (bench.fake_model)",
                "context": {
                    k: settings.by_name()[k]
                    for k in ("window_size", "summary_batch", "reflect_after", "recall_k")
                },
            },
            "levels": levels,
        }
    write_results(out, "throughput", data, plot_throughput, show=("throughput-table",))
    say(a.quiet, f"[throughput] wrote {out / 'throughput.json'} and {out / 'throughput.png'}")
    return all(lv["verification"]["ok"] and not lv["errors"] for lv in levels)


def plot_throughput(data: dict[str, Any], plt: Any) -> Any:
    """turns/s (bars) and p50/p95 turn latency (lines) per concurrency level."""
    lv = data["levels"]
    labels = [str(x["concurrency"]) for x in lv]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.bar(
        labels, [x["turns_per_s"] or 0 for x in lv], color="tab:blue", alpha=0.7, label="turns/s"
    )
    ax.set_xlabel("concurrent conversations")
    ax.set_ylabel("turns/s", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(
        labels,
        [x["latency"]["p50"] for x in lv],
        "o-",
        color="tab:orange",
        label="p50 turn latency",
    )
    ax2.plot(
        labels, [x["latency"]["p95"] for x in lv], "s--", color="tab:red", label="p95 turn latency"
    )
    ax2.plot(
        labels,
        [x["embed_query_call"]["p95"] for x in lv],
        "^:",
        color="tab:green",
        label="p95 query-embedding call (incl. queueing)",
    )
    ax2.set_ylabel("ms")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
    m = data["machine"]
    ax.set_title(
        f"memory graph throughput ({data['config']['checkpointer']} checkpointer)\n"
        f"{m['cpu_model']}, {m['cores']} cores, Python {m['python']}, "
        f"pgvector {m['pgvector']}",
        fontsize=9,
    )
    return fig


COMMON = ("out", "seed", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.throughput` beside the common ones."""
    p.add_argument(
        "--concurrency",
        type=parse_ints,
        default="1,10,50",
        help="concurrent conversations per level, comma-separated",
    )
    p.add_argument("--turns", type=int, default=100, help="turns per conversation")
    p.add_argument("--checkpointer", choices=("postgres", "memory"), default="postgres")
    p.add_argument(
        "--pool-size",
        type=int,
        default=20,
        help="max connections of the checkpointer's psycopg pool",
    )
    p.add_argument("--summary-mode", choices=("llm", "raw"), default="llm")
    p.add_argument(
        "--memory-mode",
        choices=("background", "inline"),
        default="background",
        help="background: a turn's latency ends with its reply and trim_window (as shipped)",
    )
    p.add_argument("--warmup", type=int, default=3, help="unmeasured warm-up turns")


if __name__ == "__main__":
    raise SystemExit(main("throughput"))
