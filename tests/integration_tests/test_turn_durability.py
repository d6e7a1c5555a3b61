"""A turn whose memory forms in the background writes its checkpoint once, when it ends.

Through the CLI's `run_turn` and a plain ``ainvoke`` with ``durability="async"`` (what
the server passes when its client asks for nothing) on the graph with a memory scheduler
(as `open_agent` and `make_graph` build it) and the real Postgres checkpointer: one
checkpoint per turn (five with LangGraph's default, ``"async"``), holding all the turn
did. Session ends, memory runs, inline memory and a caller asking ``"sync"`` keep a
checkpoint per step; a turn whose scheduler fails leaves its memory waiting instead of
forming it in its own run (`graph.durability`). What a crash mid-turn loses with each
choice: `test_a_turn_killed_mid_reply_is_answered_once_when_sent_again`.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from graph.background import LocalScheduler, memory_thread_id
from graph.builder import build_graph
from graph.durability import turn_durability
from memory_graph_agent.cli.session import end_session, run_turn
from memory_graph_agent.settings import Settings
from memory_graph_agent.turn.validation import InvalidInputError
from tests.conftest import kinds
from tests.integration_tests.memory_child import CRASH_TEXT, crash_id, kill_mid_reply
from tests.integration_tests.test_durability import _assert_exactly_once


class CountingSaver(AsyncPostgresSaver):
    """The session's Postgres checkpointer, counting the checkpoints it writes per thread."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.puts: dict[str, int] = {}

    async def aput(self, config, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
        thread = config["configurable"]["thread_id"]
        self.puts[thread] = self.puts.get(thread, 0) + 1
        return await super().aput(config, *args, **kwargs)

    def count(self, thread: str) -> int:
        """Checkpoints written on ``thread`` since the last call."""
        return self.puts.pop(thread, 0)


class FailingScheduler:
    """A memory scheduler that cannot be reached."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(  # noqa: ANN001
        self, context, thread_id, compress, after_s=None, *, delay_s=0.0
    ) -> None:
        self.calls += 1
        raise ConnectionError("scheduler unreachable")


@pytest.fixture
async def saver(checkpointer) -> CountingSaver:
    return CountingSaver(checkpointer.conn)


@pytest.fixture
def background(services, saver):
    """``background(settings)``: ``(agent, memory)``, with a local memory scheduler, as the
    CLI opens it."""

    def make(settings: Settings | None = None) -> tuple[Any, LocalScheduler]:
        memory = LocalScheduler()
        graph = build_graph(services, saver, scheduler=memory, settings=settings or Settings())
        return memory.bind(graph), memory

    return make


def _thread() -> str:
    return f"durability-{uuid.uuid4().hex[:8]}"


async def test_a_background_turn_writes_one_checkpoint_holding_the_whole_turn(
    settings, background, saver, make_context
):
    agent, memory = background()
    ctx, thread = make_context(), _thread()
    assert turn_durability(settings, memory) == "exit"
    await run_turn(agent, ctx, thread, "Hello, I am planning a trip to Oslo.")
    assert saver.count(thread) == 1  # the first turn of a thread too
    config = {"configurable": {"thread_id": thread}}
    ask = {"messages": [("user", "Which city did I say?")]}  # the server's way: "async"
    state = await agent.ainvoke(ask, config, context=ctx, durability="async")

    assert saver.count(thread) == 1  # 5 with "async": the input's, one after each step
    saved = (await agent.aget_state({"configurable": {"thread_id": thread}})).values
    assert [m.type for m in saved["messages"]] == [m.type for m in state["messages"]]
    assert saved["messages"][-1].content == state["messages"][-1].content  # the reply
    assert saved["profile"] == state["profile"] and saved["recalled"] == state["recalled"]
    await memory.drain()


async def test_session_ends_memory_runs_and_inline_memory_keep_langgraphs_default(
    services, background, saver, make_context
):
    settings = Settings().override(window_size=2, summary_batch=2)
    agent, memory = background(settings)
    ctx, thread = make_context(), _thread()
    await run_turn(agent, ctx, thread, "Hello there.", settings=settings)
    saver.count(thread)
    config = {"configurable": {"thread_id": thread}}
    asked = {"messages": [("user", "A checkpoint per step, please.")]}
    await agent.ainvoke(asked, config, context=ctx, durability="sync")  # the caller's choice
    assert saver.count(thread) == 5

    settings_inline = Settings().override(window_size=2, summary_batch=2, memory_mode="inline")
    inline = make_context()
    assert turn_durability(settings_inline, memory) is None
    inline_agent = build_graph(services, saver, scheduler=memory, settings=settings_inline)
    await run_turn(inline_agent, inline, thread, "Memory inline now.", settings=settings_inline)
    assert saver.count(thread) >= 5

    for i in range(3):  # background turns: a memory run forms what they evict
        await run_turn(agent, ctx, thread, f"number {i}", settings=settings)
    assert saver.count(thread) == 3
    await memory.drain()
    assert saver.count(memory_thread_id(ctx.user_id, thread)) >= 4  # a memory run: async

    archive = await end_session(agent, ctx, thread, memory)
    assert not archive["messages"] and saver.count(thread) >= 4


async def test_a_failed_scheduler_call_leaves_memory_waiting_not_in_the_turn(
    services, saver, make_context, fake_model
):
    """The turn's run (durability "exit") never forms memory; a later memory run does."""
    settings = Settings().override(window_size=2, summary_batch=2)
    failing = FailingScheduler()
    agent = build_graph(services, saver, scheduler=failing, settings=settings)
    ctx, thread = make_context(), _thread()
    assert turn_durability(settings, failing) == "exit"
    states = [
        await run_turn(agent, ctx, thread, f"number {i}", settings=settings) for i in range(4)
    ]

    assert failing.calls >= 1
    last = states[-1]
    assert ("trim_window", "deferred") in kinds(last)
    assert ("trim_window", "inline") not in kinds(last)
    assert last["memory_scheduled"] and last["pending_count"] >= settings.formation.summary_batch
    assert "summarize" not in fake_model.purposes  # no memory model call in any turn
    assert (await services.memories.count(ctx.user_id)).get("summary", 0) == 0
    assert saver.count(thread) == 4  # one per turn: nothing ran after the reply

    memory = LocalScheduler()  # the scheduler is back: the next turn hands the work on
    agent = memory.bind(build_graph(services, saver, scheduler=memory, settings=settings))
    state = await run_turn(agent, ctx, thread, "number 4", settings=settings)
    assert ("trim_window", "scheduled") in kinds(state)
    await memory.drain()
    assert memory.failures == 0
    assert (await services.memories.count(ctx.user_id)).get("summary", 0) >= 1
    await end_session(agent, ctx, thread, memory)
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_a_refused_background_turn_leaves_the_thread_clean(
    background, services, make_context
):
    settings = Settings().override(max_message_chars=50)
    agent, memory = background(settings)
    ctx, thread = make_context(), _thread()
    await run_turn(agent, ctx, thread, "Hello.", settings=settings)
    with pytest.raises(InvalidInputError):
        await run_turn(agent, ctx, thread, "far too long " * 10, settings=settings)
    state = await run_turn(agent, ctx, thread, "Short again.", settings=settings)

    said = [m.content for m in state["messages"] if m.type == "human"]
    assert said == ["Hello.", "Short again."]
    window = [m.content for m in await services.window.window(ctx.user_id, thread)]
    assert "far too long " * 10 not in window and window[-2] == "Short again."
    await memory.drain()


@pytest.mark.parametrize("durability", ["graph", "sync"])
async def test_a_turn_killed_mid_reply_is_answered_once_when_sent_again(
    durability, services, checkpointer, make_context, user_id
):
    """What a crash mid-turn loses, with the graph's ``"exit"`` and with ``"sync"``.

    ``"exit"``: the thread's checkpoint is as the previous turn left it (not even the new
    message); ``"sync"``: it holds the new message and the turn's first step. Either way,
    the same input sent again (as the server retries a run whose worker died, or a user
    sends the message again) is answered once, and every message reaches the window once.
    """
    thread = _thread()
    await kill_mid_reply(user_id, thread, durability)
    ctx = make_context()
    memory = LocalScheduler()
    agent = memory.bind(build_graph(services, checkpointer, scheduler=memory))
    config = {"configurable": {"thread_id": thread}}
    kept = (await agent.aget_state(config)).values
    ids = [m.id for m in kept["messages"]]
    if durability == "graph":
        assert crash_id(thread) not in ids and len(ids) == 2, "the previous turn's checkpoint"
    else:
        assert ids[-1] == crash_id(thread) and "profile" in kept, "the new message, step 1"

    again = {"messages": [HumanMessage(CRASH_TEXT, id=crash_id(thread))]}
    state = await agent.ainvoke(again, config, context=ctx)
    await memory.drain()
    assert [m.type for m in state["messages"]] == ["human", "ai", "human", "ai"]
    assert [m.id for m in state["messages"]].count(crash_id(thread)) == 1
    window = [m.id for m in await services.window.window(user_id, thread)]
    assert len(window) == len(set(window)) == 4, window
