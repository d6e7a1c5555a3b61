"""The keyword turns channel: the user's raw turns by the query's words (BM25-like).

It needs no vector, so its search starts while the query is still being embedded.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_graph_agent.recall.channels.base import Hits, Search
from memory_graph_agent.recall.channels.turns import turn_hits
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.episode_index import keyword_hits
from memory_graph_agent.storage.postgres import Statement
from memory_graph_agent.storage.recall_search import Rows


class KeywordTurns:
    """Full-text search over the turns table: ``depth`` turns, best first."""

    name = "keyword_turns"
    ranking = "keyword_turns"
    rank_field = "keyword_rank"
    score_field = "keyword_score"
    floor = False
    needs_vector = False

    def statements(self, services: Services, search: Search) -> Sequence[Statement] | None:
        """`EpisodeLinks.linked_keyword_statement`; none for a query without words."""
        statement = services.episodes.linked_keyword_statement(
            search.user_id,
            search.text,
            search.depth,
            search.around,
            search.settings.recall.weights.neighbour_reach,
        )
        return None if statement is None else [statement]

    def read(self, rows: Rows, search: Search) -> Hits:
        """The turns, best first, and the neighbours of the ``around`` best."""
        return turn_hits(rows, search, keyword_hits, self.score_field)
