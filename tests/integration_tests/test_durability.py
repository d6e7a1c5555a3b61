"""The durable overflow pipeline: leases, retries, dead letters, the episodic log."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import guard
from memory_graph_agent.testing import ScriptedChatModel
from tests.conftest import kinds, say


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _assert_exactly_once(services, user: str, thread: str) -> None:
    """Every logged message is in the window, the backlog, a dead letter or ONE summary."""
    logged = {m.id for m in await services.episodes.history(user, thread)}
    window = {m.id for m in await services.window.window(user, thread)}
    backlog = {m.id for _, m in await services.window.pending(user, thread)}
    backlog |= {m.id for m in await services.queue.processing(user, thread)}
    dead = {m.id for e in await services.queue.dead_letters(user, thread) for m in e["items"]}
    counts = Counter(
        sid
        for s in await services.memories.list(user, kind="summary", limit=10_000)
        for sid in s.source_ids
    )
    assert not counts or max(counts.values()) == 1, "a message is in two summaries"
    assert set(counts) | window | backlog | dead == logged, "a message is nowhere"
    assert not (set(counts) & (window | backlog | dead)), "a message is in two places"


async def test_every_message_is_logged_before_it_can_leave_the_window(
    graph_for, make_context, services
):
    settings = Settings().override(window_size=4, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    for i in range(8):
        await say(agent, ctx, thread, f"message {i}")
    history = await services.episodes.history(ctx.user_id, thread)
    assert [m.content for m in history if m.role == "human"] == [f"message {i}" for i in range(8)]
    assert len(history) == 16
    open_ids = {m.id for m in await services.episodes.unsummarized(ctx.user_id, thread)}
    assert open_ids == {m.id for m in await services.window.window(ctx.user_id, thread)}
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_a_crashed_worker_batch_is_reclaimed_after_its_lease_and_stored_once(
    graph_for, make_context, services
):
    settings = Settings().override(window_size=2, summary_batch=4, lease_seconds=0.3)
    ctx = make_context()
    agent = graph_for(settings)
    user, thread = ctx.user_id, _thread()
    await say(agent, ctx, thread, "one")
    await say(agent, ctx, thread, "two")  # 2 messages evicted, below the batch size
    # a worker claims them and dies before acknowledging
    crashed = await services.queue.claim(
        user, thread, "dead-worker", min_batch=1, max_batch=50, lease_s=0.3
    )
    assert crashed.status == "claimed" and len(crashed.messages) == 2
    # while its lease holds, nobody else can take the batch
    other = await services.queue.claim(user, thread, "w2", min_batch=1, max_batch=50, lease_s=5)
    assert (other.status, other.messages) == ("leased", [])
    await asyncio.sleep(0.4)  # the lease expires
    state = await say(agent, ctx, thread, "three")
    assert ("summarize", "reclaimed") in kinds(state)
    await say(agent, ctx, thread, "four")
    crashed_ids = [m.id for m in crashed.messages]
    summaries = await services.memories.list(user, kind="summary")
    assert [s.source_ids for s in summaries].count(crashed_ids) == 1
    assert await services.queue.processing(user, thread) == []
    await _assert_exactly_once(services, user, thread)


async def test_storage_failures_back_off_then_dead_letter_then_redrive(
    graph_for, make_context, services, monkeypatch
):
    settings = Settings().override(
        window_size=2, summary_batch=2, max_attempts=3, retry_backoff_s=0.5
    )
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    real_add = services.memories.add

    async def postgres_down(memory, vector=None):
        raise ConnectionError("connection refused")

    monkeypatch.setattr(services.memories, "add", guard("postgres", postgres_down))
    await say(agent, ctx, thread, "remember the blue door")
    state = await say(agent, ctx, thread, "and the red key")
    assert ("consolidate", "storage_failed") in kinds(state)
    # immediately after a failure the batch backs off
    state = await say(agent, ctx, thread, "third")
    assert ("summarize", "nothing_backoff") in kinds(state)
    for i in range(3):
        await asyncio.sleep(1.1)  # past the doubling backoff (0.5 s, then 1 s)
        state = await say(agent, ctx, thread, f"more {i}")
    dead = await services.queue.dead_letters(ctx.user_id, thread)
    assert dead and dead[0]["attempts"] == 3 and "ConnectionError" in dead[0]["error"]
    assert "remember the blue door" in [m.content for m in dead[0]["items"]]
    await _assert_exactly_once(services, ctx.user_id, thread)

    monkeypatch.setattr(services.memories, "add", real_add)
    moved = await services.queue.redrive(ctx.user_id, thread)
    assert moved >= 2 and await services.queue.dead_letters(ctx.user_id, thread) == []
    for i in range(3):
        await say(agent, ctx, thread, f"after redrive {i}")
    texts = " ".join(s.text for s in await services.memories.list(ctx.user_id, kind="summary"))
    assert "remember the blue door" in texts
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_messages_lost_by_redis_are_requeued_from_the_episodic_log(
    graph_for, make_context, services
):
    settings = Settings().override(window_size=4, summary_batch=4)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    for i in range(3):
        await say(agent, ctx, thread, f"before loss {i}")
    pending = [m.id for _, m in await services.window.pending(ctx.user_id, thread)]
    assert pending, "some messages wait in pending"
    # Redis loses the pending list (e.g. a crash before its AOF was written)
    await services.redis.delete(services.queue.key("pending", ctx.user_id, thread))
    state = await say(agent, ctx, thread, "after loss")
    assert ("trim_window", "requeued") in kinds(state)
    for i in range(4):
        await say(agent, ctx, thread, f"later {i}")
    summarized = {
        sid
        for s in await services.memories.list(ctx.user_id, kind="summary")
        for sid in s.source_ids
    }
    assert set(pending) <= summarized
    await _assert_exactly_once(services, ctx.user_id, thread)


async def test_episodic_log_outage_defers_eviction_and_loses_nothing(
    graph_for, make_context, services, monkeypatch
):
    from sqlalchemy.exc import OperationalError

    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    real_append = services.episodes.append

    async def postgres_down(*args, **kwargs):
        raise OperationalError("INSERT", {}, ConnectionRefusedError("connection refused"))

    monkeypatch.setattr(services.episodes, "append", guard("postgres", postgres_down))
    for i in range(3):
        state = await say(agent, ctx, thread, f"during outage {i}")
    assert ("trim_window", "eviction_deferred") in kinds(state)
    assert len(await services.window.window(ctx.user_id, thread)) == 6  # kept, not evicted
    monkeypatch.setattr(services.episodes, "append", real_append)
    for i in range(3):
        await say(agent, ctx, thread, f"after outage {i}")
    assert len(await services.window.window(ctx.user_id, thread)) <= 2
    await _assert_exactly_once(services, ctx.user_id, thread)
    history = [
        m.content for m in await services.episodes.history(ctx.user_id, thread) if m.role == "human"
    ]
    assert history[:3] == [f"during outage {i}" for i in range(3)]


class ChaoticModel(ScriptedChatModel):
    """Raises, times out or returns garbage on ~30% of calls (seeded)."""

    rng: Any = None

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        roll = self.rng.random()
        if roll < 0.1:
            raise RuntimeError("provider error")
        if roll < 0.2:
            await asyncio.sleep(0.5)  # longer than model_timeout_s
        if roll < 0.3:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="{not json"))])
        return self._generate(messages)


async def test_random_model_failures_never_lose_or_duplicate_a_message(
    graph_for, make_context, services
):
    import random

    from nodes.respond import ModelUnavailableError

    model = ChaoticModel(rng=random.Random(1234))
    settings = Settings().override(
        window_size=4, summary_batch=2, reflect_after=3, model_timeout_s=0.2
    )
    ctx = make_context(model_obj=model)
    thread = _thread()
    failed_turns = 0
    for i in range(40):
        try:
            await say(graph_for(settings), ctx, thread, f"turn {i} about topic {i}")
        except ModelUnavailableError:
            failed_turns += 1  # the reply path has its own clear error; the message is kept
    assert failed_turns > 0
    # a last turn with a model that answers: a kept message of a failed last turn goes too
    settings_steady = Settings().override(window_size=4, summary_batch=2, reflect_after=3)
    steady = make_context(model_obj=ScriptedChatModel())
    await say(graph_for(settings_steady), steady, thread, "the end")
    await _assert_exactly_once(services, ctx.user_id, thread)
    humans = [
        m.content for m in await services.episodes.history(ctx.user_id, thread) if m.role == "human"
    ]
    assert humans == [f"turn {i} about topic {i}" for i in range(40)] + ["the end"]
    counts = await services.memories.count(ctx.user_id)
    assert counts.get("summary", 0) > 5


async def test_dead_letters_are_visible_in_memory_show_and_redriven_by_the_cli(
    graph_for, make_context, services, monkeypatch, capsys
):
    import json

    from memory_graph_agent.cli.main import main

    settings = Settings().override(window_size=2, summary_batch=2, max_attempts=1)
    ctx = make_context()
    agent = graph_for(settings)

    async def postgres_down(memory, vector=None):
        raise ConnectionError("connection refused")

    monkeypatch.setattr(services.memories, "add", guard("postgres", postgres_down))
    thread = _thread()
    await say(agent, ctx, thread, "first")
    await say(agent, ctx, thread, "second")
    monkeypatch.undo()
    assert await asyncio.to_thread(main, ["memory", "show", "--user", ctx.user_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    (entry,) = shown["dead_letters"][thread]
    assert entry["attempts"] == 1 and len(entry["message_ids"]) == 2
    assert await asyncio.to_thread(main, ["memory", "redrive", "--user", ctx.user_id]) == 0
    assert await services.queue.dead_letters(ctx.user_id, thread) == []
    assert await services.queue.backlog(ctx.user_id, thread) == 2
