"""Retention of the decision log (issue 33) on the real Postgres and Redis: maintenance
deletes decisions older than ``decision_retention_days``, keeps recent ones and those of a
thread whose memory work a retry will still replay from them, one user at a time; 0 keeps
everything."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from graph.maintenance import build_maintenance_graph
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.decisions import Decision
from tests.builders import msg
from tests.integration_tests.test_consolidation import _deciding, _seed
from tests.integration_tests.test_nodes import fill_pending, run_node

OLD = datetime.now(UTC) - timedelta(days=200)
RECENT = datetime.now(UTC) - timedelta(days=10)


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _decide(services, user: str, item: str, at: datetime, thread: str | None = None):
    decision = Decision(
        user_id=user,
        thread_id=thread,
        item_kind="summary" if thread else "reflection",
        item_id=item,
        action="created",
        decided_at=at,
    )
    await services.decisions.record(decision)


async def _items(services, user: str) -> set[str]:
    return {d.item_id for d in await services.decisions.list(user, limit=100)}


async def _dead_letter(services, user: str, thread: str) -> None:
    """A batch that failed for good: in ``dead`` until `memory redrive`."""
    await services.queue.requeue(user, thread, [msg("human"), msg("ai")])
    claim = await services.queue.claim(user, thread, "w", min_batch=1, max_batch=2, lease_s=5)
    ids = [m.id for m in claim.messages]
    assert await services.queue.fail(user, thread, "w", "boom", ids, max_attempts=1, backoff_s=0)


async def test_old_decisions_go_recent_and_still_needed_ones_stay_per_user(
    make_context, services, user_id
):
    other = f"u-{uuid.uuid4().hex[:10]}"
    done, busy, dead = _thread(), _thread(), _thread()
    await _decide(services, user_id, "old-reflection", OLD)
    await _decide(services, user_id, "old-done", OLD, done)
    await _decide(services, user_id, "recent-done", RECENT, done)
    await _decide(services, user_id, "old-busy", OLD, busy)  # its batch is still pending
    await services.queue.requeue(user_id, busy, [msg("human"), msg("ai")])
    await _decide(services, user_id, "old-dead", OLD, dead)  # its batch waits for a redrive
    await _dead_letter(services, user_id, dead)
    for item in ("old-reflection", "old-done"):
        await _decide(services, other, item, OLD, done if item == "old-done" else None)
    graph, ctx = build_maintenance_graph(services), make_context()

    dry = await graph.ainvoke({"user_id": user_id, "dry_run": True}, context=ctx)
    assert dry["report"]["decisions_pruned"] == 2
    assert len(await _items(services, user_id)) == 5, "a dry run deletes nothing"

    state = await graph.ainvoke({"user_id": user_id}, context=ctx)
    assert state["report"]["decisions_pruned"] == 2
    assert state["report"]["decision_retention"] == "older than 180 days"
    assert state["report"]["per_user"][user_id]["decisions_pruned"] == 2
    (entry,) = state["decisions"]
    assert entry["user_id"] == user_id and sorted(entry["held_threads"]) == sorted([busy, dead])
    assert await _items(services, user_id) == {"recent-done", "old-busy", "old-dead"}
    assert await _items(services, other) == {"old-reflection", "old-done"}, "untouched"

    # once the thread's work is done (here: its backlog gone), its old decisions go too
    await services.queue.redrive(user_id, dead)
    for thread in (busy, dead):
        claim = await services.queue.claim(
            user_id, thread, "w", min_batch=1, max_batch=9, lease_s=5
        )
        await services.queue.complete(user_id, thread, "w", [m.id for m in claim.messages])
    await graph.ainvoke({"user_id": user_id}, context=ctx)
    assert await _items(services, user_id) == {"recent-done"}


async def test_retention_0_keeps_every_decision_and_the_knob_is_read(
    make_context, services, user_id
):
    settings = Settings().override(decision_retention_days=0)
    await _decide(services, user_id, "ancient", OLD - timedelta(days=3000))
    await _decide(services, user_id, "old", OLD)
    graph = build_maintenance_graph(services, settings=settings)
    off = await graph.ainvoke({"user_id": user_id}, context=make_context())
    assert off["decisions"] == [] and off["report"]["decisions_pruned"] == 0
    assert off["report"]["decision_retention"] == "off (decision_retention_days=0)"
    assert await _items(services, user_id) == {"ancient", "old"}

    longer = build_maintenance_graph(
        services, settings=Settings().override(decision_retention_days=365)
    )
    state = await longer.ainvoke({"user_id": user_id}, context=make_context())
    assert state["report"]["decisions_pruned"] == 1
    assert await _items(services, user_id) == {"old"}
    with pytest.raises(ValueError, match="DECISION_RETENTION_DAYS='-1'"):
        Settings.from_env({"DECISION_RETENTION_DAYS": "-1"})


async def test_all_users_reaches_a_user_who_only_has_decisions_left(
    make_context, services, user_id
):
    await _decide(services, user_id, "old", OLD)  # no memories, no threads
    state = await build_maintenance_graph(services).ainvoke(
        {"all_users": True}, context=make_context()
    )
    assert user_id in state["users"]
    assert await _items(services, user_id) == set()


async def test_a_retry_after_maintenance_still_replays_its_recorded_decision(
    make_context, services, user_id
):
    """Worker A decided and applied, lost its lease, and its ack was refused; the batch
    waits in ``processing`` for B. Maintenance in between keeps A's decision, so B's retry
    replays it: the model is asked once and the target is strengthened once."""
    settings = Settings().override(summary_batch=4, lease_seconds=0.2)
    from nodes.consolidate import consolidate
    from nodes.summarize import summarize

    thread = _thread()
    await fill_pending(services, user_id, thread, 2)
    state = {"messages": []}
    short = make_context()
    late = (await run_node(services, summarize, state, short, thread, settings))["summary"]
    await asyncio.sleep(0.3)  # A's lease expires; B reclaims the same batch
    batch_of_4 = Settings().override(summary_batch=4)
    retry = (await run_node(services, summarize, state, make_context(), thread, batch_of_4))[
        "summary"
    ]
    assert retry["source_ids"] == late["source_ids"] and retry["worker"] != late["worker"]
    target = await _seed(services, user_id, text=late["text"])
    calls: list[str] = []
    ctx = make_context(model_obj=_deciding("strengthened", target=target.id, log=calls))
    await run_node(
        services, consolidate, {**state, "summary": late}, ctx, thread, settings=settings
    )
    assert await services.queue.backlog(user_id, thread) > 0, "A's ack was refused"
    await services.db.query(  # A decided 200 days ago: the batch was stuck that long
        "UPDATE memory_decisions SET decided_at = :at WHERE user_id = :u",
        {"at": OLD, "u": user_id},
    )

    maintained = await build_maintenance_graph(services, settings=settings).ainvoke(
        {"user_id": user_id}, context=make_context()
    )
    assert [e["held_threads"] for e in maintained["decisions"]] == [[thread]]
    out = await run_node(
        services, consolidate, {**state, "summary": retry}, ctx, thread, settings=settings
    )
    assert out["summary_stored"] is True
    assert len(calls) == 1, "the kept decision is replayed: the model is not asked again"
    (strengthened,) = await services.memories.get(user_id, [target.id])
    assert strengthened.importance == pytest.approx(0.6), "strengthened once, not twice"
    assert await services.queue.backlog(user_id, thread) == 0
