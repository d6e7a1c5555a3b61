"""The memory graph of `bench.overhead` with every node timed, and its respond-only twin.

`build_timed_graph` is `graph.builder.build_builder` with each node wrapped by
`bench.timing.timed_node`, compiled as `graph.builder.build_graph` compiles it.
`build_baseline_graph` is the project's ``respond`` node
alone: memory bypassed.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph

from bench.timing import timed_node
from graph.builder import build_builder
from graph.context import Context
from graph.prefetch import as_memory_graph
from graph.state import InputState, State
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from nodes.respond import respond


def build_timed_graph(
    services: Services, checkpointer: Any = None, scheduler: Any = None, settings: Any = None
) -> Any:
    """`graph.builder.build_builder` with every node but ``tools`` timed by `timed_node`.

    The instant model never calls a tool, so ``tools`` never runs. ``settings``: the
    deployment's (default: `Settings.from_env`).
    """
    settings = Settings.from_env() if settings is None else settings
    builder = build_builder(services, settings, scheduler, wrap=timed_node)
    graph = builder.compile(checkpointer=checkpointer, name="memory_agent_timed")
    return as_memory_graph(graph, services.embeddings)  # as `build_graph` does


def build_baseline_graph(checkpointer: Any = None, settings: Any = None) -> Any:
    """Memory bypassed: the project's `respond` node alone (no memory tools)."""
    settings = Settings.from_env() if settings is None else settings
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    builder.add_node("respond", timed_node(partial(respond, settings=settings), "respond"))
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=checkpointer, name="respond_only")
