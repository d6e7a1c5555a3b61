"""Routing functions: sync, returning the name of the next node."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage
from langgraph.graph import END
from langgraph.runtime import Runtime, get_runtime

from graph.context import Context
from graph.state import State, draining
from memory_graph_agent.reflection import reflection_due


def route_after_respond(state: State) -> Literal["tools", "trim_window"]:
    """Run the model's tool calls; a plain answer ends the turn (`respond` bounds the rounds)."""
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else "trim_window"


def route_start(state: State) -> Literal["load_profile", "trim_window"]:
    """A memory run (``context.memory_of`` set) starts at trim_window; any other run is a turn.

    ``update_state(..., as_node="__start__")`` routes without a runtime: as a turn.
    """
    context = getattr(get_runtime(), "context", None)
    return "trim_window" if getattr(context, "memory_of", "") else "load_profile"


def route_after_load_profile(state: State) -> Literal["recall", "trim_window"]:
    """A session end skips recall and respond: it only archives the thread."""
    return "trim_window" if state.get("end_session") else "recall"


def route_after_trim(state: State, runtime: Runtime[Context]) -> Literal["summarize", "__end__"]:
    """Summarize when the pending list holds a full batch, or any backlog while draining.

    A turn whose memory work went to a background run ends here.
    """
    if state.get("memory_scheduled"):
        return END
    pending = state.get("pending_count", 0)
    if pending >= runtime.context.summary_batch or (draining(state) and pending > 0):
        return "summarize"
    return END


def route_after_summarize(state: State) -> Literal["consolidate", "__end__"]:
    """Consolidate when a summary was produced."""
    return "consolidate" if state.get("summary") else END


def route_after_consolidate(
    state: State, runtime: Runtime[Context]
) -> Literal["reflect", "summarize", "__end__"]:
    """Drain a compression/session-end backlog; else reflect when due; else drain full batches."""
    ctx = runtime.context
    if draining(state) and state.get("summary_stored") and state.get("pending_count", 0) > 0:
        return "summarize"  # compression/session end: empty the backlog, then reflect
    since = state.get("summaries_since_reflection", 0)
    if reflection_due(since, state.get("importance_since_reflection", 0.0), ctx):
        return "reflect"
    if state.get("summary_stored") and state.get("pending_count", 0) >= ctx.summary_batch:
        return "summarize"
    return END


def route_after_reflect(state: State, runtime: Runtime[Context]) -> Literal["summarize", "__end__"]:
    """Go on while a full batch still waits (a coalesced memory run drains them all)."""
    if (
        state.get("summary_stored")
        and state.get("pending_count", 0) >= runtime.context.summary_batch
    ):
        return "summarize"
    return END
