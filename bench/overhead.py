"""Per-turn overhead of the memory graph vs the same agent without memory.

    python -m bench overhead [--sizes 1000,10000,100000] [--turns 200] [--out bench/out]

Per size: memories seeded (`bench.seeding`), the recall SQL explained (`bench.sql`),
``MemoryStore.search`` timed on pre-embedded queries, then the full memory graph (memory
inline) and the respond-only graph take turns, alternating, on an instant fake model;
nodes and calls timed by `bench.timing`. "Excluding embedding" subtracts what recall waited
for the query embedding and the summary embeddings (and, further, the fake model's calls).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from bench.content import user_question
from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model
from bench.harness import main, ms_stats, say, write_results
from bench.seeding import VectorSource, embed_batched, seed_size
from bench.sql import explain_recall, prepared_recall_plans
from bench.timing import (
    TurnRecord,
    build_baseline_graph,
    build_timed_graph,
    instrument,
    on_path,
    timed_turn,
)  # fmt: skip
from graph.context import Context
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings

PEERS_SEARCH_P50_MS = {
    "LangGraph AsyncPostgresStore": 4.03,
    "Mem0": 57.67,
    "langchain-postgres PGVectorStore": 2.52,
}
"""Peers' search-only p50, pre-embedded, the user's 10k memories among 9k of others: measured
by `bench.peers` on the reference machine (``bench/results/peers.json``, 2026-11-23)."""
HOT_PATH = ("load_profile", "recall")
"""Side by side: the hot path takes the longer of the two."""
POST_RESPONSE = ("trim_window", "summarize", "consolidate", "reflect")
MEMORY_NODES = (*HOT_PATH, *POST_RESPONSE)
ALL_NODES = (*HOT_PATH, "respond", *POST_RESPONSE)
CONTEXT = ("window_size", "summary_batch", "reflect_after", "recall_k", "min_similarity",
           "memory_token_budget")  # fmt: skip
"""The settings recorded with the results."""


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run with the parsed flags; write ``overhead.json`` / ``overhead.png`` under ``--out``.

    Without ``--database-url`` a fresh database and key prefix are created and dropped at
    the end; with them (e.g. pytest's ``memory_env``) they are used and left in place.
    """
    sizes, rng, tag = sorted(set(a.sizes)), random.Random(a.seed), uuid.uuid4().hex[:8]
    bench_user, others = f"bench-{tag}", [f"other-{i}-{tag}" for i in range(a.other_users)]
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
        saver = {"none": None, "memory": InMemorySaver()}.get(a.checkpointer)
        if a.checkpointer == "postgres":
            saver = await stack.enter_async_context(open_checkpointer(env.database_url))
        settings = Settings.from_env().override(summary_mode=a.summary_mode)
        k, min_similarity = settings.recall.k, settings.recall.min_similarity
        graphs = {
            "full": build_timed_graph(services, saver, settings=settings),
            "base": build_baseline_graph(saver, settings),
        }
        questions = [user_question(rng) for _ in range(max(a.search_queries, 1))]
        t0 = time.perf_counter()
        query_vecs = (await embed_batched(services.embeddings, questions)).tolist()
        query_batch_s = time.perf_counter() - t0

        results: list[dict[str, Any]] = []
        seeded = 0
        for size_index, size in enumerate(sizes):
            seeding, index = {}, {}
            if size > seeded or size_index == 0:
                seeding, index = await seed_size(
                    env.database_url, bench_user, seeded, size,
                    others if size_index == 0 else [], a.per_other_user, source, anchor,
                    a.maintenance_work_mem, say=lambda m: say(a.quiet, f"[overhead] {m}"),
                )  # fmt: skip
                seeded = size
            seeding["vectors"] = a.vectors
            ctx = Context(user_id=bench_user, model=spec)
            explain = await explain_recall(services, bench_user, query_vecs[0], k)

            # search only, pre-embedded queries (what the peers' numbers measure)
            for v in query_vecs[: min(10, len(query_vecs))]:  # warm caches
                await services.memories.search(bench_user, v, k, min_similarity)
            search_s, hits = [], []
            for v in query_vecs[: a.search_queries]:
                start = time.perf_counter()
                hits.append(len(await services.memories.search(bench_user, v, k, min_similarity)))
                search_s.append(time.perf_counter() - start)

            say(a.quiet, f"[overhead] size {size}: {a.warmup} warm-up + {a.turns} turns per graph")
            rotate = max(1, settings.window.size // 2)
            recs: dict[str, list[tuple[TurnRecord, float]]] = {"full": [], "base": []}
            for i in range(a.warmup + a.turns):
                text = user_question(rng)
                threads = {"full": f"full-{size}-{tag}", "base": f"base-{size}-{i // rotate}-{tag}"}
                for which in ("base", "full") if i % 2 == 0 else ("full", "base"):
                    r = (await timed_turn(graphs[which], ctx, threads[which], text))[:2]
                    if i >= a.warmup:
                        recs[which].append(r)
            counts = await services.memories.count(bench_user)
            prepared = await prepared_recall_plans(services)
            full, base = summarize_full(recs["full"]), summarize_baseline(recs["base"])
            results.append({
                "size": size,
                "bench_user_memories": counts,
                "other_users": len(others),
                "other_memories": len(others) * a.per_other_user,
                "seeding": seeding,
                "index": index,
                "explain": explain,
                "prepared_recall_plans": prepared,
                "loadavg_after": list(os.getloadavg()),
                "search_only_pre_embedded": ms_stats(search_s),
                "search_only_mean_hits": round(sum(hits) / len(hits), 2) if hits else None,
                "full": full,
                "baseline": base,
                "difference_ms": {
                    q: round(full["turn"][q] - base["turn"][q], 3) for q in ("p50", "p95", "mean")
                },
            })  # fmt: skip
            turn = full["turn"]
            say(a.quiet, f"[overhead] size {size}: turn p50 {turn['p50']} ms, p95 {turn['p95']} ms")

        data = {
            "benchmark": "overhead",
            "machine": info,
            "config": {
                "sizes": sizes,
                **{key: getattr(a, key) for key in OPTIONS},
                "embedding_model": EMBEDDING,
                "chat_model": "InstantChatModel (bench.fake_model)",
                "seed": a.seed,
                "context": {key: settings.by_name()[key] for key in CONTEXT},
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
    write_results(a.out, "overhead", data, plot_overhead, show=("overhead-table",))
    say(a.quiet, f"[overhead] wrote {a.out}/overhead.json and {a.out}/overhead.png")
    return data


OPTIONS = ("turns", "warmup", "other_users", "per_other_user", "vectors", "pool",
           "search_queries", "summary_mode", "checkpointer")  # fmt: skip
"""Flags recorded in the results' ``config`` as they are."""


def full_turn_metrics(rec: TurnRecord, turn_s: float) -> dict[str, float]:
    """Derived per-turn numbers (seconds) of one full-graph turn."""
    nodes = rec.nodes
    # on the turn's path: load_profile and recall side by side count by the longer
    memory = on_path({n: nodes[n] for n in MEMORY_NODES if n in nodes})
    waited = rec.total("embed_wait")  # what of the query embedding the path waited for
    embed_d = rec.total("embed_documents")
    model_mem = rec.total_prefix("model:", exclude=("model:respond",))
    hot = max(nodes.get(n, 0.0) for n in HOT_PATH)  # side by side
    return {
        "turn": turn_s,
        "memory": memory,
        "memory_excl_embedding": memory - waited - embed_d,
        "memory_excl_embedding_and_model": memory - waited - embed_d - model_mem,
        "hot_path": hot,
        "hot_path_excl_embedding": hot - waited,
        "post_response": sum(nodes.get(n, 0.0) for n in POST_RESPONSE),
        "graph_overhead": turn_s - on_path(nodes),
        "recall_excl_embedding": nodes.get("recall", 0.0) - waited,
        "embed_query": rec.total("embed_query"),
        "embed_wait": waited,
        "embed_documents": embed_d,
        "model_in_memory_nodes": model_mem,
    }


def summarize_full(records: list[tuple[TurnRecord, float]]) -> dict[str, Any]:
    """p50/p95/... of the full graph per derived metric, per node and per timed call."""
    per_turn = [full_turn_metrics(r, t) for r, t in records]
    n = len(records)
    out: dict[str, Any] = {k: ms_stats([m[k] for m in per_turn]) for k in per_turn[0]}
    out["nodes"] = {}
    for name in ALL_NODES:
        vals = [r.nodes[name] for r, _ in records if name in r.nodes]
        out["nodes"][name] = {**ms_stats(vals), "ran_in_turns": len(vals),
                              "mean_per_turn": round(1000 * sum(vals) / n, 3)}  # fmt: skip
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


def plot_overhead(data: dict[str, Any], plt: Any) -> Any:
    """Four panels: per-node time, turn latency, search growth, memory work vs peers."""
    rs, m = data["sizes"], data["machine"]
    sizes = [r["size"] for r in rs]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax = axes[0][0]
    labels = [f"{s:,}" for s in sizes] + ["respond only"]
    bottom = [0.0] * len(labels)
    base = rs[-1]["baseline"]
    for label, key in (("load_profile", None), ("recall: embedding", "embed_query"),
                       ("recall: rest", "recall_excl_embedding"), ("respond", None),
                       ("trim_window", None), ("summarize", None), ("consolidate", None),
                       ("reflect", None), ("graph/checkpoint", "graph_overhead")):  # fmt: skip
        vals = [r["full"][key]["mean"] or 0 if key else r["full"]["nodes"][label]["mean_per_turn"]
                for r in rs]  # fmt: skip
        own = {"respond": "respond", "graph/checkpoint": "graph_overhead"}.get(label)
        vals.append(base[own]["mean"] or 0 if own else 0)
        ax.bar(labels, vals, bottom=bottom, label=label)
        bottom = [x + y for x, y in zip(bottom, vals, strict=True)]
    ax.set_ylabel("mean ms per turn (amortized)")
    ax.set_title("Where a turn's time goes (memories of the benchmark user)")

    def lines(ax: Any, title: str, series: list[tuple[list, str, str]], peers: bool) -> None:
        for ys, style, label in series:
            ax.plot(sizes, ys, style, label=label, alpha=0.5 if style.endswith("--") else 1)
        for (name, v), c in zip(PEERS_SEARCH_P50_MS.items(), ("grey", "silver", "black")):
            if peers:
                ax.axhline(v, color=c, ls=":", lw=1, label=f"{name} search p50 ({v} ms)")
        ax.set_xscale("log")
        ax.set_xlabel("stored memories of the benchmark user")
        ax.set_ylabel("ms")
        ax.set_title(title)

    def both(get: Any, marker: str, label: str) -> list[tuple[list, str, str]]:
        """The p50 (solid) and p95 (dashed) series of ``get(size's row)``."""
        return [([(get(r) or {}).get(p) for r in rs], f"{marker}{style}", f"{label} {p}")
                for p, style in (("p50", "-"), ("p95", "--"))]  # fmt: skip

    series = both(lambda r: r["full"]["turn"], "o", "full memory graph")
    series += both(lambda r: r["baseline"]["turn"], "s", "respond only")
    series += both(lambda r: r["full"]["embed_query"], "^", "query embedding")[:1]
    lines(axes[0][1], "Per-turn latency", series, False)
    series = both(lambda r: r["search_only_pre_embedded"], "o", "search only (pre-embedded)")
    series += both(lambda r: r["full"]["calls"].get("search"), "s", "in-graph recall search")
    lines(axes[1][0], "Recall search vs size", series, True)
    series = []
    for key, label in (
        ("memory_excl_embedding", "memory work excl. embedding"),
        ("memory_excl_embedding_and_model", "... and excl. fake model"),
        ("hot_path_excl_embedding", "hot path (profile+recall) excl. emb."),
    ):
        series += both(lambda r, k=key: r["full"][k], "o", label)
    title = "Our memory work per turn (no embedding) vs peers' search alone"
    lines(axes[1][1], title, series, True)
    for ax in axes.flat:
        ax.legend(fontsize=7)
    fig.suptitle(f"memory graph overhead: {m['cpu_model']}, {m['cores']} cores, "
                 f"Python {m['python']}, pgvector {m['pgvector']}", fontsize=10)  # fmt: skip
    return fig


COMMON = ("out", "seed", "seeded", "vectors", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.overhead` beside the common ones."""
    p.add_argument("--turns", type=int, default=200, help="measured turns per graph and size")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured turns per size")
    queries = "pre-embedded search-only queries per size"
    p.add_argument("--search-queries", type=int, default=200, help=queries)
    p.add_argument("--summary-mode", choices=("llm", "raw"), default="llm",
                   help="Context.summary_mode ('llm' calls the instant fake model)")  # fmt: skip
    p.add_argument("--checkpointer", choices=("memory", "postgres", "none"), default="memory",
                   help="checkpointer of both graphs")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main("overhead"))
