"""The memory graph of `bench.overhead` with every node timed, and its respond-only twin.

`build_timed_graph` wires the project's node functions exactly like
`graph.builder.build_builder` (bound to the services and the memory tools with
``functools.partial``), each wrapped by `bench.timing.timed_node`; it refuses to build
when its topology (nodes, edges, routing functions) drifts from the builder's.
`build_baseline_graph` is the project's ``respond`` node alone: memory bypassed.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph

from bench.timing import timed_node
from graph.builder import MEMORY_NODES, build_builder
from graph.context import Context
from graph.routing import (
    route_after_consolidate,
    route_after_load_profile,
    route_after_respond,
    route_after_summarize,
    route_after_trim,
)
from graph.state import InputState, State
from graph.tools import build_tool_node, memory_tools
from memory_graph_agent.services import Services
from nodes.respond import respond


def _topology(builder: StateGraph) -> tuple:
    return (
        sorted(builder.nodes),
        sorted(builder.edges),
        sorted((src, sorted(branches)) for src, branches in builder.branches.items()),
    )


def build_timed_graph(services: Services, checkpointer: Any = None) -> Any:
    """The project's graph with every node wrapped by `timed_node` (same edges/routing).

    Wired like `graph.builder.build_builder`: the memory nodes bound to ``services``,
    ``respond`` to the memory tools, and the ``tools`` node (the instant model never
    calls a tool, so it never runs).
    """
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    tools = memory_tools(services)
    for node in MEMORY_NODES:
        builder.add_node(node.__name__, timed_node(partial(node, services=services)))
    builder.add_node("respond", timed_node(partial(respond, tools=tools)))
    builder.add_node("tools", build_tool_node(tools))
    builder.add_edge(START, "load_profile")
    builder.add_conditional_edges("load_profile", route_after_load_profile)
    builder.add_edge("recall", "respond")
    builder.add_conditional_edges("respond", route_after_respond)
    builder.add_edge("tools", "respond")
    builder.add_conditional_edges("trim_window", route_after_trim)
    builder.add_conditional_edges("summarize", route_after_summarize)
    builder.add_conditional_edges("consolidate", route_after_consolidate)
    builder.add_edge("reflect", END)
    if _topology(builder) != _topology(build_builder(services)):
        raise RuntimeError(
            "bench/timed_graph.py no longer matches graph/builder.py; update build_timed_graph"
        )
    return builder.compile(checkpointer=checkpointer, name="memory_agent_timed")


def build_baseline_graph(checkpointer: Any = None) -> Any:
    """Memory bypassed: the project's `respond` node alone (no memory tools)."""
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    builder.add_node("respond", timed_node(respond))
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=checkpointer, name="respond_only")
