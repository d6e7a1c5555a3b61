"""Memory work gives way to read paths (`memory_graph_agent.core.priority`), bounded."""

from __future__ import annotations

import asyncio

from memory_graph_agent.core.priority import give_way, memory_work, read_path, reading


async def test_memory_work_waits_until_the_read_path_ends():
    order: list[str] = []

    async def turn() -> None:
        async with read_path():
            await asyncio.sleep(0.05)
            order.append("read path done")

    async def memory() -> None:
        await asyncio.sleep(0)  # the turn's read path is in flight
        with memory_work(5.0):
            waited = await give_way()
        order.append("memory store call")
        assert waited >= 0.03

    await asyncio.gather(turn(), memory())
    assert order == ["read path done", "memory store call"]
    assert reading() == 0


async def test_turns_and_idle_memory_never_wait():
    async with read_path():
        assert reading() == 1
        assert await give_way() == 0.0  # not memory work: a turn's own store calls
        with memory_work(0.0):  # memory_give_way_s=0 turns it off
            assert await give_way() == 0.0
    with memory_work(5.0):
        assert await give_way() == 0.0  # no read path in flight


async def test_the_wait_is_bounded():
    async with read_path(), read_path():  # two turns side by side
        assert reading() == 2
        with memory_work(0.05):
            waited = await give_way()
    assert 0.04 <= waited < 1.0
    assert reading() == 0
