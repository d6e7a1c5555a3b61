"""Embed a turn's question as its run starts, while LangGraph still loads the checkpoint.

A turn's recall needs the embedding of the new human message, and nothing else in the
turn changes it. The compiled graph (`graph.builder.MemoryAgentGraph`) starts that
embedding (`prefetched`) when ``astream`` (so also ``ainvoke``, ``astream_events`` and
the server's runs) is called, before LangGraph reads the thread's checkpoint and writes
the input; the ``recall`` node then takes it (`take_query_vector`) instead of starting
its own. Nothing else changes: the same text, the same embedding call, so the same
vector; an error of the embedding is raised in ``recall`` as before.

Only a turn that will search starts one: a human message in the input, ``recall_mode``
``"auto"``, a memory budget, no ``end_session`` and no ``memory_of`` (a memory run). An
input or context the graph will refuse starts nothing. A prefetch ``recall`` does not take
(the node refused the input, or the state's newest human text differs) is cancelled
when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.messages import convert_to_messages

from graph.context import Context
from memory_graph_agent.turn.rendering import latest_human_text


@dataclass
class QueryPrefetch:
    """The embedding of one run's question, started before the run's first node."""

    text: str
    vector: asyncio.Future[list[float]]
    taken: bool = False

    def take(self, text: str) -> Awaitable[list[float]] | None:
        """The embedding of ``text`` if it is this one's and not taken yet, else ``None``."""
        if self.taken or text != self.text or self.vector.cancelled():
            return None
        self.taken = True
        return self.vector

    def close(self) -> None:
        """At the run's end: cancel it if still running, else read its error (not logged)."""
        if self.vector.done():
            if not self.vector.cancelled():
                self.vector.exception()
        else:
            self.vector.cancel()


_PREFETCH: ContextVar[QueryPrefetch | None] = ContextVar("memory_query_prefetch", default=None)


def take_query_vector(text: str) -> Awaitable[list[float]] | None:
    """This run's prefetched embedding of ``text`` (once), or ``None``: embed it yourself."""
    prefetch = _PREFETCH.get()
    return None if prefetch is None else prefetch.take(text)


def turn_question(input: Any, context: Any) -> str | None:
    """The text a turn's recall will embed, or ``None`` if this run will not search.

    Never raises: an input or context the graph refuses (it says why, in its own
    error) simply starts no embedding.
    """
    try:
        ctx = context if isinstance(context, Context) else Context(**(context or {}))
        if ctx.recall_mode != "auto" or ctx.memory_token_budget <= 0 or ctx.memory_of:
            return None
        if not isinstance(input, dict) or input.get("end_session"):
            return None
        messages = convert_to_messages(input.get("messages") or [])
    except Exception:  # noqa: BLE001 - the run reports bad input, not the prefetch
        return None
    return latest_human_text(messages) or None  # what `recall` will ask of the state


@contextlib.asynccontextmanager
async def prefetched(embeddings: Embeddings, input: Any, context: Any) -> AsyncIterator[None]:
    """Within: ``input``'s question is being embedded, for ``recall`` to take; cancelled after.

    Starts nothing if the run will not search (`turn_question`). The embedding is
    handed to its worker thread before this yields.
    """
    text = turn_question(input, context)
    if text is None:
        yield
        return
    prefetch = QueryPrefetch(text, asyncio.ensure_future(embeddings.aembed_query(text)))
    token = _PREFETCH.set(prefetch)
    try:
        await asyncio.sleep(0)  # one loop pass: the embedding is submitted to its thread
        yield
    finally:
        prefetch.close()
        with contextlib.suppress(ValueError):  # exited in another context: it ends with it
            _PREFETCH.reset(token)
