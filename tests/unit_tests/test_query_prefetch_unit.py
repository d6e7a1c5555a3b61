"""A graph run's question embedded as the run starts and handed to its nodes in the run's
config (`graph.prefetch`): pure logic, on a counting fake embedding."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from graph.context import query_vector
from graph.prefetch import as_memory_graph, turn_question


class Counting(Embeddings):
    """``len(text)`` as a one-number vector; counts each query; may fail."""

    def __init__(self, error: Exception | None = None) -> None:
        self.queries: list[str] = []
        self.error = error

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(t))] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        if self.error is not None:
            raise self.error
        return [float(len(text))]


@pytest.mark.parametrize(
    "given, question",
    [
        ({"messages": [HumanMessage("hi"), AIMessage("hello"), HumanMessage("tea?")]}, "tea?"),
        ({"messages": [{"role": "user", "content": "as a dict"}]}, "as a dict"),
        ({"messages": [("human", "as a tuple")]}, "as a tuple"),
        ({"end_session": True}, ""),
        ({"compress": True}, ""),  # a memory run's input
        ({"messages": [{"nonsense": 1}]}, ""),  # refused by the run, not by the prefetch
        ("not a dict", ""),
    ],
)
def test_the_question_is_the_inputs_newest_human_message(given, question):
    assert turn_question(given) == question


def _graph(node, embeddings: Embeddings):  # noqa: ANN001, ANN202
    builder = StateGraph(MessagesState)
    builder.add_node("recall", node)
    builder.add_edge(START, "recall")
    return as_memory_graph(builder.compile(), embeddings)


async def test_a_graph_run_hands_its_question_to_its_nodes_once_and_only_its_own():
    embeddings = Counting()
    taken: list[list[float] | None] = []

    async def recall(state: MessagesState) -> dict:
        if state["messages"]:
            vector = query_vector(state["messages"][-1].text)
            taken.append(None if vector is None else await vector)
            assert query_vector("another question") is None  # only the run's own question
        return {}

    graph = _graph(recall, embeddings)
    for copy in (graph, graph.with_config(tags=["x"]), graph.copy()):  # what a server does
        await copy.ainvoke({"messages": [("human", "tea?")]}, {"callbacks": []})
    assert taken == [[4.0]] * 3
    assert embeddings.queries == ["tea?"] * 3  # once per run
    await graph.ainvoke({"end_session": True})  # no question: nothing started
    assert embeddings.queries == ["tea?"] * 3


async def test_an_embedding_error_reaches_whoever_takes_it():
    async def recall(state: MessagesState) -> dict:
        await query_vector("tea?")  # type: ignore[misc]
        return {}

    graph = _graph(recall, Counting(error=RuntimeError("embedding service down")))
    with pytest.raises(RuntimeError, match="embedding service down"):
        await graph.ainvoke({"messages": [("human", "tea?")]})


class Slow(Counting):
    """Takes 10 s per query; notes the cancelled ones."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[str] = []

    async def aembed_query(self, text: str) -> list[float]:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancelled.append(text)
            raise
        return [0.0]


async def test_an_embedding_the_run_did_not_take_is_cancelled_at_its_end():
    embeddings = Slow()

    async def refuse(state: MessagesState) -> dict:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        await _graph(refuse, embeddings).ainvoke({"messages": [("human", "tea?")]})
    await asyncio.sleep(0)
    assert embeddings.cancelled == ["tea?"]


async def test_a_cancelled_run_leaves_nothing_behind():
    embeddings = Slow()

    async def slow(state: MessagesState) -> dict:
        await asyncio.sleep(10)
        return {}

    run = asyncio.create_task(_graph(slow, embeddings).ainvoke({"messages": [("human", "tea?")]}))
    await asyncio.sleep(0.05)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0)
    assert embeddings.cancelled == ["tea?"]
