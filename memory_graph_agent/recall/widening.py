"""A budget that never idles: when recall leaves much of it unused, widen the net.

A turn's recall keeps what scores above the similarity floor. A question in a new thread
that words its subject differently from what was said ("where do I live now?" against "I
moved from Lyon to Porto") finds little, and most of the budget stays empty. When more
than `IDLE_SHARE` of it is left (after the thread's own older turns, `recall.conversation`),
one more step fills it, in this order:

1. **What the kept turns lead to**: the user's other turns that share their names
   (`entity_linking.reach_entities`, at full weight): the later turn that updates a kept
   one ("moved from Lyon") comes this way; the prompt shows turns in the order said, so
   the update reads after what it replaced.
2. **The user's latest conversation** in another thread, newest first, each turn whole:
   what a user who opens a new thread most often goes on from.

Nothing is shown twice (`ranking.fill_budget`, and no id twice), and the budget holds.
Only a turn's recall widens (it passes its `Screen`); `search_memory` and the CLI's
queries get what scored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from memory_graph_agent.core.run import RunContext
from memory_graph_agent.recall.conversation import SCORE_PARTS, conversation_chars, unscored
from memory_graph_agent.recall.entity_linking import reach_entities
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import StoreUnavailable

IDLE_SHARE = 0.1
"""The share of the budget left unused above which recall widens."""
REACH_WEIGHT = 1.0
"""The share of a kept turn's RRF it lends the turns it reaches (their order only)."""


def idle(used: int, budget: int) -> bool:
    """Whether more than `IDLE_SHARE` of ``budget`` is unused."""
    return budget - used > IDLE_SHARE * budget


async def widen(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    thread_id: str,
    query: str,
    kept: Sequence[Mapping[str, Any]],
    left: int,
) -> list[dict[str, Any]]:
    """The turns to offer after ``kept``, best first, for ``left`` unused tokens.

    The reached turns (best lent score first), then the latest conversation's (newest
    first); none already kept. A store that is down offers nothing.
    """
    found = [dict(m) for m in kept if m.get("rrf")]  # what a search found lends its names
    reached, latest = await asyncio.gather(
        reach_entities(services, settings, ctx, found, query, REACH_WEIGHT),
        services.episodes.recent(ctx.user_id, thread_id, conversation_chars(left), elsewhere=True),
        return_exceptions=True,
    )
    taken = {str(m.get("id")) for m in kept}
    offered: list[dict[str, Any]] = []
    if isinstance(reached, dict):
        for key, (item, bonus) in sorted(reached.items(), key=lambda pair: -pair[1][1]):
            parts = {**dict.fromkeys(SCORE_PARTS), "entity_bonus": round(bonus, 6)}
            offered.append({**item, **parts, "via": "entity"})
    elif not isinstance(reached, StoreUnavailable):
        raise reached
    if isinstance(latest, list):
        offered += [unscored(hit, "latest conversation") for hit in latest]
    elif not isinstance(latest, StoreUnavailable):
        raise latest
    out = []
    for item in offered:
        if item["id"] not in taken:
            taken.add(item["id"])
            out.append({**item, "recency": None, "score": None})
    return out
