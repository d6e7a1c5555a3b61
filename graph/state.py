"""Graph state: the checkpointed conversation plus what each memory node hands on."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.config import get_config
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from memory_graph_agent.core.metrics import merge_spent
from memory_graph_agent.core.records import (
    MemoryEvent,
    ProfileChange,
    RecalledItem,
    SummaryDraft,
    TurnStart,
    add_events,
)
from memory_graph_agent.core.turns import ends_session


class InputState(TypedDict, total=False):
    """What callers pass in: the new message(s) of the turn.

    Attributes:
        messages: The turn's new message(s).
        end_session: ``True`` archives the whole thread into long-term memory
            (summarize everything, reflect if due) instead of answering.
        compress: Summarize the whole backlog now, whatever the batch size. Set by
            trim_window when the prompt outgrew ``trigger_ratio`` of the context window;
            a background memory run receives it as input.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    end_session: bool
    compress: bool


class State(InputState, total=False):
    """Full state. Only ``messages`` is required; memory nodes fill the rest.

    Attributes:
        profile: The user's hard memory, ``{key: {"value", "importance", ...}}``.
        profile_changes: Recent value changes of the profile, noted in the prompt.
        recalled: Memories recalled for this turn, with provenance and score parts.
        thread_summary: The running summary of this thread's evicted messages.
        pending_count: Messages waiting in the thread's pending list after trimming.
        memory_scheduled: Whether trim_window handed this turn's memory work to a
            background run (``memory_mode="background"``), or left it waiting for one
            (the scheduler failed): the turn's run then ends.
        summary: The draft `summarize` produced, stored and cleared by `consolidate`.
        summary_stored: Whether `consolidate` wrote the last summary durably.
        summaries_since_reflection: Summaries since the user's last reflection.
        importance_since_reflection: Their summed importance.
        memory_events: What memory did during this turn (appended by each node).
        memory_decisions: What consolidate/reflect decided for each new item this turn
            (created/merged/updated/strengthened/discarded), also logged in Postgres.
        memory_cost: Memory's model calls and tokens this run, by purpose
            (``{"summarize": {"calls", "input", "output"}, ...}``; `graph.wrapping`).
    """

    profile: dict[str, dict[str, Any]]
    profile_changes: list[ProfileChange]
    recalled: list[RecalledItem]
    thread_summary: str
    pending_count: int
    memory_scheduled: bool
    summary: SummaryDraft | None
    summary_stored: bool
    summaries_since_reflection: int
    importance_since_reflection: float
    memory_events: Annotated[list[MemoryEvent], add_events]
    memory_decisions: Annotated[list[dict[str, Any]], add_events]
    memory_cost: Annotated[dict[str, dict[str, int]], merge_spent]


def turn_start(events: list[MemoryEvent]) -> TurnStart:
    """The ``memory_events`` write of a node that starts a turn (see `add_events`)."""
    meta = get_config().get("metadata", {})
    return TurnStart(turn=int(meta.get("langgraph_step", 0)), events=events)


def session_ends(state: State) -> bool:
    """Whether this run archives the thread instead of answering (`turns.ends_session`)."""
    return ends_session(state.get("messages") or [], bool(state.get("end_session")))


def draining(state: State) -> bool:
    """Whether this turn summarizes its whole backlog (compression or session end)."""
    return bool(state.get("compress") or state.get("end_session"))
