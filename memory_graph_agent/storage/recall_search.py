"""Recall's three searches, side by side: memories by vector, raw turns by vector and text.

The statements are the stores' own (`MemoryStore.search_statements`,
`EpisodeIndex.dense_statements`, `EpisodeIndex.keyword_statement`), each sent on a pooled
connection of its own in its own read-only transaction (`Database.pipeline`, after its
``SET LOCAL`` HNSW options), so every search returns exactly what its store method returns
alone. They run at the same time, each in its own Postgres backend: the wait is the
slowest search, not their sum. The keyword search needs no vector, so it starts while
the query is still being embedded.

Each statement also brings the memory graph's links of what it finds, in the same round
trip (`episode_links`): the memory search the turns of its summaries, each turn search
the neighbours of its best ``around`` turns. `linking.linked_turns` then
needs no second round trip unless one of the best fused turns was not among them. When
the query names someone who spoke, the dense turn search also returns that speaker's
nearest turns, in the same statement (speaker turns, `EpisodeIndex.dense_statements`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_graph_agent.storage.episode_index import EpisodeHit, dense_hits, keyword_hits
from memory_graph_agent.storage.episode_links import Neighbours, linked_hits, member_hits
from memory_graph_agent.storage.episodes import EpisodeLog
from memory_graph_agent.storage.memories import Memory, MemoryStore
from memory_graph_agent.storage.memory_rows import vector_literal
from memory_graph_agent.storage.outages import guard
from memory_graph_agent.storage.postgres import Database, Statement


@dataclass
class Found:
    """What each search found, best first."""

    memories: list[Memory] = field(default_factory=list)
    """The user's nearest active summaries and reflections (`MemoryStore.search`)."""
    dense: list[EpisodeHit] = field(default_factory=list)
    """The user's nearest raw turns (`EpisodeIndex.dense_search`)."""
    keyword: list[EpisodeHit] = field(default_factory=list)
    """The user's best raw turns by keyword (`EpisodeIndex.keyword_search`)."""
    members: dict[tuple[str, str], EpisodeHit] = field(default_factory=dict)
    """The indexed turns of the found summaries, by ``(thread_id, message_id)``."""
    neighbours: Neighbours = field(default_factory=dict)
    """The neighbours of each turn channel's best ``around`` turns (empty lists included)."""


async def _rows(db: Database, *statements: Statement) -> list[dict[str, Any]]:
    return (await db.pipeline(*statements))[-1]


_guarded_rows = guard("postgres", _rows)


async def _vector_searches(
    memories: MemoryStore,
    episodes: EpisodeLog,
    user_id: str,
    vector: list[float],
    k: int,
    depth: int,
    around: int,
    keyword: asyncio.Future | None,
    speakers: Sequence[str],
    speaker_k: int,
) -> Found:
    vector = vector_literal(vector)  # formatted once for both statements
    *options, search = memories.search_statements(user_id, vector, k)
    dense = episodes.linked_dense_statements(user_id, vector, depth, around, speakers, speaker_k)
    searches = [
        _rows(memories.db, *options, episodes.with_members(user_id, search)),
        _rows(memories.db, *dense),
    ]
    results = await asyncio.gather(
        *searches, *([keyword] if keyword else []), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result
    dense, neighbours = _linked(results[1], around)
    found = Found(
        memories=MemoryStore.found(results[0]),
        dense=dense_hits(dense),
        members=member_hits(results[0]),
        neighbours=neighbours,
    )
    if keyword:
        hits, near = _linked(results[2], around)
        found.keyword = keyword_hits(hits)
        found.neighbours = {**near, **found.neighbours}
    return found


def _linked(rows: list[dict[str, Any]], around: int) -> tuple[list[dict[str, Any]], Neighbours]:
    return linked_hits(rows, around) if around > 0 else (rows, {})


_guarded_vector_searches = guard("postgres", _vector_searches)


async def recall_search(
    memories: MemoryStore,
    episodes: EpisodeLog,
    user_id: str,
    vector: list[float] | Awaitable[list[float]],
    text: str,
    k: int,
    depth: int,
    around: int = 0,
    speakers: Sequence[str] = (),
    speaker_k: int = 0,
) -> Found:
    """The three searches of recall, at once; their driver errors raised as `StoreUnavailable`.

    Args: the memory store, the episode log, the user, the query vector (or the
    embedding still running: the keyword search starts before it is awaited, and an
    error of the embedding is raised as it is), the query text, ``k`` memories and
    ``depth`` turns per turn channel, the neighbours of each turn channel's best
    ``around`` turns (none with 0), and the words that may name speakers whose
    ``speaker_k`` nearest turns the dense turn search adds (none with 0). Returns the
    `Found` lists, each exactly what the store's own search returns.
    """
    keyword = None
    try:
        statement = episodes.linked_keyword_statement(user_id, text, depth, around)
        if statement is not None:
            keyword = asyncio.ensure_future(_guarded_rows(memories.db, statement))
        if inspect.isawaitable(vector):
            vector = await vector
        return await _guarded_vector_searches(
            memories, episodes, user_id, vector, k, depth, around, keyword, speakers, speaker_k
        )
    except BaseException:
        if inspect.iscoroutine(vector):  # never started: an invalid user id, say
            vector.close()
        if keyword is not None:  # not left running, nor its error unread
            keyword.cancel()
            await asyncio.gather(keyword, return_exceptions=True)
        raise
