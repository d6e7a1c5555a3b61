"""The provider of our own memory: ``tiered``, the memory the ``memory_agent`` graph uses.

The Redis profile with its change notes, and hybrid recall over summaries, reflections
and evicted turns in Postgres + pgvector (`memory_graph_agent.recall.retrieval.retrieve`),
or, for a run with ``recall_mode="flat"``, the user's hottest memories with no search
(`hot_memories`). It is thin: the logic is the domain's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import memory_graph_agent.providers.tools as do
from memory_graph_agent.core.records import RecalledItem
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.prompting.screen import Screen
from memory_graph_agent.providers.base import MemoryProvider, ProfileView
from memory_graph_agent.recall.modes import find
from memory_graph_agent.recall.retrieval import record_access
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


class TieredProvider:
    """Our Redis + pgvector memory: profile, hybrid recall, facts and pins."""

    name = "tiered"

    def __init__(self, services: Services, settings: Settings) -> None:
        self.services = services
        self.settings = settings

    async def profile(self, ctx: RunContext) -> ProfileView:
        """The live facts and the changes of the last ``window.change_note_days``."""
        facts, changes = await self.services.profile.get_with_changes(
            ctx.user_id, self.settings.window.change_note_days
        )
        return ProfileView(facts, changes)  # type: ignore[arg-type]

    async def recall(
        self,
        ctx: RunContext,
        thread_id: str,
        query: str,
        budget: int,
        shown: set[str] | Screen | None = None,
        *,
        flat: bool = False,
    ) -> list[RecalledItem]:
        """Recall ``query`` within ``budget``; ``shown``: what the prompt shows (`retrieve`).

        Hybrid search, or (``flat``: the run's ``recall_mode``) the hottest memories, with
        no search and no embedding.
        """
        found = await find(
            self.services, self.settings, ctx, query, thread_id,
            flat=flat, budget=budget, shown=shown,
        )  # fmt: skip
        return found.items  # type: ignore[return-value]

    async def touch(self, ctx: RunContext, items: list[Any]) -> None:
        """Count the access of the shown summaries and reflections (best effort)."""
        await record_access(self.services, ctx.user_id, items)

    async def remember(
        self, ctx: RunContext, key: str, fact: str, importance: float, source_ids: list[str]
    ) -> str:
        """A profile fact, with its history kept."""
        return await do.remember(
            self.services, self.settings, ctx, key, fact, importance, source_ids
        )

    async def forget(self, ctx: RunContext, ref: str) -> str:
        """A profile fact by key, or a summary/reflection by id."""
        return await do.forget(self.services, ctx.user_id, ref)

    async def set_pinned(self, ctx: RunContext, ref: str, pinned: bool) -> str:
        """Pin (never expires) or unpin a fact or memory."""
        return await do.set_pinned(self.services, self.settings, ctx, ref, pinned)


PROVIDERS: dict[str, Callable[[Services, Settings], MemoryProvider]] = {
    "tiered": TieredProvider,
}


def provider_named(name: str, services: Services, settings: Settings) -> MemoryProvider:
    """The provider called ``name`` (``"tiered"``) on ``services``."""
    if name not in PROVIDERS:
        raise ValueError(f"unknown memory provider {name!r}: use one of {sorted(PROVIDERS)}")
    return PROVIDERS[name](services, settings)
