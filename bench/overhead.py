"""Per-turn overhead of the memory graph vs the same agent without memory.

    python -m bench.overhead [--sizes 1000,10000,100000] [--turns 200] [--out bench/out]

What runs, per size N (ascending):

1. The benchmark user gets N stored memories (10 summaries then a reflection, repeated,
   with provenance and timestamps), other users get ``--other-users`` x
   ``--per-other-user`` (9 x 1000 by default: at N=1000 that is the peers' setup, 10k
   memories over 10 users; at N=100000 the table holds 109k rows). Rows are generated,
   vectors made per ``--vectors`` (default ``perturbed``: a pool of texts embedded with
   MiniLM in batches, each row a pooled embedding plus noise; ``real`` embeds every
   row in batches; ``random``), and bulk-loaded with ``COPY`` into ``memories_384``
   with every metadata column and ``stored_at``. The HNSW index is dropped before the
   load and rebuilt after it (timed), then ``VACUUM ANALYZE``.
2. ``EXPLAIN`` of the exact recall SQL (captured from SQLAlchemy) with its ``SET LOCAL``
   options: custom plan (EXPLAIN ANALYZE) and the generic plan of a prepared statement.
3. Search only: ``MemoryStore.search`` with pre-embedded queries (what the peers report).
4. Turns: the full memory graph and the respond-only graph, interleaved turn by turn
   (same question, alternating order, so load from other processes hits both alike),
   with an instant fake chat model and local MiniLM embeddings.

Per-node timing: the benchmark graph is built from the project's node functions, each
wrapped by `bench._common.timed_node` (``functools.wraps`` keeps the node name and the
``(state, runtime)`` signature LangGraph inspects), with the edges and routing functions
of ``graph/builder.py`` (checked at start-up against `build_builder`). Inside the nodes,
``embeddings.aembed_query`` / ``aembed_documents`` and ``MemoryStore.search`` / ``touch``
/ ``add`` / ``summaries_since_reflection`` are wrapped on the live instances, and the fake
model times its own calls, so recall = embedding + search + touch + the rest, and
"memory work excluding embedding" = the memory nodes (everything but respond) minus the
query and summary embeddings (and, in the second figure, minus the fake model's calls).

Everything is written under a fresh database and Redis key prefix, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from bench._common import (
    CURRENT_TURN,
    EMBEDDING,
    PEERS_SEARCH_P50_MS,
    TurnRecord,
    VectorSource,
    build_hnsw,
    connect_services,
    drop_hnsw,
    embed_batched,
    explain_recall,
    fmt,
    instrument,
    isolated_services,
    machine_info,
    ms_stats,
    parse_ints,
    prepared_recall_plans,
    pyplot,
    quiet_logs,
    register_instant_model,
    seed_user,
    timed_node,
    user_question,
    write_json,
)
from graph.builder import build_builder
from graph.context import Context
from graph.routing import (
    route_after_consolidate,
    route_after_load_profile,
    route_after_respond,
    route_after_summarize,
    route_after_trim,
)
from graph.state import InputState, State
from graph.tools import build_tool_node
from nodes.consolidate import consolidate
from nodes.load_profile import load_profile
from nodes.recall import recall
from nodes.reflect import reflect
from nodes.respond import respond
from nodes.summarize import summarize
from nodes.trim_window import trim_window

MEMORY_NODES = ("load_profile", "recall", "trim_window", "summarize", "consolidate", "reflect")
ALL_NODES = (
    "load_profile",
    "recall",
    "respond",
    "trim_window",
    "summarize",
    "consolidate",
    "reflect",
)
HOT_PATH = ("load_profile", "recall")
POST_RESPONSE = ("trim_window", "summarize", "consolidate", "reflect")


# ----------------------------------------------------------------------------- graphs


def _topology(builder: StateGraph) -> tuple:
    return (
        sorted(builder.nodes),
        sorted(builder.edges),
        sorted((src, sorted(branches)) for src, branches in builder.branches.items()),
    )


def build_timed_graph(checkpointer: Any = None) -> Any:
    """The project's graph with every node wrapped by `timed_node` (same edges/routing)."""
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    for node in (load_profile, recall, respond, trim_window, summarize, consolidate, reflect):
        builder.add_node(timed_node(node))
    builder.add_node("tools", build_tool_node())  # never runs: the bench model has no tools
    builder.add_edge(START, "load_profile")
    builder.add_conditional_edges("load_profile", route_after_load_profile)
    builder.add_edge("recall", "respond")
    builder.add_conditional_edges("respond", route_after_respond)
    builder.add_edge("tools", "respond")
    builder.add_conditional_edges("trim_window", route_after_trim)
    builder.add_conditional_edges("summarize", route_after_summarize)
    builder.add_conditional_edges("consolidate", route_after_consolidate)
    builder.add_edge("reflect", END)
    if _topology(builder) != _topology(build_builder()):
        raise RuntimeError(
            "bench/overhead.py's timed graph no longer matches graph/builder.py; "
            "update build_timed_graph"
        )
    return builder.compile(checkpointer=checkpointer, name="memory_agent_timed")


def build_baseline_graph(checkpointer: Any = None) -> Any:
    """Memory bypassed: the project's `respond` node alone."""
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    builder.add_node(timed_node(respond))
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=checkpointer, name="respond_only")


# ---------------------------------------------------------------------- turn metrics


def full_turn_metrics(rec: TurnRecord, turn_s: float) -> dict[str, float]:
    """Derived per-turn numbers (seconds) of one full-graph turn."""
    nodes = rec.nodes
    memory = sum(nodes.get(n, 0.0) for n in MEMORY_NODES)
    embed_q = rec.total("embed_query")
    embed_d = rec.total("embed_documents")
    model_mem = rec.total_prefix("model:", exclude=("model:respond",))
    hot = sum(nodes.get(n, 0.0) for n in HOT_PATH)
    return {
        "turn": turn_s,
        "memory": memory,
        "memory_excl_embedding": memory - embed_q - embed_d,
        "memory_excl_embedding_and_model": memory - embed_q - embed_d - model_mem,
        "hot_path": hot,
        "hot_path_excl_embedding": hot - embed_q,
        "post_response": sum(nodes.get(n, 0.0) for n in POST_RESPONSE),
        "graph_overhead": turn_s - sum(nodes.values()),
        "recall_excl_embedding": nodes.get("recall", 0.0) - embed_q,
        "embed_query": embed_q,
        "embed_documents": embed_d,
        "model_in_memory_nodes": model_mem,
    }


def summarize_full(records: list[tuple[TurnRecord, float]]) -> dict[str, Any]:
    """p50/p95/... of the full graph per derived metric, per node and per timed call."""
    per_turn = [full_turn_metrics(r, t) for r, t in records]
    n = len(records)
    out: dict[str, Any] = {k: ms_stats([m[k] for m in per_turn]) for k in per_turn[0]}
    nodes = {}
    for name in ALL_NODES:
        vals = [r.nodes[name] for r, _ in records if name in r.nodes]
        nodes[name] = {
            **ms_stats(vals),
            "ran_in_turns": len(vals),
            "mean_per_turn": round(1000 * sum(vals) / n, 3),
        }
    out["nodes"] = nodes
    parts: dict[str, list[float]] = {}
    for r, _ in records:
        for k, v in r.parts.items():
            parts.setdefault(k, []).extend(v)
    out["calls"] = {
        k: {**ms_stats(v), "mean_per_turn": round(1000 * sum(v) / n, 3)}
        for k, v in sorted(parts.items())
    }
    return out


def summarize_baseline(records: list[tuple[TurnRecord, float]]) -> dict[str, Any]:
    """p50/p95/... of the respond-only graph."""
    return {
        "turn": ms_stats([t for _, t in records]),
        "respond": ms_stats([r.nodes.get("respond", 0.0) for r, _ in records]),
        "graph_overhead": ms_stats([t - sum(r.nodes.values()) for r, t in records]),
    }


# -------------------------------------------------------------------------------- run


async def _turn(graph: Any, ctx: Context, thread: str, text: str) -> tuple[TurnRecord, float]:
    rec = TurnRecord()
    token = CURRENT_TURN.set(rec)
    try:
        start = time.perf_counter()
        await graph.ainvoke(
            {"messages": [HumanMessage(text)]},
            {"configurable": {"thread_id": thread}},
            context=ctx,
        )
        return rec, time.perf_counter() - start
    finally:
        CURRENT_TURN.reset(token)


async def _checkpointer(kind: str, database_url: str, stack: Any) -> Any:
    if kind == "none":
        return None
    if kind == "memory":
        return InMemorySaver()
    if kind == "postgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(database_url))
        await saver.setup()
        return saver
    raise ValueError(f"checkpointer must be none|memory|postgres, got {kind!r}")


def _say(quiet: bool, *args: Any) -> None:
    if not quiet:
        print(*args, file=sys.stderr, flush=True)


async def run_overhead(
    sizes: list[int] | tuple[int, ...] = (1000, 10000, 100000),
    turns: int = 200,
    out: str | Path = "bench/out",
    *,
    warmup: int = 5,
    other_users: int = 9,
    per_other_user: int = 1000,
    vectors: str = "perturbed",
    pool: int = 2048,
    search_queries: int = 200,
    summary_mode: str = "llm",
    checkpointer: str = "memory",
    maintenance_work_mem: str = "1GB",
    seed: int = 7,
    database_url: str | None = None,
    redis_url: str | None = None,
    key_prefix: str | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run the overhead benchmark; write ``overhead.json`` / ``overhead.png`` under ``out``.

    Without ``database_url`` a fresh database and key prefix are created on the
    embedded (or ``REDIS_URL``/``DATABASE_URL``) servers and dropped at the end; with
    them (e.g. pytest's ``memory_env``) they are used and left in place.
    """
    import contextlib

    sizes = sorted(set(sizes))
    out = Path(out)
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:8]
    bench_user = f"bench-{tag}"
    others = [f"other-{i}-{tag}" for i in range(other_users)]
    anchor = datetime.now(UTC) - timedelta(days=1)

    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            isolated_services(database_url, redis_url, key_prefix, tag="bench_overhead")
        )
        _say(
            quiet, f"[overhead] database {env.database_url.split('?')[0]}, prefix {env.key_prefix}"
        )
        services = await connect_services(env)  # creates the table and the vector extension
        info = await machine_info(env.database_url)
        stack.enter_context(instrument(services))
        source = VectorSource(vectors, services.embeddings, rng, pool=pool)
        spec, _model = register_instant_model()
        saver = await _checkpointer(checkpointer, env.database_url, stack)
        full_graph = build_timed_graph(saver)
        base_graph = build_baseline_graph(saver)
        questions = [user_question(rng) for _ in range(max(search_queries, 1))]
        t0 = time.perf_counter()
        query_vecs = (await embed_batched(services.embeddings, questions)).tolist()
        query_batch_s = time.perf_counter() - t0

        results: list[dict[str, Any]] = []
        seeded = 0
        for size_index, size in enumerate(sizes):
            seeding: dict[str, Any] = {
                "bench_user_rows": 0,
                "other_rows": 0,
                "vector_s": 0.0,
                "copy_s": 0.0,
            }
            if size > seeded or size_index == 0:
                await drop_hnsw(env.database_url)
                try:
                    if size > seeded:
                        _say(quiet, f"[overhead] seeding {size - seeded} memories for {bench_user}")
                        st = await seed_user(
                            env.database_url, bench_user, seeded, size, source, anchor
                        )
                        seeding["bench_user_rows"] = st["rows"]
                        seeding["vector_s"] += st["embed_s"]
                        seeding["copy_s"] += st["copy_s"]
                        seeded = size
                    if size_index == 0 and others:
                        _say(
                            quiet,
                            f"[overhead] seeding {len(others)} other users x "
                            f"{per_other_user} memories",
                        )
                        for other in others:
                            st = await seed_user(
                                env.database_url, other, 0, per_other_user, source, anchor
                            )
                            seeding["other_rows"] += st["rows"]
                            seeding["vector_s"] += st["embed_s"]
                            seeding["copy_s"] += st["copy_s"]
                except BaseException:  # never leave the table without its index
                    await build_hnsw(env.database_url, maintenance_work_mem)
                    raise
                _say(quiet, "[overhead] building the HNSW index")
                index = await build_hnsw(env.database_url, maintenance_work_mem)
            else:
                index = {}
            seeding = {k: round(v, 3) if isinstance(v, float) else v for k, v in seeding.items()}
            seeding["vectors"] = vectors

            ctx = Context(
                user_id=bench_user, model=spec, embedding_model=EMBEDDING, summary_mode=summary_mode
            )
            explain = await explain_recall(
                services, env.database_url, bench_user, query_vecs[0], ctx.recall_k
            )

            # search only, pre-embedded queries (what the peers' numbers measure)
            for v in query_vecs[: min(10, len(query_vecs))]:  # warm caches
                await services.memories.search(bench_user, v, ctx.recall_k, ctx.min_similarity)
            search_s, hits = [], []
            for v in query_vecs[:search_queries]:
                start = time.perf_counter()
                found = await services.memories.search(
                    bench_user, v, ctx.recall_k, ctx.min_similarity
                )
                search_s.append(time.perf_counter() - start)
                hits.append(len(found))

            _say(quiet, f"[overhead] size {size}: {warmup} warm-up + {turns} turns per graph")
            full_thread = f"full-{size}-{tag}"
            rotate = max(1, ctx.window_size // 2)
            full_recs: list[tuple[TurnRecord, float]] = []
            base_recs: list[tuple[TurnRecord, float]] = []
            for i in range(warmup + turns):
                text = user_question(rng)
                base_thread = f"base-{size}-{i // rotate}-{tag}"
                order = ("base", "full") if i % 2 == 0 else ("full", "base")
                for which in order:
                    if which == "full":
                        r = await _turn(full_graph, ctx, full_thread, text)
                        if i >= warmup:
                            full_recs.append(r)
                    else:
                        r = await _turn(base_graph, ctx, base_thread, text)
                        if i >= warmup:
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
                    "other_memories": len(others) * per_other_user,
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
            print_size(results[-1])

        data = {
            "benchmark": "overhead",
            "machine": info,
            "config": {
                "sizes": sizes,
                "turns": turns,
                "warmup": warmup,
                "other_users": other_users,
                "per_other_user": per_other_user,
                "vectors": vectors,
                "pool": pool,
                "search_queries": search_queries,
                "summary_mode": summary_mode,
                "checkpointer": checkpointer,
                "embedding_model": EMBEDDING,
                "chat_model": "InstantChatModel (bench._common)",
                "seed": seed,
                "context": {
                    k: getattr(ctx, k)
                    for k in (
                        "window_size",
                        "summary_batch",
                        "reflect_after",
                        "recall_k",
                        "min_similarity",
                        "memory_token_budget",
                    )
                },
                "timing": "nodes wrapped with functools.wraps (bench._common.timed_node); "
                "embeddings/search/touch/add wrapped on the live instances",
            },
            "query_embedding_batch": {"texts": len(questions), "seconds": round(query_batch_s, 3)},
            "seed_vectors": {
                "mode": vectors,
                "texts_embedded": source.embedded_texts,
                "embed_s": round(source.embed_seconds, 3),
            },
            "peers_search_p50_ms": PEERS_SEARCH_P50_MS,
            "sizes": results,
        }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "overhead.json", data)
    plot_overhead(data, out / "overhead.png")
    print_summary(data)
    _say(quiet, f"[overhead] wrote {out / 'overhead.json'} and {out / 'overhead.png'}")
    return data


# ----------------------------------------------------------------------------- output


def print_size(r: dict[str, Any]) -> None:
    """The per-size table (milliseconds)."""
    full, base = r["full"], r["baseline"]
    ex = r["explain"]
    custom = ex.get("custom_plan", {})
    generic = ex.get("generic_plan", {})
    idx = r["index"]
    total = r["bench_user_memories"]
    print(
        f"\n== {r['size']} memories for the benchmark user ({total}), "
        f"{r['other_memories']} for {r['other_users']} other users =="
    )
    if idx:
        print(
            f"HNSW build {idx['build_s']:.2f} s over {idx['table_rows']} rows "
            f"({idx['index_mb']} MB), VACUUM ANALYZE {idx['vacuum_analyze_s']:.2f} s; "
            f"seeding: vectors {r['seeding']['vector_s']:.1f} s, "
            f"COPY {r['seeding']['copy_s']:.1f} s"
        )
    print(
        f"recall query plan: HNSW {'used' if custom.get('uses_hnsw') else 'NOT used'} "
        f"({', '.join(custom.get('indexes') or ['no index'])}; "
        f"exec {fmt(custom.get('execution_ms'))} ms); generic plan: HNSW "
        f"{'used' if generic.get('uses_hnsw') else 'NOT used'}"
    )
    prep = r.get("prepared_recall_plans") or {}
    if prep.get("prepared_recall_statements"):
        print(
            f"recall as prepared statement: {prep['custom_plan_executions']} custom-plan, "
            f"{prep['generic_plan_executions']} generic-plan executions"
        )
    elif prep:
        print(
            "recall SQL never prepared (its filter parameter name changes on every call), "
            f"so it is planned every time: planning {fmt(custom.get('planning_ms'))} ms"
        )
    print(f"load average after the turns: {', '.join(f'{x:.2f}' for x in r['loadavg_after'])}")
    rows = [
        ("turn, full memory graph", full["turn"]),
        ("turn, respond only", base["turn"]),
        ("  load_profile", full["nodes"]["load_profile"]),
        ("  recall", full["nodes"]["recall"]),
        ("    query embedding", full["embed_query"]),
        ("    (MiniLM compute, all embeds)", full["calls"].get("embed_compute", {})),
        ("    search (pgvector)", full["calls"].get("search", {})),
        ("    touch", full["calls"].get("touch", {})),
        ("    recall excl. embedding", full["recall_excl_embedding"]),
        ("  respond", full["nodes"]["respond"]),
        ("  trim_window", full["nodes"]["trim_window"]),
        ("  summarize", full["nodes"]["summarize"]),
        ("  consolidate", full["nodes"]["consolidate"]),
        ("    summary embedding", full["calls"].get("embed_documents", {})),
        ("  reflect", full["nodes"]["reflect"]),
        ("  graph/checkpoint overhead", full["graph_overhead"]),
        ("memory work (all but respond)", full["memory"]),
        ("memory work excl. embedding", full["memory_excl_embedding"]),
        ("  ... and excl. fake model calls", full["memory_excl_embedding_and_model"]),
        ("hot path excl. embedding", full["hot_path_excl_embedding"]),
        ("search only, pre-embedded", r["search_only_pre_embedded"]),
    ]
    print(f"{'(ms)':34} {'p50':>8} {'p95':>8} {'mean':>8} {'n':>5}")
    for label, s in rows:
        if not s:
            continue
        ran = ""
        name = label.strip()
        if name in full["nodes"] and full["nodes"][name]["ran_in_turns"] != full["turn"]["n"]:
            ran = f"  (ran in {full['nodes'][name]['ran_in_turns']} turns, "
            ran += f"{full['nodes'][name]['mean_per_turn']:.2f} ms/turn amortized)"
        print(
            f"{label:34} {fmt(s.get('p50')):>8} {fmt(s.get('p95')):>8} "
            f"{fmt(s.get('mean')):>8} {s.get('n', 0):>5}{ran}"
        )
    d = r["difference_ms"]
    print(
        f"{'difference full - respond only':34} {fmt(d['p50']):>8} {fmt(d['p95']):>8} "
        f"{fmt(d['mean']):>8}"
    )


def print_summary(data: dict[str, Any]) -> None:
    """Growth with size and the comparison with the peers' search."""
    peers = ", ".join(f"{k} {v} ms" for k, v in PEERS_SEARCH_P50_MS.items())
    print(f"\n== summary (ms; peers' search-only p50: {peers}) ==")
    print(
        f"{'size':>8} {'rows':>8} {'search p50':>11} {'p95':>7} {'in-graph p50':>13} "
        f"{'p95':>7} {'emb q p50':>10} {'mem-emb p50':>12} {'p95':>7} {'mean':>7} "
        f"{'diff p50':>9} {'HNSW':>5}"
    )
    for r in data["sizes"]:
        f = r["full"]
        s = r["search_only_pre_embedded"]
        g = f["calls"].get("search", {})
        m = f["memory_excl_embedding"]
        print(
            f"{r['size']:>8} {r['index'].get('table_rows', '-'):>8} {fmt(s['p50']):>11} "
            f"{fmt(s['p95']):>7} {fmt(g.get('p50')):>13} {fmt(g.get('p95')):>7} "
            f"{fmt(f['embed_query']['p50']):>10} {fmt(m['p50']):>12} {fmt(m['p95']):>7} "
            f"{fmt(m['mean']):>7} {fmt(r['difference_ms']['p50']):>9} "
            f"{'yes' if r['explain'].get('custom_plan', {}).get('uses_hnsw') else 'no':>5}"
        )


def plot_overhead(data: dict[str, Any], path: Path) -> None:
    """Four panels: per-node time, turn latency, search growth, memory work vs peers."""
    plt = pyplot()
    rs = data["sizes"]
    sizes = [r["size"] for r in rs]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))

    ax = axes[0][0]
    labels = [f"{s:,}" for s in sizes] + ["respond only"]
    bottom = [0.0] * len(labels)
    parts = [
        ("load_profile", None),
        ("recall: embedding", "embed_query"),
        ("recall: rest", "recall_rest"),
        ("respond", None),
        ("trim_window", None),
        ("summarize", None),
        ("consolidate", None),
        ("reflect", None),
        ("graph/checkpoint", "graph_overhead"),
    ]
    for label, key in parts:
        vals = []
        for r in rs:
            f = r["full"]
            if key == "embed_query":
                vals.append(f["embed_query"]["mean"] or 0)
            elif key == "recall_rest":
                vals.append(f["recall_excl_embedding"]["mean"] or 0)
            elif key == "graph_overhead":
                vals.append(f["graph_overhead"]["mean"] or 0)
            else:
                vals.append(f["nodes"][label]["mean_per_turn"])
        b = rs[-1]["baseline"]
        vals.append(
            b["respond"]["mean"] or 0
            if label == "respond"
            else (b["graph_overhead"]["mean"] or 0 if key == "graph_overhead" else 0)
        )
        ax.bar(labels, vals, bottom=bottom, label=label)
        bottom = [x + y for x, y in zip(bottom, vals, strict=True)]
    ax.set_ylabel("mean ms per turn (amortized)")
    ax.set_title("Where a turn's time goes (memories of the benchmark user)")
    ax.legend(fontsize=7)

    ax = axes[0][1]
    for key, label, style in (
        ("full", "full memory graph", "o-"),
        ("baseline", "respond only", "s--"),
    ):
        ax.plot(sizes, [r[key]["turn"]["p50"] for r in rs], style, label=f"{label} p50")
        ax.plot(sizes, [r[key]["turn"]["p95"] for r in rs], style, alpha=0.5, label=f"{label} p95")
    ax.plot(sizes, [r["full"]["embed_query"]["p50"] for r in rs], "^:", label="query embedding p50")
    ax.set_xscale("log")
    ax.set_xlabel("stored memories of the benchmark user")
    ax.set_ylabel("ms")
    ax.set_title("Per-turn latency")
    ax.legend(fontsize=7)

    ax = axes[1][0]
    s50 = [r["search_only_pre_embedded"]["p50"] for r in rs]
    s95 = [r["search_only_pre_embedded"]["p95"] for r in rs]
    g50 = [r["full"]["calls"].get("search", {}).get("p50") for r in rs]
    g95 = [r["full"]["calls"].get("search", {}).get("p95") for r in rs]
    ax.plot(sizes, s50, "o-", label="search only (pre-embedded) p50")
    ax.plot(sizes, s95, "o--", label="search only p95")
    ax.plot(sizes, g50, "s-", label="in-graph recall search p50")
    ax.plot(sizes, g95, "s--", label="in-graph recall search p95")
    for (name, v), c in zip(PEERS_SEARCH_P50_MS.items(), ("grey", "silver", "black"), strict=True):
        ax.axhline(v, color=c, ls=":", lw=1, label=f"{name} search p50 ({v} ms)")
    ax.set_xscale("log")
    ax.set_xlabel("stored memories of the benchmark user")
    ax.set_ylabel("ms")
    ax.set_title("Recall search vs size")
    ax.legend(fontsize=7)

    ax = axes[1][1]
    for key, label in (
        ("memory_excl_embedding", "memory work excl. embedding"),
        ("memory_excl_embedding_and_model", "... and excl. fake model"),
        ("hot_path_excl_embedding", "hot path (profile+recall) excl. emb."),
    ):
        ax.plot(sizes, [r["full"][key]["p50"] for r in rs], "o-", label=f"{label} p50")
        ax.plot(sizes, [r["full"][key]["p95"] for r in rs], "o--", alpha=0.5, label=f"{label} p95")
    for (name, v), c in zip(PEERS_SEARCH_P50_MS.items(), ("grey", "silver", "black"), strict=True):
        ax.axhline(v, color=c, ls=":", lw=1, label=f"{name} search p50")
    ax.set_xscale("log")
    ax.set_xlabel("stored memories of the benchmark user")
    ax.set_ylabel("ms per turn")
    ax.set_title("Our memory work per turn (no embedding) vs peers' search alone")
    ax.legend(fontsize=7)

    m = data["machine"]
    fig.suptitle(
        f"memory graph overhead: {m['cpu_model']}, {m['cores']} cores, "
        f"Python {m['python']}, pgvector {m['pgvector']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run."""
    p = argparse.ArgumentParser(
        prog="python -m bench.overhead",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--sizes",
        default="1000,10000,100000",
        help="stored memories of the benchmark user, comma-separated (1k, 1e5 ok)",
    )
    p.add_argument("--turns", type=int, default=200, help="measured turns per graph and size")
    p.add_argument("--out", default="bench/out", help="output folder (JSON + PNG)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured turns per size")
    p.add_argument("--other-users", type=int, default=9)
    p.add_argument("--per-other-user", type=int, default=1000, help="memories of each other user")
    p.add_argument(
        "--vectors",
        choices=("perturbed", "real", "random"),
        default="perturbed",
        help="seeded vectors: pooled MiniLM embeddings + noise, every row "
        "embedded, or random unit vectors",
    )
    p.add_argument(
        "--pool", type=int, default=2048, help="texts embedded for --vectors perturbed/random"
    )
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
    p.add_argument(
        "--maintenance-work-mem", default="1GB", help="session setting for the HNSW build"
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--database-url",
        default=None,
        help="use this database as is (default: a fresh one, dropped afterwards)",
    )
    p.add_argument("--redis-url", default=None)
    p.add_argument("--key-prefix", default=None)
    a = p.parse_args(argv)
    quiet_logs()
    asyncio.run(
        run_overhead(
            parse_ints(a.sizes),
            a.turns,
            a.out,
            warmup=a.warmup,
            other_users=a.other_users,
            per_other_user=a.per_other_user,
            vectors=a.vectors,
            pool=a.pool,
            search_queries=a.search_queries,
            summary_mode=a.summary_mode,
            checkpointer=a.checkpointer,
            maintenance_work_mem=a.maintenance_work_mem,
            seed=a.seed,
            database_url=a.database_url,
            redis_url=a.redis_url,
            key_prefix=a.key_prefix,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
