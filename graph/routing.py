"""Routing functions: sync, returning the name of the next node (or nodes, side by side)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial, update_wrapper
from typing import Any, Literal

from langchain_core.messages import AIMessage
from langgraph.graph import END
from langgraph.runtime import get_runtime

from graph.state import State, draining, session_ends
from memory_graph_agent.formation.reflection import reflection_due
from memory_graph_agent.settings import Settings

TURN_START = ("load_profile", "recall")
"""The nodes a turn starts with, side by side."""
STARTS = [*TURN_START, "backlog"]
"""Where a run may start: a turn (or, alone, a session end's load_profile), a memory run."""


def bound(route: Callable[..., Any], settings: Settings) -> Callable[..., Any]:
    """``route`` with the deployment's ``settings``, keeping its name and its ``Literal``."""
    return update_wrapper(partial(route, settings=settings), route)


def route_after_respond(state: State) -> Literal["tools", "trim_window"]:
    """Run the model's tool calls; a plain answer ends the turn (`respond` bounds the rounds)."""
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else "trim_window"


def route_start(state: State) -> list[str]:
    """Where a run starts: a turn at load_profile and recall, a memory run at backlog.

    A turn starts with ``load_profile`` and ``recall`` side by side (one step, so the
    query embedding and the searches run while the profile is read), and both lead to
    the answer, which runs once, after both. A session end (the input says so) searches
    nothing: ``load_profile`` alone, then ``trim_window``. A memory run
    (``context.memory_of`` set, `graph.background`) starts at ``backlog``.

    ``update_state(..., as_node="__start__")`` routes without a runtime: as a turn.
    """
    context = getattr(get_runtime(), "context", None)
    if getattr(context, "memory_of", ""):
        return ["backlog"]
    return ["load_profile"] if session_ends(state) else list(TURN_START)


def route_turn(state: State) -> Literal["respond", "trim_window"]:
    """After ``load_profile``: answer (with ``recall``, beside it), or archive the thread.

    By ``load_profile``'s ``end_session``: the rule `route_start` applied to the input,
    before ``load_profile`` repaired the messages, so the two always agree.
    """
    return "trim_window" if state.get("end_session") else "respond"


def route_after_trim(state: State, *, settings: Settings) -> Literal["summarize", "__end__"]:
    """Summarize when the pending list holds a full batch, or any backlog while draining.

    A turn whose memory work went to a background run ends here.
    """
    if state.get("memory_scheduled"):
        return END
    pending = state.get("pending_count", 0)
    if pending >= settings.formation.summary_batch or (draining(state) and pending > 0):
        return "summarize"
    return END


def route_after_summarize(state: State) -> Literal["consolidate", "__end__"]:
    """Consolidate when a summary was produced."""
    return "consolidate" if state.get("summary") else END


def route_after_consolidate(
    state: State, *, settings: Settings
) -> Literal["reflect", "summarize", "__end__"]:
    """Drain a compression/session-end backlog; else reflect when due; else drain full batches."""
    if draining(state) and state.get("summary_stored") and state.get("pending_count", 0) > 0:
        return "summarize"  # compression/session end: empty the backlog, then reflect
    since = state.get("summaries_since_reflection", 0)
    if reflection_due(since, state.get("importance_since_reflection", 0.0), settings):
        return "reflect"
    if (
        state.get("summary_stored")
        and state.get("pending_count", 0) >= settings.formation.summary_batch
    ):
        return "summarize"
    return END


def route_after_reflect(state: State, *, settings: Settings) -> Literal["summarize", "__end__"]:
    """Go on while a full batch still waits (a coalesced memory run drains them all)."""
    if (
        state.get("summary_stored")
        and state.get("pending_count", 0) >= settings.formation.summary_batch
    ):
        return "summarize"
    return END
