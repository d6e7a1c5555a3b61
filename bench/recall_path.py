"""Recall after the query embedding: where `retrieve` spends its time, per phase.

    python -m bench.recall_path [--sizes 1000,10000,100000] [--queries 200] [--out bench/out]

Per size N (ascending), the benchmark user holds N memories (and the raw turns of its
newest summaries, up to 50,000) among other users' (``--other-users`` x
``--per-other-user``), seeded exactly as `bench.overhead` does (`bench.seeding`: COPY,
pooled MiniLM vectors plus noise, HNSW rebuilt). The questions are embedded once, up
front, and the embeddings `retrieve` sees return them at once (a filled
`bench.locomo_pipeline.QueryCache`), so every number here is the path after the
embedding: the searches, the links, fusion, scoring, token counting and the budget.
Three passes over the same questions:

1. **timed**: `retrieve` end to end, nothing wrapped (p50/p95 of the whole path);
2. **phases**: the store calls and the ranking steps wrapped with timers on the live
   objects (each phase's p50/p95; concurrent store calls overlap, so their sum is more
   than the wall time);
3. **profile**: `cProfile` over a batch of `retrieve` calls, the top functions by
   cumulative and own time.

``--database-url`` reuses a database (seeded by an earlier run with ``--keep``, for
example): the benchmark user is topped up only to the sizes asked for, so two code
versions can be timed in turns on the very same rows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import io
import os
import pstats
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.content import user_question
from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import main, ms_stats, write_results
from bench.locomo_pipeline import QueryCache
from bench.seeding import VectorSource, embed_batched, seed_size
from graph.context import Context
from memory_graph_agent.recall import linking, ranking, retrieval
from memory_graph_agent.services.stores import services_session
from memory_graph_agent.settings import Settings

STORE_CALLS = (
    ("memories", "search"),
    ("episodes", "dense_search"),
    ("episodes", "keyword_search"),
    ("episodes", "recall_search"),
    ("episodes", "turns"),
    ("episodes", "neighbours"),
    ("episodes", "linked"),
    ("window", "window"),
)
"""(services attribute, method) timed in the phases pass, when the code has them."""
RANKING_STEPS = (
    (retrieval, "search_channels"),
    (retrieval, "fuse"),
    (retrieval, "score"),
    (retrieval, "with_tokens"),
    (retrieval, "linked_turns"),
    (retrieval, "fill_budget"),
    (retrieval, "prompt_order"),
    (linking, "link_turns"),
    (ranking, "rrf"),
)
"""(module, function) timed in the phases pass, when the code has them."""


PHASES: dict[str, list[float]] = {}


def _timed(fn: Callable, name: str) -> Callable:
    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                PHASES.setdefault(name, []).append(time.perf_counter() - start)

        return awrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            PHASES.setdefault(name, []).append(time.perf_counter() - start)

    return wrapper


@contextlib.contextmanager
def phase_timers(services: Any) -> Iterator[None]:
    """Wrap the store calls (on the live objects) and the ranking steps with timers."""
    undo: list[Callable[[], None]] = []
    for attr, method in STORE_CALLS:
        obj = getattr(services, attr)
        if hasattr(obj, method):
            object.__setattr__(obj, method, _timed(getattr(obj, method), f"{attr}.{method}"))
            undo.append(functools.partial(object.__delattr__, obj, method))
    for module, name in RANKING_STEPS:
        if hasattr(module, name):
            original = getattr(module, name)
            setattr(module, name, _timed(original, name))
            undo.append(functools.partial(setattr, module, name, original))
    try:
        yield
    finally:
        for restore in reversed(undo):
            restore()


def _profile_top(profile: cProfile.Profile, sort: str, n: int = 25) -> list[str]:
    buf = io.StringIO()
    pstats.Stats(profile, stream=buf).strip_dirs().sort_stats(sort).print_stats(n)
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return [line for line in lines[start:] if line.strip()]


async def _retrieve(services: Any, settings: Settings, ctx: Context, text: str) -> Any:
    return await retrieval.retrieve(services, settings, ctx, text, "bench-thread", touch=False)


async def measure(
    services: Any, settings: Settings, ctx: Context, questions: list[str], profile_queries: int
) -> dict[str, Any]:
    """The three passes over ``questions`` (after a warm-up of 10)."""
    for text in questions[:10]:
        await _retrieve(services, settings, ctx, text)
    total, kept, candidates = [], [], []
    for text in questions:
        start = time.perf_counter()
        found = await _retrieve(services, settings, ctx, text)
        total.append(time.perf_counter() - start)
        kept.append(len(found.items))
        candidates.append(found.candidates)
    PHASES.clear()
    with phase_timers(services):
        for text in questions:
            await _retrieve(services, settings, ctx, text)
    phases = {name: ms_stats(values) for name, values in sorted(PHASES.items())}
    profile = cProfile.Profile()
    profile.enable()
    for text in questions[:profile_queries]:
        await _retrieve(services, settings, ctx, text)
    profile.disable()
    return {
        "retrieve_after_embedding": ms_stats(total),
        "mean_items": round(sum(kept) / len(kept), 2),
        "mean_candidates": round(sum(candidates) / len(candidates), 2),
        "phases": phases,
        "profile_queries": min(profile_queries, len(questions)),
        "profile_cumulative": _profile_top(profile, "cumulative"),
        "profile_own_time": _profile_top(profile, "tottime"),
    }


def plot(data: dict[str, Any], plt: Any) -> Any:
    """p50 and p95 of `retrieve` after the embedding, per size."""
    rows = data["sizes"]
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["size"] for r in rows]
    for key, style in (("p50", "o-"), ("p95", "s--")):
        ax.plot(xs, [r["retrieve_after_embedding"][key] for r in rows], style, label=key)
    ax.set_xscale("log")
    ax.set_xlabel("memories of the user")
    ax.set_ylabel("ms")
    ax.set_title("recall after the query embedding")
    ax.legend()
    ax.grid(alpha=0.3)
    return fig


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Seed, measure each size, write ``recall_path.json`` / ``.png`` under ``--out``."""
    sizes = sorted(set(a.sizes))
    rng = random.Random(a.seed)
    others = [f"{a.user}-other-{i}" for i in range(a.other_users)]
    anchor = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(days=1)
    say: Callable[[str], None] = (
        (lambda _m: None)
        if a.quiet
        else (lambda m: print(f"[recall_path] {m}", file=sys.stderr, flush=True))
    )
    results = []
    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            isolated_services(a.database_url, tag="bench_recall_path")
        )
        services = await stack.enter_async_context(services_session(EMBEDDING))
        info = await machine_info(env.database_url)
        source = VectorSource("perturbed", services.embeddings, rng, pool=a.pool)
        questions = [user_question(rng) for _ in range(a.queries)]
        vectors = (await embed_batched(services.embeddings, questions)).tolist()
        lookup = QueryCache(services.embeddings)
        lookup.vectors.update(zip(questions, vectors, strict=True))
        fast = replace(services, embeddings=lookup)
        have = sum((await services.memories.count(a.user)).values())
        first = have == 0
        for size in sizes:
            if size > have:
                seeding, _index = await seed_size(
                    env.database_url,
                    a.user,
                    have,
                    size,
                    others if first else [],
                    a.per_other_user,
                    source,
                    anchor,
                    say=say,
                )
                have, first = size, False
            ctx, settings = Context(user_id=a.user), Settings.from_env()
            turns = await services.db.query(
                'SELECT count(*) AS n FROM "episode_vectors_384" WHERE user_id = :u', {"u": a.user}
            )
            say(f"size {size}: {a.queries} queries x 3 passes")
            row = {
                "size": size,
                "bench_user_memories": have,
                "bench_user_turns": int(turns[0]["n"]),
                **await measure(fast, settings, ctx, questions, a.profile_queries),
                "loadavg_after": list(os.getloadavg()),
            }
            results.append(row)
    data = {
        "benchmark": "recall_path",
        "machine": info,
        "config": {
            "sizes": sizes,
            "queries": a.queries,
            "other_users": a.other_users,
            "per_other_user": a.per_other_user,
            "vectors": "perturbed",
            "pool": a.pool,
            "seed": a.seed,
            "embedding_model": EMBEDDING,
            "context": {
                k: Settings.from_env().by_name()[k]
                for k in (
                    "recall_k",
                    "min_similarity",
                    "memory_token_budget",
                    "recall_candidate_tokens",
                    "neighbour_weight",
                    "summary_turn_weight",
                    "recall_rrf_k",
                    "topic_weight",
                )
            },
        },
        "sizes": results,
    }
    show = () if a.quiet else ("recall-path-table",)
    json_path, _png = write_results(a.out, "recall_path", data, plot, dpi=120, show=show)
    say(f"wrote {json_path}")
    return data


COMMON = ("out", "seed", "seeded", "database", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.recall_path` beside the common ones."""
    p.add_argument("--queries", type=int, default=200, help="questions per size and pass")
    p.add_argument("--profile-queries", type=int, default=50)
    p.add_argument("--user", default="bench-recall", help="the benchmark user's id")


if __name__ == "__main__":
    raise SystemExit(main("recall_path"))
