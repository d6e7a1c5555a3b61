"""What the prompt shows before a turn's recall: the window, and what recall may fill.

One rule for the ``recall`` node and `MemoryMiddleware`: a message of the state is on
screen when the thread's Redis window holds it, or it belongs to the turn being answered.
A message still in the state but no longer in the window (a thread archived while idle,
another user's rejected turn: ``load_profile``, which runs beside recall, takes them out
of the state) is off screen, so recall may return it and fills its tokens too. Redis down:
every message of the state counts as on screen.

`recall.retrieval.retrieve` reads the window beside its searches and applies `Screen.of`,
so the rule costs the turn no wait; the searches' depth comes from the budget with every
message of the state on screen (``of(None)``), as before the read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory_graph_agent.core.turns import turn_starts
from memory_graph_agent.prompting.budgets import recall_budget


@dataclass(frozen=True)
class OnScreen:
    """The ids of the messages on screen, and the tokens recall may fill."""

    shown: set[str]
    budget: int


@dataclass(frozen=True)
class Screen:
    """A turn's state, to tell what is on screen once the window's ids are known."""

    memory_token_budget: int
    messages: Sequence[Any]

    def of(self, held: set[str] | None) -> OnScreen:
        """On screen when the window holds ``held`` (``None``: unknown, all of the state)."""
        starts = turn_starts(self.messages)
        cut = starts[-1] if starts else len(self.messages)
        kept = [m for m in self.messages[:cut] if held is None or m.id in held]
        kept += self.messages[cut:]  # the turn being answered
        return OnScreen({m.id for m in kept if m.id}, recall_budget(self.memory_token_budget, kept))
