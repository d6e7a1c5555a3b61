"""The speaker turns channel: the nearest turns of whomever the query names.

"What books has Melanie read?" asks for what Melanie said, and her answer may be far
from the question in the vector space, past the ``depth`` nearest turns of everyone.
This channel adds the ``speaker_turns`` nearest turns said by someone the query names
(`entities.speaker_names`) to the dense turns' ranking: one list, by similarity.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_graph_agent.core.entities import speaker_names
from memory_graph_agent.recall.channels.base import Search
from memory_graph_agent.recall.channels.dense_turns import DenseTurns
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.postgres import Statement


class SpeakerTurns(DenseTurns):
    """kNN over the turns said by a speaker the query names; joins the dense turns' list.

    Read like the dense turns (nearest first, with the neighbours of the nearest).
    """

    name = "speaker_turns"

    def statements(self, services: Services, search: Search) -> Sequence[Statement] | None:
        """`EpisodeLinks.linked_speaker_statements`; none unless the query names someone."""
        n = search.settings.speaker_turns
        if n <= 0:
            return None
        return services.episodes.linked_speaker_statements(
            search.user_id, search.vector, search.depth, search.around,
            speaker_names(search.text), n,
        )  # fmt: skip
