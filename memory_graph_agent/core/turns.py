"""The turn-boundary rule, in one place: where a conversation may be cut.

A turn runs from a human message to the next, so a cut never separates a tool call from
its results. Works on LangChain messages and stored messages alike: the window's cuts, the
prompt's, and the summary batches claimed from the durable queue (`batch_cut`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def role(message: Any) -> str:
    """``human``, ``ai``, ``tool``... of a LangChain or stored message."""
    return getattr(message, "role", None) or getattr(message, "type", "")


def starts_turn(message: Any) -> bool:
    """Whether a turn starts at ``message`` (a human message)."""
    return role(message) == "human"


def turn_starts(messages: Sequence[Any]) -> list[int]:
    """Indexes of the human messages, i.e. where each turn starts."""
    return [i for i, m in enumerate(messages) if starts_turn(m)]


def cut_to_recent_turns(messages: Sequence[Any], keep_turns: int) -> int:
    """How many of the oldest messages to drop so only the last ``keep_turns`` turns remain.

    Returns 0 when the messages hold ``keep_turns`` turns or fewer.
    """
    starts = turn_starts(messages)
    if keep_turns < 1 or len(starts) <= keep_turns:
        return 0
    return starts[-keep_turns]


def turn_boundary_cut(messages: Sequence[Any], window_size: int) -> int:
    """How many of the oldest messages to move out so at most ``window_size`` remain.

    The cut lands preferably just before a human message; else anywhere that does not
    separate an AI tool call from its results. Returns 0 when no safe cut exists yet.
    """
    excess = len(messages) - window_size
    if excess <= 0:
        return 0
    for c in range(excess, len(messages)):
        if role(messages[c]) == "human":
            return c
    for c in range(excess, len(messages)):
        before = messages[c - 1]
        if role(messages[c]) != "tool" and not (
            role(before) == "ai" and getattr(before, "tool_calls", None)
        ):
            return c
    return 0


def batch_cut(messages: Sequence[Any], size: int, fits: int, ends_turn: bool) -> int:
    """How many of the oldest queued ``messages`` one summary batch takes: whole turns only.

    A batch ends where a turn starts, or at the end of ``messages`` when ``ends_turn``
    (the rest of their last turn is nowhere else). It runs to the end of the turn its
    ``size``-th message falls in, so it takes at least ``size`` messages, unless that
    is more than ``fits`` (the most whose transcript fits the summarizer): then it stops
    at the last turn end within ``fits``. A first turn longer than ``fits`` is taken
    whole, never split. 0 when ``messages`` hold no whole turn.
    """
    ends = [s for s in turn_starts(messages) if s > 0]
    if ends_turn and messages:
        ends.append(len(messages))
    if not ends:
        return 0
    reach = next((e for e in ends if e >= size), None)
    if reach is not None and reach <= fits:
        return reach
    within = [e for e in ends if e <= fits]
    return within[-1] if within else ends[0]


def ends_session(messages: Sequence[Any], end_session: bool) -> bool:
    """Whether a run with ``end_session`` set archives the thread rather than answering.

    A session end that comes with (or finds) a human message still to answer is an
    ordinary turn, whatever ``end_session`` an earlier, failed run left in the checkpoint.
    `graph.routing` routes ``load_profile`` and ``recall`` (which run side by side) by this
    same rule, so the two always agree.
    """
    return end_session and not (messages and role(messages[-1]) == "human")
