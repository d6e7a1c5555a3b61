"""The dense turns channel: the user's raw turns nearest to the query's vector."""

from __future__ import annotations

from collections.abc import Sequence

from memory_graph_agent.recall.channels.base import Hits, Search
from memory_graph_agent.recall.channels.turns import turn_hits
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.episode_index import dense_hits
from memory_graph_agent.storage.postgres import Statement
from memory_graph_agent.storage.recall_search import Rows


class DenseTurns:
    """kNN over the turns table (HNSW, cosine): ``depth`` turns, nearest first."""

    name = "dense_turns"
    ranking = "dense_turns"
    rank_field = "dense_rank"
    score_field = "similarity"
    floor = True
    needs_vector = True

    def statements(self, services: Services, search: Search) -> Sequence[Statement]:
        """`EpisodeLinks.linked_dense_statements`: the neighbours of its best turns too."""
        return services.episodes.linked_dense_statements(
            search.user_id,
            search.vector,
            search.depth,
            search.around,
            search.settings.recall.weights.neighbour_reach,
        )

    def read(self, rows: Rows, search: Search) -> Hits:
        """The turns, nearest first, and the neighbours of the ``around`` nearest."""
        return turn_hits(rows, search, dense_hits, self.score_field)
