"""The queue's leases on the real Redis: a late worker can never touch a batch it did not finish."""

from __future__ import annotations

import asyncio
import uuid

from tests.builders import ids, msg


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _late_worker_and_a_crashed_newer_batch(services, user: str, thread: str):
    """Worker A's lease on batch 1 expires; B finishes batch 1; C claims batch 2 and dies.

    Returns A's batch and batch 2 (in ``processing`` with an expired lease).
    """
    queue = services.queue
    await queue.requeue(user, thread, [msg("human"), msg("ai"), msg("human"), msg("ai")])
    a = await queue.claim(user, thread, "A", min_batch=1, max_batch=2, lease_s=0.2)
    await asyncio.sleep(0.3)  # A is slow: its lease expires
    b = await queue.claim(user, thread, "B", min_batch=1, max_batch=2, lease_s=5)
    assert b.status == "reclaimed" and ids(b.messages) == ids(a.messages)
    assert await queue.complete(user, thread, "B", ids(b.messages)) == 2
    c = await queue.claim(user, thread, "C", min_batch=1, max_batch=2, lease_s=0.2)
    assert c.status == "claimed" and ids(c.messages) != ids(a.messages)
    await asyncio.sleep(0.3)  # C crashed: its lease expires too
    return a.messages, c.messages


async def test_a_late_complete_never_acknowledges_another_batch(services, user_id):
    thread = _thread()
    mine, newer = await _late_worker_and_a_crashed_newer_batch(services, user_id, thread)

    assert await services.queue.complete(user_id, thread, "A", ids(mine)) == 0
    assert ids(await services.queue.processing(user_id, thread)) == ids(newer)


async def test_a_late_fail_never_counts_against_another_batch(services, user_id):
    thread = _thread()
    mine, newer = await _late_worker_and_a_crashed_newer_batch(services, user_id, thread)

    outcome = await services.queue.fail(
        user_id, thread, "A", "boom", ids(mine), max_attempts=1, backoff_s=0
    )
    assert outcome == "not-owner"
    assert await services.queue.dead_letters(user_id, thread) == []
    assert ids(await services.queue.processing(user_id, thread)) == ids(newer)


async def test_an_expired_lease_on_the_same_batch_still_acknowledges_it(services, user_id):
    """Nobody took the batch over: its summary is stored, so the ack is right."""
    thread = _thread()
    await services.queue.requeue(user_id, thread, [msg("human"), msg("ai")])
    a = await services.queue.claim(user_id, thread, "A", min_batch=1, max_batch=2, lease_s=0.1)
    await asyncio.sleep(0.2)
    assert await services.queue.complete(user_id, thread, "A", ids(a.messages)) == 2
    assert await services.queue.processing(user_id, thread) == []


async def test_requeue_lost_never_requeues_a_message_a_concurrent_turn_just_pushed(
    services, user_id, monkeypatch
):
    """Redis lost two logged messages; meanwhile another turn of the thread pushes a third."""
    from memory_graph_agent.turn.windowing import requeue_lost

    thread = _thread()
    lost = [msg("human"), msg("ai")]
    await services.window.push(user_id, thread, lost)
    await services.episodes.append(user_id, thread, lost, durable=True)
    await services.redis.delete(services.queue.key("window", user_id, thread))
    fresh = msg("human")
    real_unsummarized = services.episodes.unsummarized

    async def concurrent_turn(user: str, thread_id: str):
        # another turn on the thread pushes and logs its message during our snapshot
        await services.window.push(user, thread_id, [fresh])
        await services.episodes.append(user, thread_id, [fresh], durable=True)
        return await real_unsummarized(user, thread_id)

    monkeypatch.setattr(services.episodes, "unsummarized", concurrent_turn)
    assert await requeue_lost(services, user_id, thread, 0, 2) == 2

    pending = [m.id for _, m in await services.window.pending(user_id, thread)]
    assert pending == ids(lost)
    assert ids(await services.window.window(user_id, thread)) == [fresh.id]


async def test_a_refused_claim_says_when_the_batch_can_be_claimed(services, user_id):
    thread = _thread()
    queue = services.queue
    await queue.requeue(user_id, thread, [msg("human"), msg("ai")])
    a = await queue.claim(user_id, thread, "A", min_batch=1, max_batch=2, lease_s=2)
    b = await queue.claim(user_id, thread, "B", min_batch=1, max_batch=2, lease_s=2)
    assert a.status == "claimed" and a.retry_in_s is None
    assert b.status == "leased" and b.messages == [] and 1.5 < b.retry_in_s <= 2
    failed = await queue.fail(
        user_id, thread, "A", "boom", ids(a.messages), max_attempts=3, backoff_s=3
    )
    assert failed == "retry"
    c = await queue.claim(user_id, thread, "C", min_batch=1, max_batch=2, lease_s=2)
    assert c.status == "backoff" and 2.5 < c.retry_in_s <= 3
