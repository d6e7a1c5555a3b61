"""Recall per mode: hybrid search (`retrieval.retrieve`), or the hottest memories, no search.

`recall_memories` is what the ``recall`` node puts in the prompt for a run's
``recall_mode``; `find` is the same choice for `MemoryProvider` callers (the middleware's
tiered provider); `hot_memories` is ``recall_mode='flat'``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

from memory_graph_agent.core.records import MemoryEvent, event
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.prompting.screen import Screen
from memory_graph_agent.recall.items import memory_item
from memory_graph_agent.recall.ranking import fill_budget, memory_score, recency
from memory_graph_agent.recall.retrieval import (
    Retrieval,
    parse_time,
    prompt_order,
    record_access,
    retrieve,
    with_tokens,
)
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import StoreUnavailable

TOKENS_PER_HOT_CANDIDATE = 20
"""Flat mode fetches one memory per 20 budget tokens (shorter than any real memory)."""
MAX_HOT_CANDIDATES = 500


async def hot_memories(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    budget: int | None = None,
    *,
    touch: bool = True,
) -> Retrieval:
    """The user's hottest memories, no search and no embedding (``recall_mode='flat'``).

    Active summaries and reflections by importance, then most recent access (or
    creation), taken greedily while they fit the budget. Each item carries
    ``importance`` and ``recency``; its ``score`` is the weighted mean of those two
    (there is no query, so ``relevance`` is ``None``), the order is importance first.
    """
    budget = settings.window.memory_token_budget if budget is None else max(0, budget)
    limit = min(MAX_HOT_CANDIDATES, max(settings.recall.k, budget // TOKENS_PER_HOT_CANDIDATE))
    memories = await services.memories.hot(ctx.user_id, limit) if budget else []
    now = datetime.now(UTC)
    half_life = settings.recall.weights.recency_half_life_days
    weights = (
        0.0,
        settings.recall.weights.weight_recency,
        settings.recall.weights.weight_importance,
    )
    candidates = []
    for memory in memories:
        item = memory_item(memory)
        item.update(similarity=None, keyword_score=None, dense_rank=None, keyword_rank=None)
        item.update(rrf=None, relevance=None)
        item["recency"] = round(recency(parse_time(item["seen_at"]), now, half_life), 6)
        item["importance"] = float(memory.importance)
        item["score"] = round(
            memory_score(0.0, item["recency"], item["importance"], weights)
            if sum(weights)
            else item["importance"],
            6,
        )
        candidates.append(item)
    kept, used = fill_budget(with_tokens(candidates), budget)
    items = prompt_order(kept)
    if touch:
        await record_access(services, ctx.user_id, items)
    return Retrieval(items=items, candidates=len(candidates), tokens=used, budget=budget)


async def find(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    query: str,
    thread_id: str,
    *,
    flat: bool,
    budget: int | None = None,
    shown: set[str] | Screen | None = None,
    vector: Awaitable[list[float]] | None = None,
) -> Retrieval:
    """``flat``: the hottest memories, no search and no embedding; else `retrieve` ``query``.

    The access statistics are written after the reply (`record_access`), not here.
    """
    if flat:
        return await hot_memories(services, settings, ctx, budget, touch=False)
    return await retrieve(
        services, settings, ctx, query, thread_id,
        budget=budget, touch=False, shown=shown, vector=vector,
    )  # fmt: skip


async def recall_memories(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    mode: str,
    query: str,
    thread_id: str,
    shown: set[str] | Screen | None = None,
    budget: int | None = None,
    vector: Awaitable[list[float]] | None = None,
) -> tuple[list[dict[str, Any]], list[MemoryEvent]]:
    """The items ``recall`` puts in the prompt for ``mode``, and what it did.

    ``tool`` recalls nothing here (the model searches); ``flat`` takes the hottest
    memories; ``auto`` runs `retrieve` on ``query``. Both fill ``budget`` tokens (default
    ``memory_token_budget``). Long-term memory being down means answering from profile
    and window alone.
    """
    if mode == "tool":
        return [], [event("recall", "tool_mode", "recall: tool mode, the model searches memory")]
    try:
        found = await find(
            services,
            settings,
            ctx,
            query,
            thread_id,
            flat=mode == "flat",
            budget=budget,
            shown=shown,
            vector=vector,
        )
    except StoreUnavailable:
        text = "recall: long-term memory unavailable, answering from profile and window"
        return [], [event("recall", "unavailable", text)]
    prefix = "recall (flat): hottest " if mode == "flat" else "recall: "
    return found.items, [event("recall", mode, prefix + found.describe())]
