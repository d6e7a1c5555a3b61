"""Start a turn's query embedding as its run starts, while LangGraph loads the checkpoint.

`with_query_prefetch` binds a callback handler (LangChain's public callbacks, through the
graph's own config) to a compiled graph. LangGraph calls its ``on_chain_start`` with the
run's input before it reads the thread's checkpoint; the handler starts embedding the
input's newest human message (`services.query_vectors.QueryVectors.start`), and the
``recall`` node takes that embedding instead of starting its own. Only the graph's own run
calls it (the handler is not inherited by nodes or subgraphs), and it works the same under
``ainvoke``, ``astream``, ``astream_events`` and the server's runs.

The handler sees the input, not the run's context: a run that will not search (a session
end, a memory run) has no human message in its input and starts nothing; a turn that
does not search (``tool`` or ``flat`` mode, no memory budget) or is refused starts one
that nobody takes, and it is cancelled when the run ends.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, AsyncCallbackManager
from langchain_core.messages import convert_to_messages
from langgraph.pregel import Pregel

from memory_graph_agent.prompting.rendering import latest_human_text
from memory_graph_agent.services.query_vectors import QueryVectors

G = TypeVar("G", bound=Pregel)


def turn_question(input: Any) -> str:
    """The text a turn's recall will embed from ``input``, or '' (never raises)."""
    if not isinstance(input, dict) or input.get("end_session"):
        return ""
    try:
        return latest_human_text(convert_to_messages(input.get("messages") or []))
    except Exception:  # noqa: BLE001 - the run reports its bad input, not the prefetch
        return ""


class QueryPrefetch(AsyncCallbackHandler):
    """On a graph run's start, start embedding its input's question; cancel it at its end.

    At the run's end an embedding ``recall`` did not take (the turn was refused) is
    cancelled; one it took is the node's already.
    """

    run_inline = True  # awaited in turn, before LangGraph reads the checkpoint

    def __init__(self, vectors: QueryVectors) -> None:
        self.vectors = vectors
        self._questions: dict[UUID, str] = {}  # runs in flight -> their question

    async def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        """Start the embedding of ``inputs``' newest human message, if it has one."""
        if question := turn_question(inputs):
            self._questions[run_id] = question
            self.vectors.start(question)
            await asyncio.sleep(0)  # one loop pass: the embedding is handed to its thread

    async def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """The run is over: cancel its embedding if nobody took it."""
        self._end(run_id)

    async def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """The run failed (a refused turn, say): cancel its embedding if nobody took it."""
        self._end(run_id)

    def _end(self, run_id: UUID) -> None:
        if (question := self._questions.pop(run_id, None)) is not None:
            self.vectors.discard(question)


def with_query_prefetch(graph: G, vectors: QueryVectors) -> G:
    """``graph`` whose runs start their question's embedding first (a copy; same graph)."""
    callbacks = AsyncCallbackManager(handlers=[QueryPrefetch(vectors)], inheritable_handlers=[])
    return graph.with_config(callbacks=callbacks)
