"""LangGraph's own cost on a turn's read path: the shipped graph with stand-in nodes.

    python -m bench graph_floor [--turns 200] [--window 20] [--items 23] [--out bench/out]

`build_builder`'s graph (its state, edges and routing) with every node a stand-in that does
no work (`stand_ins`): what is left is what LangGraph and the checkpointer cost a turn
before the model is called. `VARIANTS` take turns, each on its own thread, the order
rotated; reported: ms from ``ainvoke`` to the start of ``respond``, and the whole run.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph

from bench.env import EMBEDDING, isolated_services, machine_info
from bench.harness import bars, main, ms_stats, say, write_results
from graph.builder import build_builder
from graph.context import Context
from memory_graph_agent.services.stores import open_checkpointer, services_session
from memory_graph_agent.settings import Settings

VARIANTS = (
    ("postgres, durability async", "postgres", "async"),
    ("postgres, durability exit", "postgres", "exit"),
    ("postgres, durability sync", "postgres", "sync"),
    ("in-memory saver", "memory", "async"),
)
"""(label, checkpointer, durability); ``async`` is LangGraph's default."""
QUESTION = "What books has Melanie read since she moved to Lisbon? "
PROFILE = {
    "name": {"value": "Ann", "importance": 0.9, "pinned": True},
    "city": {"value": "Lisbon", "importance": 0.7, "pinned": False},
}
_RESPOND_AT: ContextVar[list[float] | None] = ContextVar("graph_floor_respond", default=None)


def recalled_items(n: int) -> list[dict[str, Any]]:
    """``n`` items shaped like `recall`'s (text, provenance, score parts)."""
    text = "Melanie: I finished another novel about the sea last week, " * 2
    return [
        {"id": f"turn:{i}", "kind": "episode", "text": text, "source_ids": [f"m{i}"],
         "created_at": "2026-11-01T10:00:00+00:00", "similarity": 0.61, "keyword_score": 0.2,
         "dense_rank": i, "keyword_rank": i + 1, "rrf": 0.031, "relevance": 0.8, "recency": 0.4,
         "importance": 0.5, "score": 0.62, "tokens": 30}
        for i in range(n)
    ]  # fmt: skip


def stand_ins(builder: StateGraph, items: int, window: int) -> StateGraph:
    """``builder`` (`build_builder`'s) with each node but ``tools`` a stand-in doing no work."""
    recalled = recalled_items(items)

    def stand_in(name: str) -> Callable:
        async def run(state, runtime):  # noqa: ANN001, ANN202 - the node's signature
            if name == "load_profile":
                return {"profile": PROFILE}
            if name == "recall":
                return {"recalled": recalled}
            if name == "respond":
                marks = _RESPOND_AT.get()
                if marks is not None and not marks:
                    marks.append(time.perf_counter())
                return {"messages": [AIMessage("An answer. " * 20, id=uuid.uuid4().hex)]}
            if name == "trim_window":
                old = state["messages"][:-window]
                return {"messages": [RemoveMessage(id=m.id) for m in old]} if old else {}
            raise RuntimeError(f"graph_floor: {name} is not on a turn's path")

        return run

    for name in [n for n in builder.nodes if n != "tools"]:
        del builder.nodes[name]  # the shipped edges and routing stay, to the same names
        builder.add_node(name, stand_in(name))
    return builder


async def _turn(graph: Any, ctx: Context, thread: str, durability: str) -> tuple[float, float]:
    """One turn: seconds to ``respond``'s start, and of the whole run."""
    marks: list[float] = []
    token = _RESPOND_AT.set(marks)
    try:
        start = time.perf_counter()
        await graph.ainvoke(
            {"messages": [HumanMessage(QUESTION, id=uuid.uuid4().hex)]},
            {"configurable": {"thread_id": thread}},
            context=ctx,
            durability=durability,
        )
        run = time.perf_counter() - start
    finally:
        _RESPOND_AT.reset(token)
    return marks[0] - start, run


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; write ``graph_floor.json`` / ``graph_floor.png`` under ``--out``.

    ``--warmup`` unmeasured turns per variant first fill each thread's window.
    """
    if min(a.turns, a.window, a.warmup + 1) < 1 or a.items < 0:
        raise SystemExit("--turns and --window must be >= 1, --warmup and --items >= 0")
    tag = uuid.uuid4().hex[:8]
    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            isolated_services(a.database_url, a.redis_url, a.key_prefix, tag="bench_graph_floor")
        )
        services = await stack.enter_async_context(services_session(EMBEDDING))
        info = await machine_info(env.database_url)
        saver = await stack.enter_async_context(open_checkpointer(env.database_url))
        savers = {"postgres": saver, "memory": InMemorySaver()}
        builder = stand_ins(build_builder(services, Settings.from_env()), a.items, a.window)
        graphs = {kind: builder.compile(checkpointer=s) for kind, s in savers.items()}
        ctx = Context(user_id=f"floor-{tag}")
        samples: dict[str, list[tuple[float, float]]] = {label: [] for label, *_ in VARIANTS}
        for i in range(a.warmup + a.turns):
            shift = i % len(VARIANTS)
            for label, kind, durability in VARIANTS[shift:] + VARIANTS[:shift]:
                thread = f"floor-{tag}-{kind}-{durability}"
                timing = await _turn(graphs[kind], ctx, thread, durability)
                if i >= a.warmup:
                    samples[label].append(timing)
    variants = [
        {"label": label, "checkpointer": kind, "durability": durability,
         "to_respond": ms_stats([t for t, _ in samples[label]]),
         "run": ms_stats([r for _, r in samples[label]])}
        for label, kind, durability in VARIANTS
    ]  # fmt: skip
    config = {"turns": a.turns, "warmup": a.warmup, "window": a.window, "items": a.items}
    data = {"benchmark": "graph_floor", "machine": info, "config": config, "variants": variants}
    show = () if a.quiet else ("graph-floor-table",)
    paths = write_results(a.out, "graph_floor", data, plot_graph_floor, show=show)
    say(a.quiet, f"wrote {paths[0]} and {paths[1]}")
    return data


def plot_graph_floor(data: dict[str, Any], plt: Any) -> Any:
    """Bars: p50 and p95 to ``respond``'s start, per variant."""
    fig, ax = plt.subplots(figsize=(8, 4))
    variants = data["variants"]
    bars(ax, [v["label"] for v in variants], [v["to_respond"] for v in variants], rotation=15)
    ax.set_ylabel("ms from ainvoke to respond")
    ax.set_title("LangGraph's own cost on the read path (stand-in nodes)")
    return fig


COMMON = ("out", "database", "redis", "quiet")


def flags(p: argparse.ArgumentParser) -> None:
    """The flags of `bench.graph_floor` beside ``--out``."""
    p.add_argument("--turns", type=int, default=200, help="measured turns per variant")
    p.add_argument("--window", type=int, default=20, help="messages each thread keeps")
    p.add_argument("--items", type=int, default=23, help="recalled items written per turn")
    p.add_argument("--warmup", type=int, default=15, help="unmeasured turns per variant")


if __name__ == "__main__":
    raise SystemExit(main("graph_floor"))
