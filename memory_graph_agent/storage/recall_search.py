"""Recall's searches, side by side: each on a pooled connection of its own, all at once.

A search is the statements recall's channels asked their stores for
(`memory_graph_agent.recall.channels`): HNSW options, then one query or several that
share them (sent one after the other on the same connection, in one round trip:
`Database.pipeline`). Each search returns exactly what its store methods return alone.
The searches run at the same time, each in its own Postgres backend: the wait is the
slowest search, not their sum. The searches that need no vector (the keyword search)
start while the query is still being embedded; the others start once it is, with the
vector written once for all of them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from memory_graph_agent.storage.memory_rows import VectorLiteral, vector_literal
from memory_graph_agent.storage.outages import guard
from memory_graph_agent.storage.postgres import Database, Statement

Searches = Mapping[str, Sequence[Statement]]
"""Searches by name: each one's ``SET LOCAL`` options, then its queries."""
Rows = list[dict[str, Any]]


async def _rows(db: Database, *statements: Statement) -> list[Rows]:
    return await db.pipeline(*statements)


_guarded_rows = guard("postgres", _rows)


async def _with_vector(
    db: Database, started: dict[str, asyncio.Future], searches: Searches
) -> dict[str, list[Rows]]:
    names = [*started, *searches]
    pending = [*started.values(), *(_rows(db, *s) for s in searches.values())]
    results = await asyncio.gather(*pending, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return dict(zip(names, results, strict=True))


_guarded_with_vector = guard("postgres", _with_vector)


async def run_searches(
    db: Database,
    without_vector: Callable[[], Searches],
    vector: list[float] | Awaitable[list[float]],
    with_vector: Callable[[VectorLiteral], Searches],
) -> dict[str, list[Rows]]:
    """Every search at once; by name, the rows of each of its statements (none: options).

    Args: the database; the searches that need no vector (started at once); the query
    vector, or the embedding still running (an error of the embedding is raised as it
    is); the searches of that vector (built and started when it is ready). Driver errors
    are raised as `StoreUnavailable`; on any error no search is left running, nor its
    error unread.
    """
    started: dict[str, asyncio.Future] = {}
    try:
        for name, statements in without_vector().items():
            started[name] = asyncio.ensure_future(_guarded_rows(db, *statements))
        if inspect.isawaitable(vector):
            vector = await vector
        return await _guarded_with_vector(db, started, with_vector(vector_literal(vector)))
    except BaseException:
        if inspect.iscoroutine(vector):  # never started: an invalid user id, say
            vector.close()
        for search in started.values():
            search.cancel()
        await asyncio.gather(*started.values(), return_exceptions=True)
        raise
