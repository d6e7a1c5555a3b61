"""Recall's three searches in one round trip: memories by vector, raw turns by vector and text.

The statements are the stores' own (`MemoryStore.search_statements`,
`EpisodeIndex.dense_statements`, `EpisodeIndex.keyword_statement`), sent together on one
connection in one transaction (`Database.pipeline`), each after its own ``SET LOCAL`` HNSW
options, so every search returns exactly what its store method returns alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory_graph_agent.storage.episode_index import EpisodeHit, dense_hits, keyword_hits
from memory_graph_agent.storage.episodes import EpisodeLog
from memory_graph_agent.storage.memories import Memory, MemoryStore
from memory_graph_agent.storage.outages import guard


@dataclass
class Found:
    """What each search found, best first."""

    memories: list[Memory] = field(default_factory=list)
    """The user's nearest active summaries and reflections (`MemoryStore.search`)."""
    dense: list[EpisodeHit] = field(default_factory=list)
    """The user's nearest raw turns (`EpisodeIndex.dense_search`)."""
    keyword: list[EpisodeHit] = field(default_factory=list)
    """The user's best raw turns by keyword (`EpisodeIndex.keyword_search`)."""


async def _recall_search(
    memories: MemoryStore,
    episodes: EpisodeLog,
    user_id: str,
    vector: list[float],
    text: str,
    k: int,
    depth: int,
) -> Found:
    memory = memories.search_statements(user_id, vector, k)
    dense = episodes.dense_statements(user_id, vector, depth)
    keyword = episodes.keyword_statement(user_id, text, depth)
    rows = await memories.db.pipeline(*memory, *dense, *([keyword] if keyword else []))
    memory_rows = rows[len(memory) - 1]
    dense_rows = rows[len(memory) + len(dense) - 1]
    return Found(
        memories=MemoryStore.found(memory_rows),
        dense=dense_hits(dense_rows),
        keyword=keyword_hits(rows[-1]) if keyword else [],
    )


recall_search = guard("postgres", _recall_search)
"""`_recall_search`, its driver errors raised as `StoreUnavailable`.

Args: the memory store, the episode log, the user, the query vector and text, ``k``
memories and ``depth`` turns per turn channel. Returns the `Found` lists, each exactly
what the store's own search returns.
"""
