"""A turn whose memory forms in the background writes its checkpoint once, when it ends.

Through the compiled graph (`build_graph` with a scheduler, as the CLI ships it) on the
real Postgres checkpointer: one checkpoint per turn (five with LangGraph's default,
``"async"``), holding all the turn did; a caller's own durability, inline memory and a
turn that fails behave as before (`graph.durability`).
"""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from graph.background import LocalScheduler
from graph.builder import build_graph
from memory_graph_agent.validation import InvalidInputError


class CountingSaver(AsyncPostgresSaver):
    """The session's Postgres checkpointer, counting the checkpoints it writes per thread.

    Memory runs (on their own memory threads) are not counted under the turn's thread.
    """

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.puts: dict[str, int] = {}

    async def aput(self, config, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
        thread = config["configurable"]["thread_id"]
        self.puts[thread] = self.puts.get(thread, 0) + 1
        return await super().aput(config, *args, **kwargs)

    def count(self, config: dict) -> int:
        """Checkpoints written on ``config``'s thread since the last call."""
        return self.puts.pop(config["configurable"]["thread_id"], 0)


@pytest.fixture
async def background(services, checkpointer):
    """``(graph, saver)``: the graph with a memory scheduler, on a counting saver."""
    saver = CountingSaver(checkpointer.conn)
    memory = LocalScheduler()
    return memory.bind(build_graph(services, saver, scheduler=memory)), saver


def _config() -> dict:
    return {"configurable": {"thread_id": f"durability-{uuid.uuid4().hex[:8]}"}}


async def _turn(graph, ctx, config, text: str, **kwargs) -> dict:
    return await graph.ainvoke({"messages": [HumanMessage(text)]}, config, context=ctx, **kwargs)


async def test_a_background_turn_writes_one_checkpoint_holding_the_whole_turn(
    background, make_context
):
    graph, saver = background
    ctx, config = make_context(), _config()
    await _turn(graph, ctx, config, "Hello, I am planning a trip to Oslo.")
    saver.count(config)
    state = await _turn(graph, ctx, config, "Which city did I say?")

    assert saver.count(config) == 1  # 5 with "async": the input's two, one after each step
    saved = (await graph.aget_state(config)).values
    assert [m.type for m in saved["messages"]] == [m.type for m in state["messages"]]
    assert saved["messages"][-1].content == state["messages"][-1].content  # the reply
    assert saved["profile"] == state["profile"] and saved["recalled"] == state["recalled"]
    for copy in (graph.with_config({"tags": ["x"]}), graph.copy()):  # what the server does
        assert copy.background is True


async def test_a_callers_durability_and_inline_memory_keep_langgraphs_default(
    background, make_context
):
    graph, saver = background
    config = _config()
    await _turn(graph, make_context(), config, "Hello there.")
    saver.count(config)
    await _turn(graph, make_context(), config, "Asked for async.", durability="async")
    assert saver.count(config) == 5

    await _turn(graph, make_context(memory_mode="inline"), config, "Memory inline now.")
    assert saver.count(config) >= 4


async def test_a_refused_turn_leaves_the_checkpoint_as_langgraphs_default_does(
    background, make_context
):
    """The refused input stays in the thread's checkpoint either way, as documented

    (`test_bad_input.py`: until `discard_rejected` removes it)."""
    graph, _ = background
    ctx = make_context(max_message_chars=50)
    saved = {}
    for durability in ("exit", "async"):
        config = _config()
        await _turn(graph, ctx, config, "Hello.")
        kwargs = {} if durability == "exit" else {"durability": durability}
        with pytest.raises(InvalidInputError):
            await _turn(graph, ctx, config, "far too long " * 10, **kwargs)
        messages = (await graph.aget_state(config)).values["messages"]
        saved[durability] = [(m.type, m.content) for m in messages]
    assert saved["exit"] == saved["async"]
    assert saved["exit"][-1] == ("human", "far too long " * 10)
