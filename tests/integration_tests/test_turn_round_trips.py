"""A turn's read path makes one Redis round trip, and still loads all it loaded before.

Through the compiled graph (`graph.builder.build_builder`, prefetching as shipped) on the
real Redis: from ``ainvoke`` until ``respond`` starts, the turn borrows one connection of
the Redis pool once. The admission, the profile with its recent changes and the thread's
running summary travel together (`ThreadOwners.admit`'s ``also``), and each still
reaches the state, the profile's change notes included.
"""

from __future__ import annotations

import uuid

import pytest

from graph.builder import build_builder, prefetching
from memory_graph_agent.storage.profile import Fact
from tests.conftest import say


@pytest.fixture
def counted(services, checkpointer, monkeypatch):
    """``(graph, counts)``: each turn's Redis round trips until ``respond`` starts."""
    pool = services.redis.connection_pool
    borrow = pool.get_connection
    counts: list[int] = []
    state = {"counting": False}

    async def get_connection(*args, **kwargs):  # noqa: ANN202 - the pool's own signature
        if state["counting"]:
            counts[-1] += 1
        return await borrow(*args, **kwargs)

    monkeypatch.setattr(pool, "get_connection", get_connection)

    def wrap(node, name):  # noqa: ANN001, ANN202 - `build_builder`'s hook
        if name != "respond":
            return node

        async def respond(state_, runtime):  # noqa: ANN001, ANN202
            state["counting"] = False
            return await node(state_, runtime)

        return respond

    graph = prefetching(
        build_builder(services, wrap=wrap).compile(checkpointer=checkpointer), services
    )

    async def turn(ctx, thread: str, text: str) -> dict:
        counts.append(0)
        state["counting"] = True
        try:
            return await say(graph, ctx, thread, text)
        finally:
            state["counting"] = False

    return turn, counts


async def test_a_turn_reads_redis_in_one_round_trip_before_the_model(
    counted, make_context, services
):
    turn, counts = counted
    ctx, thread = make_context(), f"round-trips-{uuid.uuid4().hex[:8]}"
    await turn(ctx, thread, "Hello, I am planning a trip.")  # claims the thread
    await services.profile.upsert(ctx.user_id, [Fact("city", "Oslo", 0.7)], ctx.ttl_days)
    await services.profile.upsert(ctx.user_id, [Fact("city", "Bergen", 0.8)], ctx.ttl_days)
    await services.window.set_thread_summary(ctx.user_id, thread, "We talked about trains.")

    state = await turn(ctx, thread, "Which city should I start from?")

    assert counts[-1] == 1  # was 3: admission, then the profile, beside the running summary
    assert state["profile"]["city"]["value"] == "Bergen"
    assert [(c["key"], c["old"], c["new"]) for c in state["profile_changes"]] == [
        ("city", "Oslo", "Bergen")
    ]
    assert state["thread_summary"] == "We talked about trains."
