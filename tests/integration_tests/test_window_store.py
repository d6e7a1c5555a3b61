"""WindowStore on the real Redis (no mocks)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from memory_graph_agent.core.ids import InvalidIdError
from memory_graph_agent.storage.window import StoredMessage
from tests.builders import assert_tool_groups_intact, ids, keep_last, msg, tool_conversation


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def pairs(n: int, tag: str = "") -> list[StoredMessage]:
    """n human/ai pairs with readable ids h0,a0,h1,a1,..."""
    out = []
    for i in range(n):
        out += [msg("human", f"h{i}{tag}"), msg("ai", f"a{i}{tag}")]
    return out


async def _state(
    services, user_id: str, thread: str
) -> tuple[list[StoredMessage], list[StoredMessage]]:
    window = await services.window.window(user_id, thread)
    pending = [m for _, m in await services.window.pending(user_id, thread)]
    return pending, window


async def test_push_is_idempotent(services, user_id):
    thread = _thread()
    batch = pairs(2)
    assert await services.window.push(user_id, thread, batch) == 4
    assert await services.window.push(user_id, thread, batch) == 0
    assert await services.window.push(user_id, thread, [batch[0], batch[0]]) == 0
    assert ids(await services.window.window(user_id, thread)) == ids(batch)
    # duplicates inside one call are pushed once
    dup = msg("human", "dup")
    assert await services.window.push(user_id, thread, [dup, dup, dup]) == 1
    assert ids(await services.window.window(user_id, thread)) == [*ids(batch), "dup"]
    assert await services.window.push(user_id, thread, []) == 0


async def test_push_after_eviction_does_not_resurrect_message(services, user_id):
    thread = _thread()
    batch = pairs(3)
    await services.window.push(user_id, thread, batch)
    moved = await services.window.overflow(user_id, thread, keep_last(2))
    assert moved
    assert await services.window.push(user_id, thread, batch) == 0
    pending, window = await _state(services, user_id, thread)
    assert ids(pending) + ids(window) == ids(batch)


async def test_push_rejects_hostile_ids(services):
    with pytest.raises(InvalidIdError):
        await services.window.push("a:*", "t", [msg("human")])
    with pytest.raises(InvalidIdError):
        await services.window.window("u", "../x")


async def test_overflow_moves_oldest_on_turn_boundary_in_order(services, user_id):
    thread = _thread()
    batch = pairs(3)  # h0 a0 h1 a1 h2 a2
    await services.window.push(user_id, thread, batch)
    moved = await services.window.overflow(user_id, thread, keep_last(3))
    assert ids(moved) == ["h0", "a0", "h1", "a1"]
    pending, window = await _state(services, user_id, thread)
    assert ids(pending) == ["h0", "a0", "h1", "a1"]
    assert ids(window) == ["h2", "a2"]
    assert await services.window.pending_len(user_id, thread) == 4
    # nothing more to move; a second overflow is a no-op
    assert await services.window.overflow(user_id, thread, keep_last(3)) == []
    # the next turns append after the earlier pending messages, order kept
    await services.window.push(user_id, thread, pairs(2, tag="x"))
    moved = await services.window.overflow(user_id, thread, keep_last(3))
    assert ids(moved) == ["h2", "a2", "h0x", "a0x"]
    pending, window = await _state(services, user_id, thread)
    assert ids(pending) == ["h0", "a0", "h1", "a1", "h2", "a2", "h0x", "a0x"]
    assert ids(window) == ["h1x", "a1x"]


async def test_overflow_under_limit_and_empty_window_move_nothing(services, user_id):
    thread = _thread()
    assert await services.window.overflow(user_id, thread, keep_last(3)) == []
    await services.window.push(user_id, thread, pairs(1))
    assert await services.window.overflow(user_id, thread, keep_last(3)) == []
    assert await services.window.pending_len(user_id, thread) == 0


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("granularity", ["turn", "message"])
async def test_overflow_never_separates_tool_calls_from_results(
    services, user_id, size, granularity
):
    thread = _thread()
    turns = tool_conversation()
    pushed: list[StoredMessage] = []
    chunks = turns if granularity == "turn" else [[m] for t in turns for m in t]
    for chunk in chunks:
        await services.window.push(user_id, thread, chunk)
        pushed += chunk
        await services.window.overflow(user_id, thread, keep_last(size))
        pending, window = await _state(services, user_id, thread)
        assert ids(pending) + ids(window) == ids(pushed), "order changed or message lost"
        assert_tool_groups_intact(pending, window)
    pending, window = await _state(services, user_id, thread)
    assert pending, "overflow should have evicted something"


async def test_concurrent_overflow_neither_duplicates_nor_loses(services, user_id):
    thread = _thread()
    batch = pairs(30)  # 60 messages
    await services.window.push(user_id, thread, batch)
    sizes = [50, 40, 30, 20, 10, 6, 4, 2, 2, 2, 2, 2]
    results = await asyncio.gather(
        *(services.window.overflow(user_id, thread, keep_last(s)) for s in sizes)
    )
    moved = [m.id for r in results for m in r]
    assert len(moved) == len(set(moved)), "a message was moved twice"
    pending, window = await _state(services, user_id, thread)
    assert sorted(moved) == sorted(ids(pending))
    assert ids(pending) + ids(window) == ids(batch)
    assert len(window) <= 2


async def test_concurrent_push_and_overflow_keep_every_message_once(services, user_id):
    thread = _thread()
    batches = [pairs(3, tag=f"b{i}") for i in range(10)]
    jobs = []
    for b in batches:
        jobs.append(services.window.push(user_id, thread, b))
        jobs.append(services.window.overflow(user_id, thread, keep_last(4)))
    await asyncio.gather(*jobs)
    await services.window.overflow(user_id, thread, keep_last(4))
    pending, window = await _state(services, user_id, thread)
    every = ids(pending) + ids(window)
    expected = {m.id for b in batches for m in b}
    assert len(every) == len(set(every)) == len(expected)
    assert set(every) == expected
    assert len(window) <= 4
    # each batch (pushed atomically) keeps its internal order
    pos = {mid: i for i, mid in enumerate(every)}
    for b in batches:
        assert [pos[m.id] for m in b] == sorted(pos[m.id] for m in b)


async def test_ack_removes_only_given_ids_and_only_when_called(services, user_id):
    thread = _thread()
    await services.window.push(user_id, thread, pairs(4))
    await services.window.overflow(user_id, thread, keep_last(2))
    pending, window = await _state(services, user_id, thread)
    assert ids(pending) == ["h0", "a0", "h1", "a1", "h2", "a2"]
    # pending survives reads and further overflow calls until acked
    await services.window.pending(user_id, thread, 2)
    await services.window.overflow(user_id, thread, keep_last(2))
    assert await services.window.pending_len(user_id, thread) == 6

    assert await services.window.ack(user_id, thread, []) == 0
    assert await services.window.ack(user_id, thread, ["nope", "h3"]) == 0  # h3 is in the window
    assert await services.window.ack(user_id, thread, ["a0", "h1"]) == 2
    pending2, window2 = await _state(services, user_id, thread)
    assert ids(pending2) == ["h0", "a1", "h2", "a2"]
    assert ids(window2) == ids(window) == ["h3", "a3"]
    assert await services.window.ack(user_id, thread, ["a0", "h1"]) == 0  # already gone
    assert await services.window.ack(user_id, thread, ["h0", "a1", "h2", "a2"]) == 4
    assert await services.window.pending_len(user_id, thread) == 0


async def test_pending_limit_returns_oldest_first(services, user_id):
    thread = _thread()
    await services.window.push(user_id, thread, pairs(4))
    await services.window.overflow(user_id, thread, keep_last(2))
    assert [m.id for _, m in await services.window.pending(user_id, thread, 3)] == [
        "h0",
        "a0",
        "h1",
    ]
    raw, first = (await services.window.pending(user_id, thread, 1))[0]
    assert StoredMessage.from_json(raw) == first


async def test_threads_lists_window_and_pending_threads_of_user_only(services, user_id):
    t1, t2 = _thread(), _thread()
    await services.window.push(user_id, t1, pairs(1))
    await services.window.push(user_id, t2, pairs(3))
    await services.window.overflow(user_id, t2, keep_last(1))
    await services.window.push(f"{user_id}x", _thread(), pairs(1))
    assert await services.window.threads(user_id) == sorted([t1, t2])


async def test_pending_limit_zero_returns_nothing(services, user_id):
    thread = _thread()
    await services.window.push(user_id, thread, pairs(3))
    await services.window.overflow(user_id, thread, keep_last(2))
    assert await services.window.pending(user_id, thread, 0) == []
