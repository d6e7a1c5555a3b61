"""The speaker turns channel: the nearest turns of whomever the query names.

"What books has Melanie read?" asks for what Melanie said, and her answer may be far
from the question in the vector space, past the ``depth`` nearest turns of everyone.
This channel adds the ``speaker_turns`` nearest turns said by someone the query names
(`entities.speaker_names`) to the dense turns' ranking: one list, by similarity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memory_graph_agent.core.entities import speaker_names
from memory_graph_agent.recall.channels.base import Hits, Search
from memory_graph_agent.recall.channels.dense_turns import DenseTurns
from memory_graph_agent.recall.channels.turns import turn_hits
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.episode_index import dense_hits
from memory_graph_agent.storage.postgres import Statement
from memory_graph_agent.storage.recall_search import Rows


class SpeakerTurns(DenseTurns):
    """kNN over the turns said by a speaker the query names; joins the dense turns' list.

    It brings no neighbours: a turn it adds to the dense turns' ``depth`` nearest ranks
    below them all, so the best turns, whose neighbours count, are the dense search's
    (which brings theirs). Any that is missing is fetched after the fusion (`linking`).
    """

    name = "speaker_turns"

    def statements(self, services: Services, search: Search) -> Sequence[Statement] | None:
        """`EpisodeIndex.speaker_statements`; none unless the query names someone."""
        n = search.settings.recall.speaker_turns
        if n <= 0:
            return None
        return services.episodes.speaker_statements(
            search.user_id, search.vector, search.depth, speaker_names(search.text), n
        )

    def read(self, rows: Rows, search: Search) -> Hits:
        """The named speakers' turns, nearest first."""
        return turn_hits(rows, replace(search, around=0), dense_hits, self.score_field)
