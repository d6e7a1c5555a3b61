"""Wire the seven memory nodes and the memory tools into a `StateGraph`.

``graph`` (exported for ``langgraph dev`` / Studio / the platform) is compiled without
a checkpointer: the server injects its own. Notebooks, tests and the CLI call
`build_graph` with theirs (Postgres via `langgraph-checkpoint-postgres`).
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

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

GRAPH_NAME = "memory_agent"


def build_builder() -> StateGraph:
    """The uncompiled graph: load_profile → recall → respond ⇄ tools → trim_window → memory."""
    builder = StateGraph(State, input_schema=InputState, context_schema=Context)
    for node in (load_profile, recall, respond, trim_window, summarize, consolidate, reflect):
        builder.add_node(node)
    builder.add_node("tools", build_tool_node())
    builder.add_edge(START, "load_profile")
    builder.add_conditional_edges("load_profile", route_after_load_profile)  # end_session
    builder.add_edge("recall", "respond")
    builder.add_conditional_edges("respond", route_after_respond)
    builder.add_edge("tools", "respond")
    builder.add_conditional_edges("trim_window", route_after_trim)
    builder.add_conditional_edges("summarize", route_after_summarize)
    builder.add_conditional_edges("consolidate", route_after_consolidate)
    builder.add_edge("reflect", END)
    return builder


def build_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """Compile the memory agent, optionally with a checkpointer."""
    return build_builder().compile(checkpointer=checkpointer, name=GRAPH_NAME)


graph = build_graph()
