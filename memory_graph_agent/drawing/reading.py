"""Read one user's memory from the stores into a `MemoryGraph` (storage owns the queries)."""

from __future__ import annotations

from memory_graph_agent.drawing.model import (
    MAX_MEMORIES,
    MAX_TURNS,
    MemoryGraph,
    build_memory_graph,
)
from memory_graph_agent.services.stores import Services
from memory_graph_agent.turn.validation import check_id


async def read_memory_graph(
    services: Services,
    user_id: str,
    *,
    max_turns: int = MAX_TURNS,
    max_memories: int = MAX_MEMORIES,
) -> MemoryGraph:
    """The graph of ``user_id``'s memory: every fact, the newest turns and memories.

    Args:
        services: The open stores.
        user_id: Whose memory; validated, and every read is scoped to it.
        max_turns: Turns drawn, the newest of any thread; the rest are folded per thread.
        max_memories: Summaries and reflections drawn, the newest; the rest are folded.
    """
    user = check_id(user_id, "user_id")
    if max_turns < 0 or max_memories < 0:
        raise ValueError("max_turns and max_memories must be >= 0")
    profile = await services.profile.get(user)
    memories = await services.memories.list(user, limit=max_memories)
    counts = await services.memories.count(user)
    turns = await services.episodes.latest(user, max_turns)
    turn_counts = await services.episodes.counts(user)
    return build_memory_graph(
        user,
        profile=profile,
        memories=memories,
        turns=turns,
        turn_counts=turn_counts,
        memory_count=sum(counts.values()),
    )
