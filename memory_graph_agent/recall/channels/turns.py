"""What the turn channels share: hits of raw turns, and the neighbours their search brought."""

from __future__ import annotations

from collections.abc import Callable

from memory_graph_agent.recall.channels.base import Hit, Hits, Search
from memory_graph_agent.recall.items import episode_item
from memory_graph_agent.storage.episode_index import EpisodeHit
from memory_graph_agent.storage.episode_links import linked_hits
from memory_graph_agent.storage.recall_search import Rows


def turn_hits(
    rows: Rows, search: Search, hits_of: Callable[[Rows], list[EpisodeHit]], score_field: str
) -> Hits:
    """The turns of a turn search's rows (``hits_of``), each with its ``score_field``."""
    found, neighbours = linked_hits(rows, search.around) if search.around > 0 else (rows, {})
    hits = []
    for turn in hits_of(found):
        score = getattr(turn, score_field) or 0.0
        hits.append(Hit(_key(turn), turn, score, episode_item, {score_field: round(score, 4)}))
    return Hits(hits=hits, neighbours=neighbours)


def _key(turn: EpisodeHit) -> str:
    return f"{turn.thread_id}:{turn.message_id}"
