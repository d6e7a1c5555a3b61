"""What a recall channel is (`RecallChannel`), what it finds (`Hits`), and the search of all.

A channel turns one recall's query (`Search`) into the statements of one search, asked
from a store (the store writes the SQL), and reads that search's rows back as hits, best
first. `search_channels` runs every channel's search at once (`storage.recall_search`);
`retrieval.fuse` fuses the channels' rankings by reciprocal rank, in the channels' order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.episode_links import Neighbours
from memory_graph_agent.storage.episodes import EpisodeHit
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.memory_rows import VectorLiteral
from memory_graph_agent.storage.postgres import Statement
from memory_graph_agent.storage.recall_search import Rows, Searches, run_searches


@dataclass(frozen=True)
class Search:
    """One recall's query, as every channel sees it."""

    settings: Settings
    """The deployment's settings: ``recall.k``, ``recall.speaker_turns``..."""
    user_id: str
    """Whose memory is searched."""
    text: str
    """The query's text (the user's message, or the model's tool query)."""
    depth: int
    """How many turns each turn channel returns (`retrieval.episode_depth`)."""
    around: int = 0
    """Each turn channel also brings the neighbours of its ``around`` best turns (0: none)."""
    vector: VectorLiteral | None = None
    """The query's vector, for the channels that need it (set once it is embedded)."""


@dataclass(slots=True)
class Hit:
    """One candidate a channel found: its item's id, what it is, and the channel's score."""

    key: str
    """The recalled item's id (a memory's id; ``thread_id:message_id`` for a turn)."""
    record: Memory | EpisodeHit
    score: float
    """The channel's own score, higher is better (equal scores share a rank); the item
    shows it rounded to 4 places, as the channel's ``score_field``."""
    item: Callable[[Any], dict[str, Any]]
    """Makes the recalled item of ``record`` (`items.memory_item`, `items.episode_item`)."""


@dataclass
class Hits:
    """What one channel's search found, and the links it brought in the same round trip."""

    hits: list[Hit] = field(default_factory=list)
    """Best first."""
    memories: list[Memory] = field(default_factory=list)
    """The stored memories found, as the search returned them (`linking.summary_turns`)."""
    members: dict[tuple[str, str], EpisodeHit] = field(default_factory=dict)
    """The indexed turns of the found summaries, by ``(thread_id, message_id)``."""
    neighbours: Neighbours = field(default_factory=dict)
    """The neighbours of the channel's best ``around`` turns (empty lists included)."""


class RecallChannel(Protocol):
    """One search of recall: its statements, and how its rows become ranked hits.

    A channel's hits form the ranking named ``ranking`` in the fusion: its own name, or
    another channel's, whose list it then joins (merged by score, a turn found by both
    counted once; the channel that owns a ranking must come first in `CHANNELS`), and
    whose connection its query shares when their options are the same. The
    owner also says which item field shows the ranking's rank (``rank_field``) and whether
    a candidate only similarity rankings found must pass ``min_similarity`` (``floor``).
    """

    name: ClassVar[str]
    ranking: ClassVar[str]
    rank_field: ClassVar[str]
    """``dense_rank`` or ``keyword_rank``: the item field that shows the rank."""
    score_field: ClassVar[str]
    """The item field that shows its score (``None`` in an item it did not find)."""
    floor: ClassVar[bool]
    needs_vector: ClassVar[bool]
    """Whether its search waits for the query's embedding (``search.vector`` is set)."""

    def statements(self, services: Services, search: Search) -> Sequence[Statement] | None:
        """Its search, from a store's statement builder; ``None`` to search nothing."""
        ...

    def read(self, rows: Rows, search: Search) -> Hits:
        """The hits of its search's rows, best first."""
        ...


@dataclass
class Found:
    """What every channel found, by channel name, and their links put together."""

    channels: dict[str, Hits] = field(default_factory=dict)
    memories: list[Memory] = field(default_factory=list)
    members: dict[tuple[str, str], EpisodeHit] = field(default_factory=dict)
    neighbours: Neighbours = field(default_factory=dict)

    @classmethod
    def of(cls, channels: dict[str, Hits]) -> Found:
        """The channels' hits; the first channel's links win over a later one's."""
        found = cls(channels)
        for hits in channels.values():
            found.memories += hits.memories
            found.members = {**hits.members, **found.members}
            found.neighbours = {**hits.neighbours, **found.neighbours}
        return found

    def ranked(self, name: str) -> list[Any]:
        """The records of one channel's hits, best first."""
        return [hit.record for hit in self.channels[name].hits]


async def search_channels(
    services: Services,
    search: Search,
    vector: list[float] | Awaitable[list[float]],
    channels: Sequence[RecallChannel],
) -> Found:
    """Every channel's search at once (`storage.recall_search.run_searches`).

    ``vector`` is the query's embedding, or the embedding still running: the searches
    that need none start before it is awaited. A channel that joins another's ranking
    sends its query on that channel's connection, after it, when their options are the
    same (one backend, one round trip, as one statement would). Driver errors are
    raised as `StoreUnavailable`.
    """
    where: dict[str, tuple[str, int]] = {}  # channel -> (its search, its statement)

    def searches(search: Search, vectored: bool) -> Searches:
        built: dict[str, list[Statement]] = {}
        options_of: dict[str, list[Statement]] = {}
        for c in channels:
            statements = c.statements(services, search) if c.needs_vector is vectored else None
            if not statements:
                continue
            *options, query = statements
            if c.ranking != c.name and options_of.get(c.ranking) == options:
                built[c.ranking].append(query)  # on the owner's connection, after it
                where[c.name] = (c.ranking, len(built[c.ranking]) - 1)
            else:
                built[c.name], options_of[c.name] = [*options, query], options
                where[c.name] = (c.name, len(options))
        return built

    rows = await run_searches(
        services.memories.db,
        lambda: searches(search, False),
        vector,
        lambda literal: searches(replace(search, vector=literal), True),
    )
    return Found.of(
        {
            c.name: c.read(rows[where[c.name][0]][where[c.name][1]], search)
            if c.name in where
            else Hits()
            for c in channels
        }
    )
