"""Checkpoint retention on the real Postgres checkpointer (issue 33): the maintenance graph
prunes each thread to its latest checkpoint, holds a memory thread whose work is under way,
never takes the state of a run in flight, and the thread resumes as before."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from graph.background import LocalScheduler, memory_thread_id
from graph.builder import build_graph
from graph.maintenance import build_maintenance_graph
from memory_graph_agent.cli.main import main
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.checkpoints import SaverCheckpoints
from memory_graph_agent.testing import purpose_of
from tests.conftest import say
from tests.integration_tests.test_reply_first import GatedChatModel


class PurposeGated(GatedChatModel):
    """The gated fake of test_reply_first; only the calls of the purposes in ``held`` wait."""

    held: Any = frozenset()

    async def _wait(self, run_manager: Any) -> None:
        if purpose_of(run_manager.tags if run_manager else None) in self.held:
            self.started.set()
            await self.gate.wait()


def gated(*purposes: str) -> PurposeGated:
    return PurposeGated(held=frozenset(purposes), gate=asyncio.Event(), started=asyncio.Event())


async def count(saver, thread_id: str) -> int:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return len([c async for c in saver.alist(config)])


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_a_long_thread_keeps_its_latest_checkpoint_and_resumes(
    services, checkpointer, make_context
):
    settings = Settings().override(memory_mode="inline", window_size=4, summary_batch=2)
    agent = build_graph(services, checkpointer, settings=settings)
    ctx = make_context()
    thread, quiet = _thread(), _thread()
    for n in range(8):
        await say(agent, ctx, thread, f"turn number {n}: I like the colour {n}.")
    await say(agent, ctx, quiet, "only one turn here")
    before = (await agent.aget_state({"configurable": {"thread_id": thread}})).values
    assert await count(checkpointer, thread) >= 8 * 3  # a few checkpoints per turn

    maintenance = build_maintenance_graph(
        services, SaverCheckpoints(checkpointer), settings=settings
    )
    dry = await maintenance.ainvoke({"user_id": ctx.user_id, "dry_run": True}, context=ctx)
    assert {e["id"] for e in dry["pruned"]} == {thread, quiet}
    assert await count(checkpointer, thread) >= 8 * 3, "a dry run changes nothing"

    state = await maintenance.ainvoke({"user_id": ctx.user_id}, context=ctx)
    assert state["report"]["checkpoints_pruned"] == 2 and state["retention"] == "keep_latest"
    assert {(e["id"], e["kind"], e["action"]) for e in state["pruned"]} == {
        (thread, "conversation", "pruned"),
        (quiet, "conversation", "pruned"),
    }
    assert await count(checkpointer, thread) == 1 and await count(checkpointer, quiet) == 1
    after = (await agent.aget_state({"configurable": {"thread_id": thread}})).values
    assert after["messages"] == before["messages"]  # the latest state is whole

    # the thread goes on from there, and a second pass prunes it back to one checkpoint
    out = await say(agent, ctx, thread, "what colours do I like?")
    old = [m.id for m in before["messages"]]
    carried = [m.id for m in out["messages"] if m.id in old]  # what the window still holds
    assert carried and carried == old[len(old) - len(carried) :]
    assert out["messages"][-1].type == "ai" and out["messages"][-1].text
    assert await count(checkpointer, thread) > 1
    await maintenance.ainvoke({"user_id": ctx.user_id}, context=ctx)
    assert await count(checkpointer, thread) == 1
    # retention off keeps everything
    await say(agent, ctx, thread, "one more")
    kept = await count(checkpointer, thread)
    off_settings = Settings().override(checkpoint_retention="off")
    off = await build_maintenance_graph(
        services, SaverCheckpoints(checkpointer), settings=off_settings
    ).ainvoke({"user_id": ctx.user_id}, context=make_context())
    assert off["pruned"] == [] and await count(checkpointer, thread) == kept > 1


async def test_a_memory_thread_with_work_under_way_is_held_whole(
    services, checkpointer, make_context
):
    settings = Settings().override(window_size=2, summary_batch=2, memory_delay_s=0)
    model = gated("summarize")
    memory = LocalScheduler()
    agent = memory.bind(build_graph(services, checkpointer, scheduler=memory, settings=settings))
    ctx = make_context(model_obj=model)
    thread = _thread()
    model.gate.set()  # the first memory runs go through
    for n in range(3):
        await say(agent, ctx, thread, f"number {n}")
    await memory.drain()
    model.gate.clear()
    model.started.clear()
    for n in range(3, 6):
        await say(agent, ctx, thread, f"number {n}")
    await asyncio.wait_for(model.started.wait(), 10)  # a memory run is in its summarize
    memory_thread = memory_thread_id(ctx.user_id, thread)
    held = await count(checkpointer, memory_thread)
    assert held > 1 and await services.queue.backlog(ctx.user_id, thread) > 0

    maintenance = build_maintenance_graph(
        services, SaverCheckpoints(checkpointer), settings=settings
    )
    state = await maintenance.ainvoke({"user_id": ctx.user_id}, context=ctx)
    by_id = {e["id"]: e for e in state["pruned"]}
    assert by_id[memory_thread]["action"] == "held", by_id
    assert by_id[memory_thread]["reason"] == "memory work under way"
    assert by_id[thread]["action"] == "pruned"
    assert await count(checkpointer, memory_thread) >= held
    assert await count(checkpointer, thread) == 1

    model.gate.set()  # the memory run finishes on its kept state
    await memory.drain()
    assert memory.failures == 0 and await services.queue.backlog(ctx.user_id, thread) == 0
    state = await maintenance.ainvoke({"user_id": ctx.user_id}, context=ctx)
    assert {e["id"]: e["action"] for e in state["pruned"]}.get(memory_thread) == "pruned"
    assert await count(checkpointer, memory_thread) == 1


async def test_a_memory_thread_is_pruned_while_its_conversation_waits_for_a_full_batch(
    services, checkpointer, make_context
):
    """Messages waiting for a batch are no memory work under way (issue 33: the soak found
    an active conversation's memory threads never pruned, 323 checkpoints in one)."""
    settings = Settings().override(window_size=2, summary_batch=4, memory_delay_s=0)
    memory = LocalScheduler()
    agent = memory.bind(build_graph(services, checkpointer, scheduler=memory, settings=settings))
    ctx = make_context()
    thread = _thread()
    for n in range(4):  # the third turn fills a batch: one memory run; the fourth waits
        await say(agent, ctx, thread, f"number {n}")
        await memory.drain()
    memory_thread = memory_thread_id(ctx.user_id, thread)
    assert await count(checkpointer, memory_thread) > 1
    assert 0 < await services.queue.backlog(ctx.user_id, thread) < settings.formation.summary_batch

    maintenance = build_maintenance_graph(
        services, SaverCheckpoints(checkpointer), settings=settings
    )
    state = await maintenance.ainvoke({"user_id": ctx.user_id}, context=ctx)

    by_id = {e["id"]: e for e in state["pruned"]}
    assert by_id[memory_thread]["action"] == "pruned", by_id[memory_thread]
    assert await count(checkpointer, memory_thread) == 1
    await say(agent, ctx, thread, "number 4")  # the next batch's run, from the kept one
    await memory.drain()
    assert memory.failures == 0 and await services.queue.backlog(ctx.user_id, thread) == 0


async def test_a_turn_in_flight_keeps_its_state_while_its_thread_is_pruned(
    services, checkpointer, make_context
):
    settings = Settings().override(memory_mode="inline", window_token_share=1.0)
    model = gated("reply")
    agent = build_graph(services, checkpointer, settings=settings)
    # a window that holds all four turns: the state shows whether pruning lost any
    ctx = make_context(model_obj=model)
    thread = _thread()
    model.gate.set()
    for n in range(3):
        await say(agent, ctx, thread, f"earlier turn {n}")
    model.gate.clear()
    model.started.clear()
    turn = asyncio.create_task(say(agent, ctx, thread, "the turn in flight"))
    await asyncio.wait_for(model.started.wait(), 10)  # it waits in respond
    maintenance = build_maintenance_graph(
        services, SaverCheckpoints(checkpointer), settings=settings
    )
    await maintenance.ainvoke({"user_id": ctx.user_id}, context=ctx)
    model.gate.set()
    out = await asyncio.wait_for(turn, 20)
    texts = [m.text for m in out["messages"] if m.type == "human"]
    assert texts[-1] == "the turn in flight" and texts[0] == "earlier turn 0"
    assert out["messages"][-1].type == "ai"
    state = (await agent.aget_state({"configurable": {"thread_id": thread}})).values
    assert [m.id for m in state["messages"]] == [m.id for m in out["messages"]]


@pytest.mark.parametrize("dry_run", [True, False])
async def test_memory_agent_maintain_prunes_checkpoints(
    services, checkpointer, make_context, capsys, dry_run
):
    settings = Settings().override(memory_mode="inline")
    ctx = make_context()
    agent, thread = build_graph(services, checkpointer, settings=settings), _thread()
    for n in range(3):
        await say(agent, ctx, thread, f"turn {n}")
    before = await count(checkpointer, thread)
    args = ["maintain", "--user", ctx.user_id] + (["--dry-run"] if dry_run else [])
    assert await asyncio.to_thread(main, args) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "1 threads pruned" in printed and thread in printed, printed
    assert await count(checkpointer, thread) == (before if dry_run else 1)


async def test_all_users_covers_a_user_with_threads_and_no_memories_yet(
    services, checkpointer, make_context
):
    settings = Settings().override(memory_mode="inline")
    agent = build_graph(services, checkpointer, settings=settings)
    ctx = make_context()  # window_size 20: nothing is summarized yet
    thread = _thread()
    for n in range(3):
        await say(agent, ctx, thread, f"hello {n}")
    assert await services.memories.count(ctx.user_id) == {}
    maintenance = build_maintenance_graph(
        services, SaverCheckpoints(checkpointer), settings=settings
    )
    state = await maintenance.ainvoke({"all_users": True}, context=ctx)
    assert ctx.user_id in state["users"]
    assert await count(checkpointer, thread) == 1


async def test_the_space_pruned_checkpoints_free_is_reused_by_the_next_ones(services, checkpointer):
    """A prune vacuums the checkpoint tables: writing as much again grows them half as much.

    Without the vacuum (autovacuum not yet run) the same writes grew them by ~93 % of the
    first; the indexes of a new thread id reuse less of the freed space than the rows.
    """
    import secrets

    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Big(TypedDict):
        data: str

    def write(state: Big) -> Big:
        return {"data": secrets.token_hex(2048)}  # 4 KB that does not compress

    builder = StateGraph(Big)
    builder.add_node("write", write)
    builder.add_edge(START, "write")
    graph = builder.compile(checkpointer=checkpointer)
    tables = "'checkpoints', 'checkpoint_blobs', 'checkpoint_writes'"
    size = f"SELECT sum(pg_total_relation_size(t::regclass)) AS n FROM unnest(ARRAY[{tables}]) t"

    async def fill(thread: str) -> int:
        before = (await services.db.query(size))[0]["n"]
        config = {"configurable": {"thread_id": thread}}
        for _ in range(100):
            await graph.ainvoke({"data": secrets.token_hex(2048)}, config)
        return (await services.db.query(size))[0]["n"] - before

    first = _thread()
    grew = await fill(first)
    await SaverCheckpoints(checkpointer).prune([first])
    again = await fill(_thread())  # as much again, in another thread
    assert grew > 100 * 4096, grew
    assert again < grew * 2 / 3, f"{again} bytes more for the same writes; the first: {grew}"
