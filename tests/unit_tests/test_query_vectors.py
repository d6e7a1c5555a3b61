"""Query embeddings started ahead of recall (`services.query_vectors`) and their start
from a graph run's input (`graph.prefetch`): pure logic, on a counting fake embedding."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from graph.prefetch import turn_question, with_query_prefetch
from memory_graph_agent.services.query_vectors import QueryVectors


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


async def test_a_started_embedding_is_taken_once_then_embedded_anew():
    embeddings = Counting()
    vectors = QueryVectors(embeddings)
    vectors.start("green tea")
    vectors.start("green tea")  # already running: not twice
    assert len(vectors) == 1
    assert await vectors.embed("green tea") == [9.0]
    assert len(vectors) == 0 and embeddings.queries == ["green tea"]
    assert await vectors.embed("green tea") == [9.0]  # taken: the next call embeds itself
    assert embeddings.queries == ["green tea", "green tea"]


async def test_an_embedding_error_reaches_whoever_takes_it():
    vectors = QueryVectors(Counting(error=RuntimeError("embedding service down")))
    vectors.start("tea")
    await asyncio.sleep(0.05)  # failed before anyone asked: nothing logged, still raised
    with pytest.raises(RuntimeError, match="embedding service down"):
        await vectors.embed("tea")


async def test_discard_cancels_and_the_memo_stays_bounded():
    vectors = QueryVectors(Counting())
    vectors.start("a")
    vectors.discard("a")
    vectors.discard("never started")
    assert len(vectors) == 0
    texts = [f"question {i}" for i in range(QueryVectors.size + 5)]
    for text in texts:
        vectors.start(text)
    assert len(vectors) == QueryVectors.size
    assert await vectors.embed(texts[-1]) == [float(len(texts[-1]))]


def test_an_embedding_of_another_loop_is_not_awaited():
    vectors = QueryVectors(Counting())

    async def start() -> None:
        vectors.start("tea")

    asyncio.run(start())  # that loop is closed now
    assert asyncio.run(vectors.embed("tea")) == [3.0]


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


async def test_a_graph_run_starts_its_question_once_and_only_its_own_run():
    embeddings = Counting()
    vectors = QueryVectors(embeddings)
    taken: list[list[float]] = []

    async def recall(state: MessagesState) -> dict:
        taken.append(await vectors.embed(state["messages"][-1].text))
        return {}

    async def after(state: MessagesState) -> dict:
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("recall", recall)
    builder.add_node("after", after)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "after")
    graph = with_query_prefetch(builder.compile(), vectors)
    for copy in (graph, graph.with_config(tags=["x"]), graph.copy()):  # what a server does
        await copy.ainvoke({"messages": [("human", "tea?")]}, {"callbacks": []})
    assert taken == [[4.0]] * 3
    assert embeddings.queries == ["tea?"] * 3  # once per run: the nodes started none
    assert len(vectors) == 0


async def test_an_embedding_the_run_did_not_take_is_cancelled_at_its_end():
    vectors = QueryVectors(Counting())

    async def refuse(state: MessagesState) -> dict:
        raise ValueError("refused")

    builder = StateGraph(MessagesState)
    builder.add_node("refuse", refuse)
    builder.add_edge(START, "refuse")
    graph = with_query_prefetch(builder.compile(), vectors)
    with pytest.raises(ValueError, match="refused"):
        await graph.ainvoke({"messages": [("human", "tea?")]})
    assert len(vectors) == 0


async def test_a_cancelled_run_leaves_nothing_behind():
    vectors = QueryVectors(Counting())

    async def slow(state: MessagesState) -> dict:
        await asyncio.sleep(10)
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("slow", slow)
    builder.add_edge(START, "slow")
    graph = with_query_prefetch(builder.compile(), vectors)
    run = asyncio.create_task(graph.ainvoke({"messages": [("human", "tea?")]}))
    await asyncio.sleep(0.05)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    (handler,) = graph.config["callbacks"].handlers
    assert len(vectors) == 0 and not handler._questions  # nothing kept per run
