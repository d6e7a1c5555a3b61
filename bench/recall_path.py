"""Recall after the query embedding: where `retrieve` spends its time, per phase.

    python -m bench recall_path [--sizes 1000,10000,100000] [--queries 200] [--out bench/out]

Per size, memories seeded as `bench.overhead` seeds them; the questions are embedded up
front (a filled `QueryCache`), so every number is the path after the embedding. Three
passes: `retrieve` end to end; its store calls and ranking steps timed on the live objects
(concurrent calls overlap); and `cProfile`'s top functions. ``--database-url`` reuses a
database: the user is only topped up, so two code versions can be timed on the same rows.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import io
import os
import pstats
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.content import user_question
from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import main, ms_stats, say, write_results
from bench.locomo_pipeline import QueryCache
from bench.seeding import VectorSource, embed_batched, seed_size
from bench.timing import timer
from graph.context import Context
from memory_graph_agent.recall import linking, ranking, retrieval
from memory_graph_agent.services.stores import services_session
from memory_graph_agent.settings import Settings

STORE_CALLS = (("memories", "search"), ("episodes", "dense_search"), ("episodes", "keyword_search"),
               ("episodes", "recall_search"), ("episodes", "turns"), ("episodes", "neighbours"),
               ("episodes", "linked"), ("window", "window"))  # fmt: skip
"""(services attribute, method) timed in the phases pass, when the code has them."""
RANKING_STEPS = ((retrieval, "search_channels"), (retrieval, "fuse"), (retrieval, "score"),
                 (retrieval, "with_tokens"), (retrieval, "linked_turns"),
                 (retrieval, "fill_budget"), (retrieval, "prompt_order"),
                 (linking, "link_turns"), (ranking, "rrf"))  # fmt: skip
"""(module, function) timed in the phases pass, when the code has them."""
CONTEXT = ("recall_k", "min_similarity", "memory_token_budget", "recall_candidate_tokens",
           "neighbour_weight", "summary_turn_weight", "recall_rrf_k", "topic_weight")  # fmt: skip
"""The settings recorded with the results."""
PHASES: dict[str, list[float]] = {}


def _timed(fn: Callable, name: str) -> Callable:
    return timer(fn, lambda seconds: PHASES.setdefault(name, []).append(seconds))


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
    sizes, rng = sorted(set(a.sizes)), random.Random(a.seed)
    others = [f"{a.user}-other-{i}" for i in range(a.other_users)]
    anchor = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(days=1)

    def progress(message: str) -> None:
        say(a.quiet, f"[recall_path] {message}")

    results = []
    async with (
        isolated_services(a.database_url, tag="bench_recall_path") as env,
        services_session(EMBEDDING) as services,
    ):
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
                await seed_size(env.database_url, a.user, have, size, others if first else [],
                                a.per_other_user, source, anchor, say=progress)  # fmt: skip
                have, first = size, False
            ctx, settings = Context(user_id=a.user), Settings.from_env()
            turns = await services.db.query(
                'SELECT count(*) AS n FROM "episode_vectors_384" WHERE user_id = :u', {"u": a.user}
            )
            progress(f"size {size}: {a.queries} queries x 3 passes")
            results.append({
                "size": size,
                "bench_user_memories": have,
                "bench_user_turns": int(turns[0]["n"]),
                **await measure(fast, settings, ctx, questions, a.profile_queries),
                "loadavg_after": list(os.getloadavg()),
            })  # fmt: skip
    config = {"sizes": sizes, "queries": a.queries, "other_users": a.other_users,
              "per_other_user": a.per_other_user, "vectors": "perturbed", "pool": a.pool,
              "seed": a.seed, "embedding_model": EMBEDDING}  # fmt: skip
    config["context"] = {key: Settings.from_env().by_name()[key] for key in CONTEXT}
    data = {"benchmark": "recall_path", "machine": info, "config": config, "sizes": results}
    show = () if a.quiet else ("recall-path-table",)
    json_path, _png = write_results(a.out, "recall_path", data, plot, dpi=120, show=show)
    progress(f"wrote {json_path}")
    return data


COMMON = ("out", "seed", "seeded", "database", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.recall_path` beside the common ones."""
    p.add_argument("--queries", type=int, default=200, help="questions per size and pass")
    p.add_argument("--profile-queries", type=int, default=50)
    p.add_argument("--user", default="bench-recall", help="the benchmark user's id")


if __name__ == "__main__":
    raise SystemExit(main("recall_path"))
