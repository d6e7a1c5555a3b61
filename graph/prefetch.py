"""Start a turn's query embedding as its run starts, while LangGraph loads the checkpoint.

`PrefetchGraph` is the compiled graph whose ``astream`` (and so ``ainvoke``,
``astream_events`` and the server's runs, which all stream) starts embedding the input's
newest human message before LangGraph reads the thread's checkpoint, and hands it to the
run in its config (``configurable[QUERY_VECTOR]``, a key LangGraph never stores). The
``recall`` node takes it there (`query_vector`) for that same question, and starts its own
otherwise (a graph not built by `graph.builder.build_graph`). At the run's end an
embedding nobody took (a refused turn, ``tool`` or ``flat`` mode) is cancelled.

A run that will not search starts nothing: a session end or a memory run (no human
message in its input), a turn whose context asks for ``tool`` or ``flat`` recall.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.messages import convert_to_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.graph.state import CompiledStateGraph

from graph.context import QUERY_VECTOR, StartedVector
from memory_graph_agent.prompting.rendering import latest_human_text

EmbedQuery = Callable[[str], Awaitable[list[float]]]


def turn_question(input: Any) -> str:
    """The text a turn's recall will embed from ``input``, or '' (never raises)."""
    if not isinstance(input, dict) or input.get("end_session"):
        return ""
    try:
        return latest_human_text(convert_to_messages(input.get("messages") or []))
    except Exception:  # noqa: BLE001 - the run reports its bad input, not the prefetch
        return ""


class PrefetchGraph(CompiledStateGraph):
    """A compiled graph whose runs start their question's embedding first."""

    def __init__(self, *, embed_query: EmbedQuery | None = None, **kwargs: Any) -> None:
        """As `CompiledStateGraph`, plus the embedding of a question (``copy`` keeps it)."""
        super().__init__(**kwargs)
        self.embed_query = embed_query

    async def astream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """`CompiledStateGraph.astream`, the question's embedding running meanwhile."""
        searches = _searches(kwargs.get("context"))
        question = turn_question(input) if self.embed_query is not None and searches else ""
        if not question:
            async for part in super().astream(input, config, **kwargs):
                yield part
            return
        vector = asyncio.ensure_future(self.embed_query(question))  # type: ignore[misc]
        vector.add_done_callback(_read_error)  # one nobody takes logs nothing
        await asyncio.sleep(0)  # one loop pass: the embedding starts before the checkpoint read
        started = {"configurable": {QUERY_VECTOR: StartedVector(question, vector)}}
        try:
            async for part in super().astream(input, merge_configs(config, started), **kwargs):
                yield part
        finally:  # taken and done, or never taken: cancelled
            vector.cancel()


def _searches(context: Any) -> bool:
    """Whether a run with ``context`` may search: not with ``tool`` or ``flat`` recall."""
    if isinstance(context, Mapping):
        mode = context.get("recall_mode")
    else:
        mode = getattr(context, "recall_mode", None)
    return mode not in ("tool", "flat")


def with_query_prefetch(graph: CompiledStateGraph, embeddings: Embeddings) -> PrefetchGraph:
    """``graph`` whose runs start their question's embedding with ``embeddings`` first."""
    return PrefetchGraph(**{**graph.__dict__, "embed_query": embeddings.aembed_query})


def _read_error(future: asyncio.Future) -> None:
    """Mark a finished embedding's error as read (whoever takes it still gets it)."""
    if not future.cancelled():
        future.exception()
