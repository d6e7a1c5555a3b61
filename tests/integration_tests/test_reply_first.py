"""Reply first, remember after: streamed replies, background memory runs, exactly once.

Memory work is held back by a gate on the fake model's memory calls, so each test can
look at the conversation *while* memory is still running.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from graph.background import LocalScheduler, memory_thread_id
from graph.builder import build_graph
from memory_graph_agent.cli.session import end_session, run_turn
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, block, purpose_of
from tests.conftest import kinds
from tests.integration_tests.memory_child import kill_inside_a_memory_run
from tests.integration_tests.test_durability import _assert_exactly_once

SECRET = "SECRET-MEMORY-TOKENS"
REPO_ROOT = Path(__file__).resolve().parents[2]


class GatedChatModel(ScriptedChatModel):
    """The scripted fake; its memory calls (any purpose but the reply) wait for ``gate``."""

    gate: Any = None
    started: Any = None

    async def _wait(self, run_manager: Any) -> None:
        if purpose_of(run_manager.tags if run_manager else None) != "reply":
            self.started.set()
            await self.gate.wait()

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        await self._wait(run_manager)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN201
        await self._wait(run_manager)
        async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
            yield chunk


@pytest.fixture
def gated() -> GatedChatModel:
    return GatedChatModel(
        gate=asyncio.Event(),
        started=asyncio.Event(),
        handlers={"summarize": lambda _: f"{SECRET}: the user chatted about numbers."},
    )


@pytest.fixture
def background(services, checkpointer) -> tuple[Any, LocalScheduler]:
    """``background(settings)``: ``(agent, memory)``, memory runs in this process."""

    def make(settings: Settings | None = None) -> tuple[Any, LocalScheduler]:
        memory = LocalScheduler()
        graph = build_graph(services, checkpointer, scheduler=memory, settings=settings)
        return memory.bind(graph), memory

    return make


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_the_reply_streams_and_the_next_turn_runs_while_memory_works(
    background, gated, make_context, services
):
    settings = Settings().override(window_size=2, summary_batch=2)
    agent, memory = background(settings)
    ctx = make_context(model_obj=gated)
    thread = _thread()
    tokens: list[str] = []
    state: dict = {}
    for i in range(3):  # turn 2 moves a batch of 2 out of the window: memory is scheduled
        state = await run_turn(
            agent, ctx, thread, f"number {i}", on_token=tokens.append, settings=settings
        )
        if state.get("memory_scheduled"):
            break
    assert state["memory_scheduled"] and ("trim_window", "scheduled") in kinds(state)
    await asyncio.wait_for(gated.started.wait(), 10)  # the memory run is in its model call
    # the reply streamed, token by token, and the turn's run ended, memory still working
    assert "".join(tokens).endswith(state["messages"][-1].text)
    assert memory.pending(ctx.user_id, thread)
    assert await services.memories.count(ctx.user_id) == {}
    # the next turn does not wait for it
    tokens.clear()
    nxt = await asyncio.wait_for(
        run_turn(agent, ctx, thread, "and now?", tokens.append, settings=settings), 10
    )
    assert "".join(tokens) == nxt["messages"][-1].text and memory.pending(ctx.user_id, thread)
    assert SECRET not in "".join(tokens)
    gated.gate.set()
    await memory.drain()
    assert (await services.memories.count(ctx.user_id)).get("summary", 0) >= 1
    assert memory.failures == 0
    # the thread summary a memory run wrote reaches the thread's next prompt
    await run_turn(agent, ctx, thread, "what did we talk about?", settings=settings)
    assert "number 0" in block(gated.system_prompts()[-1], "summary")
    await end_session(agent, ctx, thread, memory)
    await _assert_exactly_once(services, ctx.user_id, thread)


@pytest.mark.parametrize("mode", ["inline", "background"])
async def test_memory_tokens_never_reach_the_users_stream(background, make_context, services, mode):
    model = ScriptedChatModel(handlers={"summarize": lambda _: f"{SECRET} summary"})
    settings = Settings().override(window_size=2, summary_batch=2, memory_mode=mode)
    agent, memory = background(settings)
    ctx = make_context(model_obj=model)
    thread = _thread()
    streamed: list[tuple[str, str]] = []
    for i in range(6):
        config = {"configurable": {"thread_id": thread}}
        async for chunk, meta in agent.astream(
            {"messages": [HumanMessage(f"number {i}")]}, config, context=ctx, stream_mode="messages"
        ):
            streamed.append((meta["langgraph_node"], chunk.text))
        await memory.drain()
    assert "summarize" in model.purposes  # memory did call the model ...
    assert (await services.memories.count(ctx.user_id)).get("summary", 0) >= 1
    # ... yet only the reply's tokens were streamed
    assert {node for node, _ in streamed} == {"respond"}
    assert not any(SECRET in text for _, text in streamed)


async def test_a_memory_run_runs_on_its_own_thread_and_names_the_conversation(
    background, make_context, services, checkpointer
):
    settings = Settings().override(window_size=2, summary_batch=2)
    agent, memory = background(settings)
    ctx = make_context()
    thread = _thread()
    for i in range(4):
        await run_turn(agent, ctx, thread, f"number {i}", settings=settings)
    await memory.drain()
    memory_thread = memory_thread_id(ctx.user_id, thread)
    saved = await agent.aget_state({"configurable": {"thread_id": memory_thread}})
    assert saved.values.get("summaries_since_reflection", 0) >= 1
    assert not saved.values.get("messages")  # no conversation copied into the memory thread
    # each memory run reports only itself: the memory thread's state does not grow
    starts = [e for e in saved.values["memory_events"] if e["kind"] == "backlog"]
    assert len(starts) == 1 and saved.values["memory_events"][0]["node"] == "backlog"
    stored = await services.memories.list(ctx.user_id, kind="summary")
    assert stored and {m.thread_id for m in stored} == {thread}


async def test_exactly_once_when_the_process_dies_during_background_memory(
    background, make_context, services, user_id
):
    thread = _thread()
    await kill_inside_a_memory_run(services, user_id, thread, "graph")
    settings = Settings().override(window_size=2, summary_batch=2)
    agent, memory = background(settings)
    ctx = make_context()
    for i in range(3):
        await run_turn(agent, ctx, thread, f"number {i} after the crash", settings=settings)
    await memory.drain()
    await end_session(agent, ctx, thread, memory)
    await _assert_exactly_once(services, user_id, thread)
    summarized = {
        sid for m in await services.memories.list(user_id, kind="summary") for sid in m.source_ids
    }
    logged = await services.episodes.history(user_id, thread)
    assert {m.id for m in logged if "killed process" in m.content} <= summarized


async def test_recall_writes_nothing_before_the_reply_access_is_recorded_after(
    graph_for, make_context, services
):
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    for text in ("My sister Anna is a marine biologist in Oslo.", "How do I boil an egg?"):
        await run_turn(agent, ctx, thread, text, settings=settings)
    (summary,) = await services.memories.list(ctx.user_id, kind="summary")
    at_reply: list[int] = []

    class Probe(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN202
            if purpose_of(run_manager.tags if run_manager else None) == "reply":
                stored = await services.memories.list(ctx.user_id, kind="summary")
                at_reply.append(stored[0].access_count)
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    probe = make_context(model_obj=Probe())
    state = await run_turn(agent, probe, _thread(), "What does my sister do?", settings=settings)
    assert [i["id"] for i in state["recalled"]][:1] == [summary.id]
    assert at_reply == [0]  # the hot path before the model wrote no access statistics
    (stored,) = await services.memories.list(ctx.user_id, kind="summary")
    assert stored.access_count == 1  # recorded by trim_window, after the reply


async def test_a_memory_run_that_reflects_goes_on_while_a_full_batch_waits(
    background, make_context, services
):
    settings = Settings().override(
        window_size=2, summary_batch=2, reflect_after=1, memory_delay_s=0.5
    )
    agent, memory = background(settings)
    ctx = make_context()
    thread = _thread()
    for i in range(6):  # faster than the delay: one coalesced run finds several batches
        await run_turn(agent, ctx, thread, f"number {i}", settings=settings)
    await memory.drain()
    assert await services.queue.backlog(ctx.user_id, thread) < settings.formation.summary_batch
    counts = await services.memories.count(ctx.user_id)
    assert counts["summary"] >= 4 and counts.get("reflection", 0) >= 1
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_a_batch_leased_by_a_dead_worker_is_summarized_when_the_lease_ends(
    background, make_context, services
):
    """The memory run finds the batch leased; it comes back when the lease ends, no turn needed."""
    settings = Settings().override(window_size=2, summary_batch=2, memory_delay_s=0.5)
    agent, memory = background(settings)
    ctx = make_context()
    thread = _thread()
    for i in range(3):  # turn 2 moves a batch of 2 out of the window: memory is scheduled
        state = await run_turn(agent, ctx, thread, f"number {i}", settings=settings)
    assert state.get("memory_scheduled")
    # a worker of another process claims the batch first, then dies holding its lease
    dead = await services.queue.claim(
        ctx.user_id, thread, "dead-worker", min_batch=1, max_batch=8, lease_s=1.5
    )
    assert dead.status == "claimed" and dead.messages
    await memory.drain()  # the scheduled run found the batch leased: nothing stored yet
    assert not await services.memories.list(ctx.user_id, kind="summary")
    for _ in range(50):  # no new turn: the run comes back by itself after the lease
        await asyncio.sleep(0.1)
        if not await services.queue.processing(ctx.user_id, thread):
            break
    await memory.drain()
    assert not await services.queue.processing(ctx.user_id, thread)
    (summary,) = await services.memories.list(ctx.user_id, kind="summary")
    assert summary.source_ids == [m.id for m in dead.messages]
