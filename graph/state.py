"""Graph state: the checkpointed conversation plus what each memory node hands on."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class InputState(TypedDict):
    """What callers pass in: the new message(s) of the turn."""

    messages: Annotated[list[AnyMessage], add_messages]


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
    """

    profile: dict[str, dict[str, Any]]
    recalled: list[dict[str, Any]]
    thread_summary: str
    pending_count: int
    summary: dict[str, Any] | None
    summary_stored: bool
    summaries_since_reflection: int
    memory_events: list[str]
