"""Summary batches cut on turn boundaries, through the compiled graph on real Redis/Postgres.

A turn runs from a human message to the next: ``[human, ai(tool_calls), tool, ai]`` is one
turn, and a summary never holds part of it (LangMem #111: a summary that cuts an AI
tool-call message from its tool results). Whatever ``summary_batch`` is, each stored
summary starts on a human message and ends where the next turn starts.
"""

from __future__ import annotations

import asyncio
import uuid

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from memory_graph_agent import MemoryMiddleware
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.window import StoredMessage
from memory_graph_agent.testing import ScriptedChatModel, default_handler, tool_call
from tests.builders import ids, msg, tc
from tests.conftest import kinds, say
from tests.integration_tests.test_durability import _assert_exactly_once


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def tool_calling_model() -> ScriptedChatModel:
    """A model that answers a ``lookup`` question after one ``search_memory`` call.

    Those turns are ``[human, ai(tool_calls), tool, ai]``; the others ``[human, ai]``.
    """

    def handler(messages: list[BaseMessage]) -> str | BaseMessage:
        if not (messages and isinstance(messages[0], SystemMessage)):
            return default_handler(messages)  # memory's own calls: summaries, facts...
        last = messages[-1]
        if isinstance(last, HumanMessage) and "lookup" in last.text:
            return tool_call("search_memory", query=last.text)
        return "done" if isinstance(last, ToolMessage) else "plain answer"

    return ScriptedChatModel(handler=handler)


def question(i: int, every: int = 1) -> str:
    """Every ``every``-th question is a lookup (a tool-calling turn)."""
    return f"lookup number {i} please" if i % every == 0 else f"just chatting {i}"


async def assert_batches_are_whole_turns(services, user: str, thread: str) -> int:
    """Every summary of the thread is a run of whole turns of its log; returns how many.

    So no summary holds an AI tool call without all of its results and the closing reply.
    """
    history = await services.episodes.history(user, thread)
    at = {m.id: i for i, m in enumerate(history)}
    stored = await services.memories.list(user, kind="summary", limit=1000)
    summaries = [s for s in stored if s.thread_id == thread]
    for s in summaries:
        spots = sorted(at[sid] for sid in s.source_ids)
        first, last = spots[0], spots[-1]
        assert spots == list(range(first, last + 1)), f"not one run of the log: {s.source_ids}"
        batch = history[first : last + 1]
        roles = [m.role for m in batch]
        assert batch[0].role == "human", f"a summary starts inside a turn: {roles}"
        after = history[last + 1] if last + 1 < len(history) else None
        assert after is None or after.role == "human", (
            f"a summary ends inside a turn: {roles}, then {after.role}"
        )
        held = {m.id for m in batch}
        for j, m in enumerate(batch):
            if m.role == "ai" and m.tool_calls:
                calls = {c["id"] for c in m.tool_calls}
                results = [r for r in history if r.role == "tool" and r.tool_call_id in calls]
                assert {r.tool_call_id for r in results} == calls
                assert {r.id for r in results} <= held, f"tool results left out: {roles}"
                assert any(r.role == "ai" and not r.tool_calls for r in batch[j + 1 :]), (
                    f"the closing AI reply left out: {roles}"
                )
    return len(summaries)


async def test_a_tool_calling_turn_is_never_split_between_summaries(
    graph_for, make_context, services
):
    """``summary_batch=2`` with four-message turns: each turn is summarized whole."""
    settings = Settings().override(window_size=4, summary_batch=2)
    ctx = make_context(model_obj=tool_calling_model())
    agent = graph_for(settings)
    thread = _thread()
    for i in range(6):
        state = await say(agent, ctx, thread, question(i))
        assert [m.type for m in state["messages"][-4:]] == ["human", "ai", "tool", "ai"]
    assert await assert_batches_are_whole_turns(services, ctx.user_id, thread) >= 2
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_a_batch_extends_to_the_end_of_the_turn_it_cuts_into(
    graph_for, make_context, services
):
    """Plain turns (2 messages) between tool turns (4): a batch of 3 cuts into a tool turn."""
    settings = Settings().override(window_size=4, summary_batch=3)
    ctx = make_context(model_obj=tool_calling_model())
    agent = graph_for(settings)
    thread = _thread()
    for i in range(8):
        await say(agent, ctx, thread, question(i, every=2))
    summaries = [
        s
        for s in await services.memories.list(ctx.user_id, kind="summary")
        if s.thread_id == thread
    ]
    assert summaries and all(
        len(s.source_ids) >= settings.formation.summary_batch for s in summaries
    )
    assert await assert_batches_are_whole_turns(services, ctx.user_id, thread) >= 2
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_the_middleware_summarizes_whole_tool_calling_turns(services, checkpointer, user_id):
    """The same through `MemoryMiddleware` in a ``create_agent`` agent (its memory tools)."""
    model = tool_calling_model()
    spec = register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", model)
    memory = MemoryMiddleware(
        services,
        model=spec,
        tools=True,
        settings=Settings().override(window_size=4, summary_batch=2),
    )
    agent = create_agent(model, [], middleware=[memory], checkpointer=checkpointer)
    thread = _thread()
    for i in range(6):
        state = await agent.ainvoke(
            {"messages": [HumanMessage(question(i))]},
            {"configurable": {"thread_id": thread}},
            context={"user_id": user_id},
        )
        assert [m.type for m in state["messages"][-4:]] == ["human", "ai", "tool", "ai"]
    await memory.drain()
    assert await assert_batches_are_whole_turns(services, user_id, thread) >= 2
    await _assert_exactly_once(services, user_id, thread)


def long_lookup(i: int) -> str:
    """A lookup question of roughly 250 to 550 tokens: batches that fit hold a turn or two."""
    return f"lookup number {i}: " + "harbour cranes, ropes and anchors; " * (40 + 20 * (i % 3))


async def test_a_session_end_archives_whole_turns_in_batches_that_fit(
    graph_for, make_context, services
):
    """The whole window and backlog drain in batches as large as fit: never part of a turn."""
    model = tool_calling_model()
    settings = Settings().override(window_size=4, summary_batch=50, context_window_tokens=2000)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()
    for i in range(6):
        await say(agent, ctx, thread, long_lookup(i))
    assert await services.memories.list(ctx.user_id, kind="summary") == []
    await agent.ainvoke({"end_session": True}, {"configurable": {"thread_id": thread}}, context=ctx)
    assert await services.queue.backlog(ctx.user_id, thread) == 0
    assert await services.episodes.unsummarized(ctx.user_id, thread) == []
    assert await assert_batches_are_whole_turns(services, ctx.user_id, thread) >= 3
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_a_compression_summarizes_whole_turns(graph_for, make_context, services):
    """A prompt too large moves all but the last turns out, then drains them whole."""
    model = tool_calling_model()
    settings = Settings().override(window_size=50, context_window_tokens=2500, keep_recent_turns=1)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()
    compressed = False
    for i in range(8):
        state = await say(agent, ctx, thread, long_lookup(i))
        compressed |= ("trim_window", "compressed") in kinds(state)
    assert compressed
    assert await assert_batches_are_whole_turns(services, ctx.user_id, thread) >= 2
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_a_turn_the_window_cut_waits_for_its_rest_before_it_is_summarized(
    graph_for, make_context, services
):
    """A window smaller than a turn moves ``[human]`` ahead of its ``[ai-call, tool, ai]``.

    The window keeps a tool call with its results, but its turn is split between pending
    and the window: pending's last turn is summarized only once it is whole.
    """
    settings = Settings().override(window_size=3, summary_batch=5)
    ctx = make_context(model_obj=tool_calling_model())
    agent = graph_for(settings)
    user, thread = ctx.user_id, _thread()
    split = False
    for i in range(8):
        await say(agent, ctx, thread, question(i))
        window = await services.window.window(user, thread)
        split |= bool(window) and window[0].role != "human"
    assert split, "the window never cut inside a turn: nothing is tested"
    assert await assert_batches_are_whole_turns(services, user, thread) >= 2
    await _assert_exactly_once(services, user, thread)


# --------------------------------------------------------------------------- the claim


def tool_turn(n: str) -> list[StoredMessage]:
    """``[human, ai(tool_calls), tool, ai]`` as stored."""
    call = msg("ai", f"call{n}-{uuid.uuid4().hex[:6]}", tool_calls=[tc(f"c{n}")])
    return [msg("human"), call, msg("tool", tool_call_id=f"c{n}"), msg("ai")]


async def test_a_claim_takes_whole_turns_and_a_reclaim_the_same_batch(services, user_id):
    queue, thread = services.queue, _thread()
    first, second = tool_turn("1"), [msg("human"), msg("ai")]
    await queue.requeue(user_id, thread, first + second)
    a = await queue.claim(user_id, thread, "A", min_batch=2, max_batch=2, lease_s=0.2)
    assert a.status == "claimed" and ids(a.messages) == ids(first)
    await asyncio.sleep(0.3)  # A dies: its lease expires
    b = await queue.claim(user_id, thread, "B", min_batch=2, max_batch=2, lease_s=5)
    assert b.status == "reclaimed" and ids(b.messages) == ids(first)
    assert await queue.complete(user_id, thread, "B", ids(b.messages)) == 4
    c = await queue.claim(user_id, thread, "C", min_batch=2, max_batch=2, lease_s=5)
    assert c.status == "claimed" and ids(c.messages) == ids(second)


async def test_a_claim_planned_before_another_worker_took_that_batch_takes_the_next(
    services, user_id, monkeypatch
):
    """Pending changed between the plan and the claim: the claim plans again."""
    queue, thread = services.queue, _thread()
    first, second, third = tool_turn("1"), [msg("human"), msg("ai")], [msg("human"), msg("ai")]
    await queue.requeue(user_id, thread, first + second + third)
    real_plan, plans = queue._plan, []

    async def plan_then_race(*args):
        plans.append(plan := await real_plan(*args))
        if len(plans) == 1:  # another worker claims and finishes this very batch meanwhile
            other = await queue.claim(user_id, thread, "B", min_batch=1, max_batch=2, lease_s=5)
            assert ids(other.messages) == plan == ids(first)
            assert await queue.complete(user_id, thread, "B", plan) == 4
        return plan

    monkeypatch.setattr(queue, "_plan", plan_then_race)
    a = await queue.claim(user_id, thread, "A", min_batch=1, max_batch=2, lease_s=5)
    assert plans == [ids(first), ids(first), ids(second)]  # A's, B's, then A's again
    assert a.status == "claimed" and ids(a.messages) == ids(second)


async def test_a_claim_whose_plans_keep_going_stale_takes_nothing(services, user_id, monkeypatch):
    """A pending list that changes under every plan: the claim gives up and moves nothing."""
    queue, thread = services.queue, _thread()
    batch = tool_turn("1")
    await queue.requeue(user_id, thread, batch)

    async def always_stale(*args):
        return ["a-message-pending-no-longer-starts-with"]

    monkeypatch.setattr(queue, "_plan", always_stale)
    claim = await queue.claim(user_id, thread, "A", min_batch=1, max_batch=2, lease_s=5)
    assert (claim.status, claim.messages) == ("contended", [])
    assert [m.id for _, m in await services.window.pending(user_id, thread)] == ids(batch)
    assert await queue.processing(user_id, thread) == []
