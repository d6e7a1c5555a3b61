"""Recall's searches, side by side: each on a pooled connection of its own, all at once.

A search is the statements a recall channel asked its store for
(`memory_graph_agent.recall.channels`): HNSW options, then the query. Each is sent in
its own read-only transaction (`Database.pipeline`, after its ``SET LOCAL`` options), so
it returns exactly what its store method returns alone. They run at the same time, each
in its own Postgres backend: the wait is the slowest search, not their sum. The searches
that need no vector (the keyword search) start while the query is still being embedded;
the others start once it is, with the vector written once for all of them.
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
"""Searches by name: each one's statements, its query last."""
Rows = list[dict[str, Any]]


async def _rows(db: Database, *statements: Statement) -> Rows:
    return (await db.pipeline(*statements))[-1]


_guarded_rows = guard("postgres", _rows)


async def _with_vector(
    db: Database, started: dict[str, asyncio.Future], searches: Searches
) -> dict[str, Rows]:
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
) -> dict[str, Rows]:
    """Every search at once; the rows of each one's query, by name.

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
