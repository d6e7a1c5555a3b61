"""What the turn channels share: hits of raw turns, and the neighbours their search brought."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter

from memory_graph_agent.recall.channels.base import Hit, Hits, Search
from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.storage.episode_index import EpisodeHit
from memory_graph_agent.storage.episode_links import linked_hits
from memory_graph_agent.storage.recall_search import Rows


def turn_hits(
    rows: Rows, search: Search, hits_of: Callable[[Rows], list[EpisodeHit]], score_field: str
) -> Hits:
    """The turns of a turn search's rows (``hits_of``), scored by their ``score_field``."""
    found, neighbours = linked_hits(rows, search.around) if search.around > 0 else (rows, {})
    score = attrgetter(score_field)
    hits = [
        Hit(f"{t.thread_id}:{t.message_id}", t, score(t) or 0.0, episode_item)
        for t in hits_of(found)
    ]
    return Hits(hits=hits, neighbours=neighbours)
