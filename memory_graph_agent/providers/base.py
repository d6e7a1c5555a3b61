"""The `MemoryProvider` protocol: profile, recall within a token budget, remember, forget.

A provider answers for one user at a time: every method takes the run's context, whose
``user_id`` was validated at the edge (the middleware, the graph), never a user named by
the model; the deployment's settings are the provider's own (given when it is made).
Only these four methods are required; a provider may also define

* ``touch(ctx, items)``: the recalled ``items`` were shown to the model (after the
  reply, and by ``search_memory``), e.g. to count accesses for recency;
* ``set_pinned(ctx, ref, pinned)``: pin or unpin a fact or memory; the ``pin`` and
  ``unpin`` tools are offered only by a provider that has it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from memory_graph_agent.core.records import ProfileChange, RecalledItem
from memory_graph_agent.core.run import RunContext


@dataclass
class ProfileView:
    """A user's live profile facts, and the recent changes the prompt notes.

    Attributes:
        facts: ``{key: {"value", "importance", ...}}``, most important first.
        changes: Recent value changes (``{"key", "old", "new", "at"}``).
    """

    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    changes: list[ProfileChange] = field(default_factory=list)


@runtime_checkable
class MemoryProvider(Protocol):
    """Long-term memory of users, as a turn and the memory tools use it."""

    async def profile(self, ctx: RunContext) -> ProfileView:
        """The user's profile facts to show in the prompt."""
        ...

    async def recall(
        self, ctx: RunContext, thread_id: str, query: str, budget: int
    ) -> list[RecalledItem]:
        """Memories relevant to ``query`` whose rendered lines fit ``budget`` tokens.

        ``thread_id`` is the conversation asking: its working window is already in the
        prompt. Each item needs at least ``id``, ``kind`` (``summary``, ``reflection`` or
        ``episode``), ``text`` and ``created_at``.
        """
        ...

    async def remember(
        self, ctx: RunContext, key: str, fact: str, importance: float, source_ids: list[str]
    ) -> str:
        """Store a profile fact; return what changed, for the model (``error: ...`` if not)."""
        ...

    async def forget(self, ctx: RunContext, ref: str) -> str:
        """Forget a profile fact (by key) or a memory (by id); say what was forgotten."""
        ...
