"""The ``maintenance`` graph (compiled, invoked) and ``memory-agent maintain``: expiry,
eviction of old unimportant memories, compaction of duplicates, pins kept, a report."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from graph.maintenance import build_maintenance_graph
from memory_graph_agent.cli.main import main
from memory_graph_agent.maintenance import plan_compaction
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memories import Memory

NOW = datetime.now(UTC)


def _memory(user: str, text: str, importance: float, **kw) -> Memory:
    return Memory(
        user_id=user,
        kind=kw.pop("kind", "summary"),
        text=text,
        importance=importance,
        source_ids=[uuid.uuid4().hex[:8]],
        thread_id="t1",
        **kw,
    )


async def _seed(services, user: str) -> dict[str, Memory]:
    """One memory per fate: evicted, expired, pinned (kept), duplicates, plain (kept)."""
    old = NOW - timedelta(days=200)
    seeded = {
        "old_trivia": _memory(user, "The user asked about the weather once.", 0.05, created_at=old),
        "expired": _memory(
            user, "The user had a dentist appointment.", 0.5, expires_at=NOW - timedelta(days=1)
        ),
        "pinned": _memory(
            user,
            "The user's locker code is written on a blue card.",
            0.05,
            created_at=old,
            pinned=True,
        ),
        "dup_keep": _memory(user, "The user plays the cello every evening.", 0.7),
        "dup_drop": _memory(user, "The user plays the cello every evening.", 0.4),
        "plain": _memory(user, "The user is learning Portuguese for a trip.", 0.5),
    }
    for memory in seeded.values():
        await services.memories.add(memory)
    return seeded


async def test_maintenance_graph_expires_evicts_compacts_and_keeps_pins(
    make_context, services, user_id
):
    other = f"u-{uuid.uuid4().hex[:10]}"
    seeded = await _seed(services, user_id)
    theirs = await _seed(services, other)
    graph = build_maintenance_graph(services)
    ctx = make_context()

    dry = await graph.ainvoke({"user_id": user_id, "dry_run": True}, context=ctx)
    assert dry["report"]["dry_run"] is True
    assert (dry["report"]["expired"], dry["report"]["evicted"], dry["report"]["compacted"]) == (
        1,
        1,
        1,
    )
    assert len(await services.memories.list(user_id)) == 6, "a dry run changes nothing"
    assert await services.decisions.list(user_id) == []

    state = await graph.ainvoke({"user_id": user_id}, context=ctx)
    report = state["report"]
    assert (report["users"], report["expired"], report["evicted"], report["compacted"]) == (
        1,
        1,
        1,
        1,
    )
    assert report["per_user"] == {user_id: {"expired": 1, "evicted": 1, "compacted": 1}}
    assert [e["id"] for e in state["expired"]] == [seeded["expired"].id]
    assert [e["id"] for e in state["evicted"]] == [seeded["old_trivia"].id]
    (dup,) = state["compacted"]
    assert (dup["id"], dup["kept"]) == (seeded["dup_drop"].id, seeded["dup_keep"].id)

    left = {m.id: m for m in await services.memories.list(user_id)}
    assert set(left) == {seeded[k].id for k in ("pinned", "dup_keep", "dup_drop", "plain")}
    assert left[seeded["pinned"].id].status == "active"
    assert left[seeded["dup_drop"].id].status == "superseded"
    assert left[seeded["dup_drop"].id].superseded_by == seeded["dup_keep"].id
    assert left[seeded["dup_keep"].id].status == "active"
    logged = {(d.action, d.target_id) for d in await services.decisions.list(user_id)}
    assert logged == {
        ("expired", seeded["expired"].id),
        ("evicted", seeded["old_trivia"].id),
        ("compacted", seeded["dup_keep"].id),
    }
    assert len(await services.memories.list(other)) == len(theirs), "another user untouched"

    again = await graph.ainvoke({"user_id": user_id}, context=ctx)
    assert (again["report"]["expired"], again["report"]["evicted"]) == (0, 0)
    assert again["report"]["compacted"] == 0


async def test_maintenance_respects_the_context_thresholds(make_context, services, user_id):
    settings = Settings().override(evict_after_days=365, duplicate_similarity=1.01)
    seeded = await _seed(services, user_id)
    ctx = make_context()
    state = await build_maintenance_graph(services, settings=settings).ainvoke(
        {"user_id": user_id}, context=ctx
    )
    assert state["evicted"] == [] and state["compacted"] == []
    assert [e["id"] for e in state["expired"]] == [seeded["expired"].id]


def test_plan_compaction_keeps_pinned_then_important_then_oldest():
    user = "u-plan"
    t0 = NOW - timedelta(days=3)
    a = _memory(user, "a", 0.5, created_at=t0)
    b = _memory(user, "b", 0.5, created_at=NOW)
    c = _memory(user, "c", 0.9, created_at=NOW)
    p = _memory(user, "p", 0.1, created_at=NOW, pinned=True)
    q = _memory(user, "q", 0.1, created_at=NOW, pinned=True)
    mems = {m.id: m for m in (a, b, c, p, q)}
    plan = plan_compaction(mems, [(a.id, b.id, 0.97), (a.id, c.id, 0.96)])
    # c (most important) keeps a; b's only duplicate went into c, so b stays
    assert {(d.text, k.text) for d, k, _ in plan} == {("a", "c")}
    plan = plan_compaction(mems, [(a.id, b.id, 0.97)])
    assert {(d.text, k.text) for d, k, _ in plan} == {("b", "a")}
    # two pinned duplicates both stay; an unpinned one goes to the pinned keeper
    plan = plan_compaction(mems, [(p.id, q.id, 0.99), (p.id, b.id, 0.99)])
    assert {(d.text, k.text) for d, k, _ in plan} == {("b", p.text)}


async def test_cli_maintain_user_and_all_users(make_context, services, user_id, capsys):
    seeded = await _seed(services, user_id)
    code = await asyncio.to_thread(main, ["maintain", "--user", user_id, "--dry-run", "--json"])
    assert code == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["report"]["dry_run"] is True and dry["report"]["expired"] == 1
    assert len(await services.memories.list(user_id)) == 6

    code = await asyncio.to_thread(main, ["maintain", "--all-users"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "removed/superseded:" in out
    assert f"expired {user_id} {seeded['expired'].id[:8]}" in out
    left = {m.id for m in await services.memories.list(user_id)}
    assert seeded["expired"].id not in left and seeded["old_trivia"].id not in left
    assert seeded["pinned"].id in left


def test_cli_maintain_needs_a_user_or_all_users(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["maintain", "--dry-run"])
    assert exc.value.code == 2
    assert "one of the arguments --user --all-users is required" in capsys.readouterr().err


async def test_a_compaction_keeper_lives_as_long_as_its_longest_lived_duplicate(
    make_context, services, user_id
):
    keep = _memory(
        user_id, "The user bakes sourdough bread.", 0.7, expires_at=NOW + timedelta(days=2)
    )
    drop = _memory(
        user_id, "The user bakes sourdough bread.", 0.5, expires_at=NOW + timedelta(days=25)
    )
    for memory in (keep, drop):
        await services.memories.add(memory)
    state = await build_maintenance_graph(services).ainvoke(
        {"user_id": user_id}, context=make_context()
    )
    assert [(e["id"], e["kept"]) for e in state["compacted"]] == [(drop.id, keep.id)]
    (kept,) = await services.memories.get(user_id, [keep.id])
    assert kept.status == "active" and kept.expires_at == drop.expires_at


async def _chain(services, user: str) -> dict[str, Memory]:
    """An expired memory with a chain of two it superseded, a live memory with one, and a
    row whose successor was deleted before (by the forget tool, say)."""
    gone = NOW - timedelta(days=1)
    seeded = {
        "expired": _memory(user, "The user is packing for Lisbon.", 0.5, expires_at=gone),
        "older": _memory(user, "The user plans a trip to Lisbon.", 0.5),
        "oldest": _memory(user, "The user may travel in spring.", 0.5),
        "live": _memory(user, "The user keeps bees on the roof.", 0.8),
        "replaced": _memory(user, "The user keeps a beehive.", 0.5),
        "orphan": _memory(user, "The user's old phone was blue.", 0.5),
    }
    for memory in seeded.values():
        await services.memories.add(memory)
    for dup, kept in (
        ("older", seeded["expired"].id),
        ("oldest", seeded["older"].id),
        ("replaced", seeded["live"].id),
        ("orphan", str(uuid.uuid4())),  # a memory deleted earlier
    ):
        assert await services.memories.supersede(user, [seeded[dup].id], kept) == 1
    return seeded


async def test_superseded_memories_go_with_their_successor_per_user(
    make_context, services, user_id
):
    other = f"u-{uuid.uuid4().hex[:10]}"
    seeded = await _chain(services, user_id)
    theirs = await _chain(services, other)
    graph, ctx = build_maintenance_graph(services), make_context()
    gone = {seeded[k].id for k in ("expired", "older", "oldest", "orphan")}

    dry = await graph.ainvoke({"user_id": user_id, "dry_run": True}, context=ctx)
    assert {e["id"] for e in dry["expired"]} == gone
    assert len(await services.memories.list(user_id)) == 6, "a dry run changes nothing"

    state = await graph.ainvoke({"user_id": user_id}, context=ctx)
    assert {e["id"] for e in state["expired"]} == gone
    by_id = {e["id"]: e for e in state["expired"]}
    assert by_id[seeded["oldest"].id]["superseded_by"] == seeded["older"].id
    left = {m.id for m in await services.memories.list(user_id)}
    assert left == {seeded["live"].id, seeded["replaced"].id}
    assert {m.id for m in await services.memories.list(other)} == {m.id for m in theirs.values()}, (
        "another user's provenance untouched"
    )
