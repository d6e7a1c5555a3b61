"""Routing functions: sync, returning the name of the next node."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END
from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State


def route_after_trim(state: State, runtime: Runtime[Context]) -> Literal["summarize", "__end__"]:
    """Summarize only when the pending list holds a full batch."""
    return "summarize" if state.get("pending_count", 0) >= runtime.context.summary_batch else END


def route_after_summarize(state: State) -> Literal["consolidate", "__end__"]:
    """Consolidate when a summary was produced."""
    return "consolidate" if state.get("summary") else END


def route_after_consolidate(
    state: State, runtime: Runtime[Context]
) -> Literal["reflect", "summarize", "__end__"]:
    """Reflect when due; else keep draining a backlog of full batches; else stop."""
    ctx = runtime.context
    if state.get("summaries_since_reflection", 0) >= ctx.reflect_after:
        return "reflect"
    if state.get("summary_stored") and state.get("pending_count", 0) >= ctx.summary_batch:
        return "summarize"
    return END
