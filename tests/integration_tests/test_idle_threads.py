"""Idle threads (issue 33) on the real Redis and Postgres: maintenance archives a thread
nobody wrote to for ``idle_thread_days`` as a session end does (its window summarized,
each message once), then deletes its window, seen-set and running summary; the owner
comes back to it and is answered with the profile and recall; nobody else gets in."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from graph.maintenance import build_maintenance_graph
from memory_graph_agent.cli.main import main
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.profile import Fact
from memory_graph_agent.testing import ScriptedChatModel
from memory_graph_agent.turn.validation import ThreadOwnershipError
from tests.conftest import kinds, say
from tests.integration_tests.test_session_end import _assert_archived

RELEASED = ("window", "seen", "digest")


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _age(services, user: str, thread: str, days: int = 40) -> None:
    """The thread's last turn was ``days`` ago, and no turn is under way on it."""
    await services.db.query(
        "UPDATE episodes SET logged_at = logged_at - make_interval(days => :days) "
        "WHERE user_id = :u AND thread_id = :t",
        {"days": days, "u": user, "t": thread},
    )
    await services.redis.delete(services.keys.active(thread))


async def _keys(services, user: str, thread: str) -> dict[str, bool]:
    kinds_ = {k: services.keys.thread(k, user, thread) for k in RELEASED}
    found = {k: bool(await services.redis.exists(key)) for k, key in kinds_.items()}
    return found | {"owner": await services.threads.owner(thread) == user}


async def _maintain(services, ctx, settings=None, **extra) -> dict:
    graph = build_maintenance_graph(services, settings=settings or Settings())
    return await graph.ainvoke({"user_id": ctx.user_id, **extra}, context=ctx)


async def test_an_idle_thread_is_archived_its_keys_go_and_its_owner_comes_back(
    graph_for, make_context, fake_model, services, user_id
):
    settings = Settings().override(window_size=20, summary_batch=50)
    ctx = make_context()  # nothing summarized while chatting
    agent = graph_for(settings)
    idle, busy = _thread(), _thread()
    ids: list[str] = []
    for text in ("I keep three beehives on my roof in Lyon.", "The bees make lavender honey."):
        ids += [m.id for m in (await say(agent, ctx, idle, text))["messages"][-2:]]
    await say(agent, ctx, busy, "I am reading about tram lines.")  # recent: not idle
    other = make_context(user_id=f"u-{uuid.uuid4().hex[:10]}")
    theirs = _thread()
    await say(agent, other, theirs, "My rooftop has solar panels.")
    await _age(services, other.user_id, theirs)  # idle too, but not this run's user
    await services.db.query(  # a turn admitted a day ago still marks the thread as in use
        "UPDATE episodes SET logged_at = logged_at - interval '40 days' "
        "WHERE user_id = :u AND thread_id = :t",
        {"u": user_id, "t": idle},
    )

    held = await _maintain(services, ctx, settings)
    assert [(e["thread_id"], e["action"], e["reason"]) for e in held["archived"]] == [
        (idle, "held", "turn under way")
    ]
    await services.redis.delete(services.keys.active(idle))
    before = await _keys(services, user_id, idle)  # no digest: nothing was summarized
    assert before == {"window": True, "seen": True, "digest": False, "owner": True}
    dry = await _maintain(services, ctx, settings, dry_run=True)
    assert [(e["thread_id"], e["action"], e["messages"]) for e in dry["archived"]] == [
        (idle, "archived", 4)
    ]
    assert await _keys(services, user_id, idle) == before, "a dry run changes nothing"
    assert await services.memories.list(user_id) == []

    state = await _maintain(services, ctx, settings)

    (entry,) = state["archived"]
    assert entry["thread_id"] == idle and entry["action"] == "archived"
    assert entry["messages"] == 4
    assert state["report"]["threads_archived"] == 1
    assert state["report"]["idle_threads"] == "idle for 30 days"
    assert state["report"]["per_user"][user_id]["threads_archived"] == 1
    assert await _keys(services, user_id, idle) == {
        "window": False, "seen": False, "digest": False, "owner": True
    }  # fmt: skip
    await _assert_archived(services, user_id, idle, ids)
    assert len(await services.window.window(user_id, busy)) == 2, "an active thread stays"
    assert (await _keys(services, other.user_id, theirs))["seen"], "another user's stays"
    again = await _maintain(services, ctx, settings)
    assert again["archived"] == [], "nothing left to release"

    # the owner comes back: answered with the profile and what memory recalls
    await services.profile.upsert(user_id, [Fact("city", "Lyon", 0.8)], settings.retention.ttl_days)
    back = await say(agent, ctx, idle, "What do my bees make?")
    assert [m.type for m in back["messages"]] == ["human", "ai"], "archived ones left the state"
    ids += [m.id for m in back["messages"]]
    assert ("load_profile", "dropped_archived") in kinds(back)
    turns = {s for m in back["recalled"] if m["kind"] == "episode" for s in m["source_ids"]}
    assert turns & set(ids), "recall no longer counts the archived ones as on screen"
    prompt = fake_model.system_prompts()[-1]
    assert "Lyon" in prompt and "lavender honey" in prompt
    assert "lavender honey" in back["thread_summary"], "the recap, rebuilt from the summaries"
    assert (await _keys(services, user_id, idle))["digest"], "and kept again"
    with pytest.raises(ThreadOwnershipError):
        await say(agent, other, idle, "Is this thread mine now?")
    for text in ("They swarm in May.", "I sell the honey at the market."):
        back = await say(agent, ctx, idle, text)
        ids += [m.id for m in back["messages"][-2:]]
    await agent.ainvoke({"end_session": True}, {"configurable": {"thread_id": idle}}, context=ctx)
    await _assert_archived(services, user_id, idle, ids)  # the old ones not a second time


async def test_what_waits_in_pending_goes_too_but_a_leased_batch_holds_the_thread(
    graph_for, make_context, services, user_id
):
    settings = Settings().override(window_size=2, summary_batch=50)
    ctx = make_context()  # the overflow waits in pending
    waiting, leased = _thread(), _thread()
    ids: list[str] = []
    for i in range(3):
        turn = await say(graph_for(settings), ctx, waiting, f"note {i} on the allotment")
        ids += [m.id for m in turn["messages"][-2:]]
        await say(graph_for(settings), ctx, leased, f"note {i} on the orchard")
    assert await services.queue.backlog(user_id, waiting) == 4
    claim = await services.queue.claim(user_id, leased, "w", min_batch=1, max_batch=9, lease_s=60)
    assert claim.status == "claimed", "a memory run holds this thread's batch"
    for thread in (waiting, leased):
        await _age(services, user_id, thread)

    off = await _maintain(services, make_context(), Settings().override(idle_thread_days=0))
    assert off["archived"] == [] and off["report"]["idle_threads"] == "off (idle_thread_days=0)"
    later = await _maintain(services, make_context(), Settings().override(idle_thread_days=60))
    assert later["archived"] == [], "idle for 40 days: not 60"
    state = await _maintain(services, ctx, settings)

    by_thread = {e["thread_id"]: e for e in state["archived"]}
    assert by_thread[waiting]["action"] == "archived" and by_thread[waiting]["messages"] == 6
    await _assert_archived(services, user_id, waiting, ids)
    left = await _keys(services, user_id, waiting)
    assert left == {"window": False, "seen": False, "digest": False, "owner": True}
    assert by_thread[leased]["action"] == "held"
    assert by_thread[leased]["reason"].startswith("memory work under way")
    assert (await _keys(services, user_id, leased))["window"]
    assert await services.queue.processing(user_id, leased), "the leased batch is untouched"
    with pytest.raises(ValueError, match="IDLE_THREAD_DAYS='-1'"):
        Settings.from_env({"IDLE_THREAD_DAYS": "-1"})


async def test_memory_agent_maintain_archives_idle_threads(
    agent, make_context, services, capsys, monkeypatch
):
    model = ScriptedChatModel()
    monkeypatch.setenv("MODEL", register_chat_model(f"idle-{uuid.uuid4().hex[:6]}", model))
    ctx = make_context(model_obj=model)
    thread = _thread()
    state = await say(agent, ctx, thread, "I repair clocks on Saturdays.")
    await _age(services, ctx.user_id, thread)

    code = await asyncio.to_thread(main, ["maintain", "--user", ctx.user_id, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["report"]["threads_archived"] == 1
    assert [e["thread_id"] for e in out["archived"]] == [thread]
    await _assert_archived(services, ctx.user_id, thread, [m.id for m in state["messages"]])
    assert not (await _keys(services, ctx.user_id, thread))["seen"]
    await say(agent, ctx, thread, "Also on Sundays.")  # the owner comes back, then goes again
    await _age(services, ctx.user_id, thread)
    code = await asyncio.to_thread(main, ["maintain", "--user", ctx.user_id])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "idle threads (idle for 30 days): 1 archived, 0 held" in out
    assert f"idle thread archived: {ctx.user_id} {thread}" in out
    assert "2 window messages to memory" in out


async def test_only_a_thread_coming_back_asks_the_episodic_log(
    graph_for, make_context, services, user_id, monkeypatch
):
    """The log lookup that recognises archived messages stays off the ordinary turn's path."""
    asked: list[tuple] = []
    real = services.episodes.summarized

    async def spy(*args):
        asked.append(args)
        return await real(*args)

    monkeypatch.setattr(services.episodes, "summarized", spy)
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx, thread = make_context(), _thread()
    agent = graph_for(settings)
    for i in range(4):  # with evictions and summaries on the way
        await say(agent, ctx, thread, f"the kettle whistles, note {i}")
    assert asked == []
    await _age(services, user_id, thread)
    await _maintain(services, ctx, settings)
    back = await say(agent, ctx, thread, "Back to the kettle.")
    assert len(asked) == 1 and ("load_profile", "dropped_archived") in kinds(back)
    await say(agent, ctx, thread, "And the teapot.")
    assert len(asked) == 1
