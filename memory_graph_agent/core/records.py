"""Typed records the nodes hand each other through the graph state.

They are TypedDicts: plain dicts at run time, so checkpoints, Studio and the HTTP API
carry them as JSON, while the code and the type checker see their fields.
"""

from __future__ import annotations

import operator
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict


class MemoryEvent(TypedDict):
    """One thing memory did (or could not do) during a turn."""

    node: str
    """The node that did it (``trim_window``, ``summarize``...)."""
    kind: str
    """A stable code tests and tools can match (``stored``, ``deferred``, ``skipped``...)."""
    text: str
    """The same, said for a person (printed by the CLI, shown in Studio)."""


def event(node: str, kind: str, text: str) -> MemoryEvent:
    """A `MemoryEvent`; ``text`` is prefixed with the node's short name."""
    return MemoryEvent(node=node, kind=kind, text=text)


class TurnStart(TypedDict):
    """A write that starts a turn's ``memory_events``: the events, and the step of the turn."""

    turn: int
    events: list[MemoryEvent]


def add_events(left: list, right: list | TurnStart) -> list:
    """Reducer of ``memory_events`` and ``memory_decisions``: each node appends its own.

    A turn starts with two nodes side by side (``load_profile`` and ``recall``), each
    writing a `TurnStart` for its step. The first of the two applied drops the last turn's
    events; the second keeps the first's (their events carry ``turn``, the step), so the
    result is the same in whichever order LangGraph applies them. A memory run starts
    the list with ``langgraph.types.Overwrite``.
    """
    if isinstance(right, dict):
        step = right["turn"]
        kept = [e for e in left if e.get("turn") == step]
        return kept + [{**e, "turn": step} for e in right["events"]]
    return operator.add(left, right)


class SummaryDraft(TypedDict):
    """What `summarize` produced and `consolidate` stores (then clears)."""

    text: str
    importance: float
    mode: Literal["llm", "fallback", "raw"]
    """``llm``: the model's summary; ``fallback``: raw text after a model failure;
    ``raw``: ``summary_mode='raw'`` (no model call at all)."""
    source_ids: list[str]
    """The ids of the batch's messages (provenance; also the row's deterministic id)."""
    user_text: str
    """What the user said in the batch (facts come only from the user's own words)."""
    user_id: str
    thread_id: str
    created_at: str
    """When the batch's last message was sent (ISO-8601)."""
    worker: str
    """Id of the lease on the batch; `consolidate` acknowledges or fails it."""


class RecalledItem(TypedDict):
    """One recalled memory or raw turn, with its provenance and every score part."""

    id: str
    kind: str
    """A `MemoryKind` of `kinds.TIER_ORDER` (its plain value)."""
    text: str
    thread_id: str | None
    created_at: str
    importance: float
    source_ids: list[str]
    seen_at: str
    """When recency starts counting: the last access, else creation (ISO-8601)."""
    similarity: NotRequired[float | None]
    keyword_score: NotRequired[float | None]
    dense_rank: NotRequired[int | None]
    keyword_rank: NotRequired[int | None]
    rrf: NotRequired[float | None]
    relevance: NotRequired[float | None]
    recency: NotRequired[float]
    score: NotRequired[float]
    tokens: NotRequired[int]
    extra: NotRequired[dict[str, Any]]


class ProfileChange(TypedDict):
    """A recent value change of the profile, noted in the prompt."""

    key: str
    old: str | None
    new: str | None
    at: str
