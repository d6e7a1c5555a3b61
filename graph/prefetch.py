"""What a turn's run gets as it starts: its question's embedding, and its durability.

`MemoryGraph` is the compiled graph whose ``astream`` (and so ``ainvoke``,
``astream_events`` and the server's runs, which all stream) does, for a run that is a turn
(its input has a human message to answer):

- starts embedding that message before LangGraph reads the thread's checkpoint, and hands
  it to the run in its config (``configurable[QUERY_VECTOR]``, a key LangGraph never
  stores). The ``recall`` node takes it there (`graph.context.query_vector`) for that
  same question, and starts its own otherwise (a graph not built by
  `graph.builder.build_graph`). At the run's end an embedding nobody took (a refused turn,
  no memory budget) is cancelled. A turn whose context asks for ``tool`` or ``flat``
  recall starts none;
- runs with the graph's turn durability (`graph.durability`) when the caller asked for
  ``"async"`` or nothing.

Session ends and memory runs (no human message in their input) are LangGraph's own.
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
from langgraph.types import Durability

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


class MemoryGraph(CompiledStateGraph):
    """A compiled graph whose turns start their question's embedding first."""

    def __init__(
        self,
        *,
        embed_query: EmbedQuery | None = None,
        turn_durability: Durability | None = None,
        **kwargs: Any,
    ) -> None:
        """As `CompiledStateGraph`, plus the question's embedding and the turns' durability.

        (``copy`` and ``with_config``, which the server calls, keep them.)
        """
        super().__init__(**kwargs)
        self.embed_query = embed_query
        self.turn_durability = turn_durability

    async def astream(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """`CompiledStateGraph.astream`; a turn's question embedding meanwhile."""
        question = turn_question(input)
        if question and self.turn_durability and kwargs.get("durability") in (None, "async"):
            kwargs["durability"] = self.turn_durability
        if self.embed_query is None or not _searches(kwargs.get("context")):
            question = ""
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


def as_memory_graph(
    graph: CompiledStateGraph, embeddings: Embeddings, turn_durability: Durability | None = None
) -> MemoryGraph:
    """``graph`` as a `MemoryGraph`: ``embeddings`` embed its turns' questions.

    ``turn_durability``: its turns' durability (``None``: as the caller asks).
    """
    extra = {"embed_query": embeddings.aembed_query, "turn_durability": turn_durability}
    return MemoryGraph(**{**graph.__dict__, **extra})


def _read_error(future: asyncio.Future) -> None:
    """Mark a finished embedding's error as read (whoever takes it still gets it)."""
    if not future.cancelled():
        future.exception()
