"""Recalled items: what a stored memory or a raw turn looks like in recall's lists.

One dict per candidate (`core.records.RecalledItem`), made by the channel that finds it
first (`recall.channels`) or by a link that reaches it (`linking`, `entity_linking`);
fusion and scoring add their parts to it.
"""

from __future__ import annotations

from typing import Any

from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.storage.episodes import EpisodeHit
from memory_graph_agent.storage.memories import Memory

EPISODE_IMPORTANCE = 0.5
"""Raw turns carry no importance rating: the neutral middle neither favours nor hides them."""


def memory_item(memory: Memory) -> dict[str, Any]:
    """A recalled summary or reflection, with its last access (or creation) time."""
    item = memory.as_dict()
    item["last_accessed_at"] = (
        None if memory.last_accessed_at is None else memory.last_accessed_at.isoformat()
    )
    item["seen_at"] = (memory.last_accessed_at or memory.created_at).isoformat()
    return item


def episode_item(hit: EpisodeHit) -> dict[str, Any]:
    """A recalled raw turn (``Speaker: text``), shown under its day's date line."""
    said = hit.ts.isoformat()
    return {
        "id": f"{hit.thread_id}:{hit.message_id}",
        "kind": MemoryKind.EPISODE.value,
        "text": hit.content,
        "thread_id": hit.thread_id,
        "created_at": said,
        "importance": EPISODE_IMPORTANCE,
        "source_ids": [hit.message_id],
        "seen_at": said,
    }
