"""The summaries channel: the user's nearest active summaries and reflections, by vector.

Its search also brings the indexed turns of each summary it finds (`with_members`), so
linking a summary to its turns needs no second round trip.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_graph_agent.recall.channels.base import Hit, Hits, Search
from memory_graph_agent.recall.items import memory_item
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.episode_links import member_hits
from memory_graph_agent.storage.memories import MemoryStore
from memory_graph_agent.storage.postgres import Statement
from memory_graph_agent.storage.recall_search import Rows


class Summaries:
    """Dense search over the memories table: ``recall_k`` memories, nearest first."""

    name = "summaries"
    ranking = "summaries"
    rank_field = "dense_rank"
    score_field = "similarity"
    floor = True
    needs_vector = True

    def statements(self, services: Services, search: Search) -> Sequence[Statement]:
        """`MemoryStore.search_statements`, bringing the found summaries' turns."""
        user, k = search.user_id, search.settings.recall.k
        *options, query = services.memories.search_statements(user, search.vector, k)
        return [*options, services.episodes.with_members(user, query)]

    def read(self, rows: Rows, search: Search) -> Hits:
        """The memories, most similar first, and the turns of the summaries among them."""
        memories = MemoryStore.found(rows)
        # relaxed_order HNSW scans may return neighbours slightly out of order
        ranked = sorted(memories, key=lambda m: -(m.similarity or 0.0))
        return Hits(
            hits=[Hit(m.id, m, m.similarity or 0.0, memory_item) for m in ranked],
            memories=memories,
            members=member_hits(rows),
        )
