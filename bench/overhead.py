"""Per-turn overhead of the memory graph vs the same agent without memory.

    python -m bench overhead [--sizes 1000,10000,100000] [--turns 200] [--out bench/out]

Per size (ascending): the benchmark user's memories and other users' are seeded
(`bench.seeding`: ``COPY``, vectors per ``--vectors``, the HNSW index rebuilt after the
load, timed); the exact recall SQL is explained (`bench.sql`: the custom plan analysed and
the generic plan of a prepared statement); ``MemoryStore.search`` is timed on pre-embedded
queries (what the peers report); then the full memory graph (memory inline) and the
respond-only graph take turns, interleaved with alternating order, on an instant fake
model. Nodes are timed by callbacks (`bench.timing.NodeTimer`), the embedding and store
calls on the live instances (`bench.timing.instrument`), and the fake model times its own
calls; "excluding embedding" figures subtract what recall waited for the query embedding
(``embed_wait``) and the summary embeddings (and, in the second, the fake model's calls).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from bench.content import user_question
from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model
from bench.harness import main, ms_stats, say, write_results
from bench.overhead_report import (
    PEERS_SEARCH_P50_MS,
    plot_overhead,
    summarize_baseline,
    summarize_full,
)
from bench.seeding import VectorSource, embed_batched, seed_size
from bench.sql import explain_recall, prepared_recall_plans
from bench.timing import (
    TurnRecord,
    build_baseline_graph,
    build_timed_graph,
    instrument,
    timed_turn,
)
from graph.context import Context
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings


async def _checkpointer(kind: str, database_url: str, stack: Any) -> Any:
    if kind == "none":
        return None
    if kind == "memory":
        return InMemorySaver()
    if kind == "postgres":
        return await stack.enter_async_context(open_checkpointer(database_url))
    raise ValueError(f"checkpointer must be none|memory|postgres, got {kind!r}")


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run with the parsed flags; write ``overhead.json`` / ``overhead.png`` under ``--out``.

    Without ``--database-url`` a fresh database and key prefix are created on the
    embedded (or ``REDIS_URL``/``DATABASE_URL``) servers and dropped at the end; with
    them (e.g. pytest's ``memory_env``) they are used and left in place.
    """
    sizes, out = sorted(set(a.sizes)), Path(a.out)
    rng = random.Random(a.seed)
    tag = uuid.uuid4().hex[:8]
    bench_user = f"bench-{tag}"
    others = [f"other-{i}-{tag}" for i in range(a.other_users)]
    anchor = datetime.now(UTC) - timedelta(days=1)

    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            isolated_services(a.database_url, a.redis_url, a.key_prefix, tag="bench_overhead")
        )
        say(
            a.quiet,
            f"[overhead] database {env.database_url.split('?')[0]}, prefix {env.key_prefix}",
        )
        # opened after the environment points at the run's database; closed before it is
        # dropped (the stack unwinds in reverse). Opening creates the memory tables.
        services = await stack.enter_async_context(services_session(EMBEDDING))
        info = await machine_info(env.database_url)
        stack.enter_context(instrument(services))
        source = VectorSource(a.vectors, services.embeddings, rng, pool=a.pool)
        spec, _model = register_instant_model()
        saver = await _checkpointer(a.checkpointer, env.database_url, stack)
        settings = Settings.from_env().override(summary_mode=a.summary_mode)
        full_graph = build_timed_graph(services, saver, settings=settings)
        base_graph = build_baseline_graph(saver, settings)
        questions = [user_question(rng) for _ in range(max(a.search_queries, 1))]
        t0 = time.perf_counter()
        query_vecs = (await embed_batched(services.embeddings, questions)).tolist()
        query_batch_s = time.perf_counter() - t0

        results: list[dict[str, Any]] = []
        seeded = 0
        for size_index, size in enumerate(sizes):
            if size > seeded or size_index == 0:
                seeding, index = await seed_size(
                    env.database_url,
                    bench_user,
                    seeded,
                    size,
                    others if size_index == 0 else [],
                    a.per_other_user,
                    source,
                    anchor,
                    a.maintenance_work_mem,
                    say=lambda m: say(a.quiet, f"[overhead] {m}"),
                )
                seeded = size
            else:
                seeding, index = {}, {}
            seeding["vectors"] = a.vectors

            ctx = Context(user_id=bench_user, model=spec)
            explain = await explain_recall(services, bench_user, query_vecs[0], settings.recall.k)

            # search only, pre-embedded queries (what the peers' numbers measure)
            for v in query_vecs[: min(10, len(query_vecs))]:  # warm caches
                await services.memories.search(
                    bench_user, v, settings.recall.k, settings.recall.min_similarity
                )
            search_s, hits = [], []
            for v in query_vecs[: a.search_queries]:
                start = time.perf_counter()
                found = await services.memories.search(
                    bench_user, v, settings.recall.k, settings.recall.min_similarity
                )
                search_s.append(time.perf_counter() - start)
                hits.append(len(found))

            say(a.quiet, f"[overhead] size {size}: {a.warmup} warm-up + {a.turns} turns per graph")
            full_thread = f"full-{size}-{tag}"
            rotate = max(1, settings.window.size // 2)
            full_recs: list[tuple[TurnRecord, float]] = []
            base_recs: list[tuple[TurnRecord, float]] = []
            for i in range(a.warmup + a.turns):
                text = user_question(rng)
                base_thread = f"base-{size}-{i // rotate}-{tag}"
                order = ("base", "full") if i % 2 == 0 else ("full", "base")
                for which in order:
                    if which == "full":
                        r = (await timed_turn(full_graph, ctx, full_thread, text))[:2]
                        if i >= a.warmup:
                            full_recs.append(r)
                    else:
                        r = (await timed_turn(base_graph, ctx, base_thread, text))[:2]
                        if i >= a.warmup:
                            base_recs.append(r)
            counts = await services.memories.count(bench_user)
            prepared = await prepared_recall_plans(services)
            load = list(os.getloadavg())
            full = summarize_full(full_recs)
            base = summarize_baseline(base_recs)
            results.append(
                {
                    "size": size,
                    "bench_user_memories": counts,
                    "other_users": len(others),
                    "other_memories": len(others) * a.per_other_user,
                    "seeding": seeding,
                    "index": index,
                    "explain": explain,
                    "prepared_recall_plans": prepared,
                    "loadavg_after": load,
                    "search_only_pre_embedded": ms_stats(search_s),
                    "search_only_mean_hits": round(sum(hits) / len(hits), 2) if hits else None,
                    "full": full,
                    "baseline": base,
                    "difference_ms": {
                        k: round(full["turn"][k] - base["turn"][k], 3)
                        for k in ("p50", "p95", "mean")
                    },
                }
            )
            turn = results[-1]["full"]["turn"]
            say(a.quiet, f"[overhead] size {size}: turn p50 {turn['p50']} ms, p95 {turn['p95']} ms")

        data = {
            "benchmark": "overhead",
            "machine": info,
            "config": {
                "sizes": sizes,
                "turns": a.turns,
                "warmup": a.warmup,
                "other_users": a.other_users,
                "per_other_user": a.per_other_user,
                "vectors": a.vectors,
                "pool": a.pool,
                "search_queries": a.search_queries,
                "summary_mode": a.summary_mode,
                "checkpointer": a.checkpointer,
                "embedding_model": EMBEDDING,
                "chat_model": "InstantChatModel (bench.fake_model)",
                "seed": a.seed,
                "context": {
                    k: settings.by_name()[k]
                    for k in (
                        "window_size",
                        "summary_batch",
                        "reflect_after",
                        "recall_k",
                        "min_similarity",
                        "memory_token_budget",
                    )
                },
                "timing": "nodes timed by callbacks (bench.timing.NodeTimer); "
                "embeddings/search/touch/add wrapped on the live instances",
            },
            "query_embedding_batch": {"texts": len(questions), "seconds": round(query_batch_s, 3)},
            "seed_vectors": {
                "mode": a.vectors,
                "texts_embedded": source.embedded_texts,
                "embed_s": round(source.embed_seconds, 3),
            },
            "peers_search_p50_ms": PEERS_SEARCH_P50_MS,
            "sizes": results,
        }
    write_results(out, "overhead", data, plot_overhead, show=("overhead-table",))
    say(a.quiet, f"[overhead] wrote {out / 'overhead.json'} and {out / 'overhead.png'}")
    return data


COMMON = ("out", "seed", "seeded", "vectors", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.overhead` beside the common ones."""
    p.add_argument("--turns", type=int, default=200, help="measured turns per graph and size")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured turns per size")
    p.add_argument(
        "--search-queries", type=int, default=200, help="pre-embedded search-only queries per size"
    )
    p.add_argument(
        "--summary-mode",
        choices=("llm", "raw"),
        default="llm",
        help="Context.summary_mode ('llm' calls the instant fake model)",
    )
    p.add_argument(
        "--checkpointer",
        choices=("memory", "postgres", "none"),
        default="memory",
        help="checkpointer of both graphs",
    )


if __name__ == "__main__":
    raise SystemExit(main("overhead"))
