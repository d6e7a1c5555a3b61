"""A turn's read path makes one Redis round trip per node, side by side.

Through the compiled graph (`graph.builder.build_builder`, as shipped) on the
real Redis: from ``ainvoke`` until ``respond`` starts, the turn borrows a connection of
the Redis pool twice, in one step: ``load_profile``'s admission, the profile with its recent
changes and the thread's running summary travel together (`ThreadOwners.admit`'s
``also``), and each still reaches the state, the profile's change notes included; beside
it, ``recall`` reads the window beside its searches (`prompting.screen`).
"""

from __future__ import annotations

import uuid

import pytest
from langchain_core.callbacks import BaseCallbackHandler

from graph.builder import build_builder
from memory_graph_agent.storage.profile import Fact
from tests.conftest import say


@pytest.fixture
def counted(services, checkpointer, monkeypatch, settings):
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

    class StopAtRespond(BaseCallbackHandler):
        run_inline = True

        def on_chain_start(self, serialized, inputs, **kwargs):  # noqa: ANN001, ANN003, ANN202
            if kwargs.get("name") == "respond":
                state["counting"] = False

    graph = build_builder(services, settings).compile(checkpointer=checkpointer)
    graph = graph.with_config(callbacks=[StopAtRespond()])

    async def turn(ctx, thread: str, text: str) -> dict:
        counts.append(0)
        state["counting"] = True
        try:
            return await say(graph, ctx, thread, text)
        finally:
            state["counting"] = False

    return turn, counts


async def test_a_turn_reads_redis_in_one_round_trip_before_the_model(
    settings, counted, make_context, services
):
    turn, counts = counted
    ctx, thread = make_context(), f"round-trips-{uuid.uuid4().hex[:8]}"
    await turn(ctx, thread, "Hello, I am planning a trip.")  # claims the thread
    await services.profile.upsert(
        ctx.user_id, [Fact("city", "Oslo", 0.7)], settings.retention.ttl_days
    )
    await services.profile.upsert(
        ctx.user_id, [Fact("city", "Bergen", 0.8)], settings.retention.ttl_days
    )
    await services.window.set_thread_summary(ctx.user_id, thread, "We talked about trains.")

    state = await turn(ctx, thread, "Which city should I start from?")

    assert counts[-1] == 2  # load_profile's one (was 3), and recall's window read beside it
    assert state["profile"]["city"]["value"] == "Bergen"
    assert [(c["key"], c["old"], c["new"]) for c in state["profile_changes"]] == [
        ("city", "Oslo", "Bergen")
    ]
    assert state["thread_summary"] == "We talked about trains."


async def test_an_unreadable_running_summary_costs_the_turn_only_its_summary(
    settings, counted, make_context, services
):
    """A summary key of the wrong type (``WRONGTYPE``) loses the summary, not the turn start.

    The admission and the profile travel in the same pipeline, but keep their replies: the
    profile loads, and the running summary the checkpoint holds stays in the state.
    """
    turn, _ = counted
    ctx, thread = make_context(), f"round-trips-{uuid.uuid4().hex[:8]}"
    await services.window.set_thread_summary(ctx.user_id, thread, "We talked about trains.")
    await turn(ctx, thread, "Hello, I am planning a trip.")
    await services.profile.upsert(
        ctx.user_id, [Fact("city", "Bergen", 0.8)], settings.retention.ttl_days
    )
    _, (summary_key,) = services.window.thread_summary_read(ctx.user_id, thread)
    await services.redis.delete(summary_key)
    await services.redis.rpush(summary_key, "not a summary")  # a list: GET fails

    state = await turn(ctx, thread, "Which city should I start from?")

    assert state["profile"]["city"]["value"] == "Bergen"
    assert state["thread_summary"] == "We talked about trains."  # the checkpoint's
    kinds = [e["kind"] for e in state["memory_events"] if e["node"] == "load_profile"]
    assert "loaded" in kinds and "unavailable" not in kinds


async def test_an_unreadable_profile_costs_the_turn_only_its_profile(
    counted, make_context, services
):
    """A profile key of the wrong type loses the profile; the running summary still loads."""
    turn, _ = counted
    ctx, thread = make_context(), f"round-trips-{uuid.uuid4().hex[:8]}"
    await turn(ctx, thread, "Hello, I am planning a trip.")
    await services.window.set_thread_summary(ctx.user_id, thread, "We talked about trains.")
    await services.redis.set(services.profile.key(ctx.user_id), "not a hash")  # HGETALL fails

    state = await turn(ctx, thread, "Which city should I start from?")

    assert state["thread_summary"] == "We talked about trains."
    assert not state.get("profile")
    kinds = [e["kind"] for e in state["memory_events"] if e["node"] == "load_profile"]
    assert kinds == ["unavailable"]
