"""A turn's query embedding starts with its run, before LangGraph reads the checkpoint.

Through the compiled graph of `graph.builder.build_graph` (`graph.prefetch`), on the real
stores and model: the question is embedded once, first, and recall finds with it exactly
what it finds when it embeds the question itself; runs without a question embed nothing,
turns that do not search leave no embedding behind; an embedding error fails the turn as
it always did; a refused turn leaves no embedding running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from graph.builder import build_builder, build_graph
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.turn.validation import InvalidInputError
from tests.conftest import say


class Recorded(Embeddings):
    """The real embeddings, each query's start and end noted in ``log``; maybe slowed/broken."""

    def __init__(self, inner: Embeddings, log: list, delay_s: float = 0.0, error=None) -> None:
        self.inner, self.log, self.delay_s, self.error = inner, log, delay_s, error
        self.cancelled: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self.inner.aembed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        self.log.append(("embed", text, time.perf_counter()))
        try:
            await asyncio.sleep(self.delay_s)
            if self.error is not None:
                raise self.error
            return await self.inner.aembed_query(text)
        except asyncio.CancelledError:
            self.cancelled.append(text)
            raise


class RecordedSaver(AsyncPostgresSaver):
    """The session's Postgres checkpointer; each checkpoint read noted in ``log``."""

    log: list

    async def aget_tuple(self, config):  # noqa: ANN001, ANN201
        self.log.append(("checkpoint", None, time.perf_counter()))
        return await super().aget_tuple(config)


def _thread() -> str:
    return f"prefetch-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def recorded(services, checkpointer):
    """``(graph, embeddings, log)``: `build_graph` on the recorded embeddings and saver."""

    def make(delay_s: float = 0.0, error=None, settings: Settings | None = None):
        log: list = []
        embeddings = Recorded(services.embeddings, log, delay_s, error)
        saver = RecordedSaver(checkpointer.conn)
        saver.log = log
        recorded_services = dataclasses.replace(services, embeddings=embeddings)
        graph = build_graph(recorded_services, saver, settings=settings or Settings())
        return graph, embeddings, log

    return make


async def _seed(services, user_id: str, text: str) -> None:
    memory = Memory(user_id=user_id, kind="summary", text=text, importance=0.5, source_ids=["s1"])
    await services.memories.add(memory, await services.embeddings.aembed_query(text))


async def test_the_question_is_embedded_once_before_the_checkpoint_is_read(
    settings, recorded, make_context, services, checkpointer
):
    ctx = make_context()
    question = "Which city did I move to for the new job?"
    await _seed(services, ctx.user_id, "The user moved to Lisbon for a new job at a bakery.")
    graph, _embeddings, log = recorded()
    state = await say(graph, ctx, _thread(), question)

    embeds = [entry for entry in log if entry[0] == "embed"]
    assert [text for _, text, _ in embeds] == [question]  # once: recall did not embed again
    assert log[0][:2] == ("embed", question)  # before LangGraph read the thread's checkpoint
    assert any(kind == "checkpoint" for kind, *_ in log)
    assert "Lisbon" in " ".join(item["text"] for item in state["recalled"])

    # the same vector: what recall finds is what it finds when it embeds the question itself
    plain = build_builder(services, settings).compile(checkpointer=checkpointer)  # no prefetch
    itself = await say(plain, ctx, _thread(), question)

    def scored(s: dict) -> list[dict]:  # what the idle budget widens to (unscored) aside
        return [i for i in s["recalled"] if i["score"] is not None]

    assert [i["id"] for i in scored(itself)] == [i["id"] for i in scored(state)]
    assert [i["similarity"] for i in scored(itself)] == [i["similarity"] for i in scored(state)]


async def test_runs_without_a_question_embed_nothing(recorded, make_context):
    graph, embeddings, log = recorded()
    ctx, thread = make_context(), _thread()
    await say(graph, ctx, thread, "Remember that I like green tea.")
    log.clear()
    await graph.ainvoke({"end_session": True}, {"configurable": {"thread_id": thread}}, context=ctx)
    assert [entry for entry in log if entry[0] == "embed"] == []


@pytest.mark.parametrize(
    ("overrides", "settings", "started"),
    [
        ({"recall_mode": "flat"}, Settings(), False),
        ({"recall_mode": "tool"}, Settings(), False),
        ({}, Settings().override(memory_token_budget=0), True),
    ],
    ids=["flat-recall", "tool-recall", "no-memory-budget"],
)
async def test_turns_that_do_not_search_leave_no_embedding_behind(
    recorded, make_context, overrides, settings, started
):
    """A context that will not search starts none; a turn with no budget cancels its own."""
    graph, embeddings, log = recorded(delay_s=5.0, settings=settings)
    began = time.perf_counter()
    text = "Remember that I like green tea."
    await say(graph, make_context(**overrides), _thread(), text)
    assert time.perf_counter() - began < 4.0  # the turn did not wait for it
    await asyncio.sleep(0)
    assert embeddings.cancelled == ([text] if started else [])
    assert [t for kind, t, _ in log if kind == "embed"] == ([text] if started else [])


async def test_an_embedding_error_fails_the_turn_as_before(recorded, make_context):
    graph, _embeddings, _log = recorded(error=RuntimeError("embedding service down"))
    with pytest.raises(RuntimeError, match="embedding service down"):
        await say(graph, make_context(), _thread(), "What do I like to drink?")


async def test_a_refused_turn_leaves_no_embedding_running(recorded, make_context, services):
    settings = Settings().override(max_message_chars=100)
    graph, embeddings, log = recorded(delay_s=5.0, settings=settings)
    ctx = make_context()
    too_long = "tea " * 100
    started = time.perf_counter()
    with pytest.raises(InvalidInputError):
        await say(graph, ctx, _thread(), too_long)
    assert time.perf_counter() - started < 4.0  # the refusal did not wait for it
    assert [text for kind, text, _ in log if kind == "embed"] == [too_long]
    await asyncio.sleep(0)
    assert embeddings.cancelled == [too_long]
    assert not await services.memories.count(ctx.user_id)


async def test_the_graph_stays_prefetching_through_copies(recorded, make_context):
    graph, _embeddings, log = recorded()
    for copy in (graph.with_config({"tags": ["x"]}), graph.copy()):  # what the server does
        log.clear()
        await say(copy, make_context(), _thread(), "Which tea do I like?")
        assert log[0][:2] == ("embed", "Which tea do I like?")


async def test_a_message_given_as_a_dict_is_prefetched_too(recorded, make_context):
    graph, _embeddings, log = recorded()
    question = "What did I say about green tea?"
    await graph.ainvoke(
        {"messages": [{"role": "user", "content": question}]},
        {"configurable": {"thread_id": _thread()}},
        context=make_context(),
    )
    assert [(kind, text) for kind, text, _ in log][0] == ("embed", question)
    assert sum(kind == "embed" for kind, *_ in log) == 1
