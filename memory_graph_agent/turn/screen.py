"""What the prompt shows before a turn's recall: the window, and what recall may fill.

One rule for the ``recall`` node and `MemoryMiddleware`: a message of the state is on
screen when the thread's Redis window holds it, or it belongs to the turn being answered.
A message that is still in the state but no longer in the window (a thread archived while
idle, another user's rejected turn: ``load_profile``, which runs beside recall, takes them
out of the state) is off screen, so recall may return it and fills its tokens too. Redis
down: every message of the state counts as on screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_graph_agent.core.turns import turn_starts
from memory_graph_agent.prompting.budgets import recall_budget
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.outages import StoreUnavailable


@dataclass(frozen=True)
class Screen:
    """The ids of the messages on screen, and the tokens recall may fill."""

    shown: set[str]
    budget: int


async def screen(
    services: Services,
    memory_token_budget: int,
    user_id: str,
    thread_id: str,
    messages: Sequence[Any],
) -> Screen:
    """The messages of ``messages`` on screen, and ``memory_token_budget`` less their window."""
    starts = turn_starts(messages)
    cut = starts[-1] if starts else len(messages)
    try:
        held = {m.id for m in await services.window.window(user_id, thread_id)}
    except StoreUnavailable:
        held = None
    kept = [m for m in messages[:cut] if held is None or m.id in held]
    kept += messages[cut:]  # the turn being answered
    return Screen({m.id for m in kept if m.id}, recall_budget(memory_token_budget, kept))
