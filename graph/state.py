"""Graph state: the checkpointed conversation plus what each memory node hands on."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class InputState(TypedDict, total=False):
    """What callers pass in: the new message(s) of the turn.

    Attributes:
        messages: The turn's new message(s).
        end_session: ``True`` archives the whole thread into long-term memory
            (summarize everything, reflect if due) instead of answering.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    end_session: bool


class State(InputState, total=False):
    """Full state. Only ``messages`` is required; memory nodes fill the rest.

    Attributes:
        profile: The user's hard memory, ``{key: {"value", "importance", ...}}``.
        recalled: Memories recalled for this turn, each with text, kind, similarity
            and provenance (visible in Studio).
        thread_summary: The running summary of this thread's evicted messages.
        pending_count: Messages waiting in the thread's pending list after trimming.
        summary: The summary produced by `summarize`, consumed by `consolidate`.
        summary_stored: Whether `consolidate` wrote the last summary durably.
        summaries_since_reflection: How many summaries the user accumulated since the
            last reflection (set by `consolidate`, read by the router).
        memory_events: Human-readable log of what memory did during this turn.
        profile_changes: Recent profile changes (``key``, ``old``, ``new``, ``at``) that
            respond notes so the agent can acknowledge them.
        memory_decisions: What consolidate/reflect decided for each new item this turn
            (created/merged/updated/strengthened/discarded), also logged in Postgres.
        importance_since_reflection: Summed importance of memories stored since the
            last reflection (read by the router).
        compress: Set by trim_window when the prompt outgrew ``trigger_ratio`` of the
            context window: summarize the evicted turns now, whatever the batch size.
        tool_rounds: Tool-call rounds used in this turn.
    """

    profile: dict[str, dict[str, Any]]
    recalled: list[dict[str, Any]]
    thread_summary: str
    pending_count: int
    summary: dict[str, Any] | None
    summary_stored: bool
    summaries_since_reflection: int
    memory_events: list[str]
    profile_changes: list[dict[str, Any]]
    memory_decisions: list[dict[str, Any]]
    importance_since_reflection: float
    compress: bool
    tool_rounds: int
