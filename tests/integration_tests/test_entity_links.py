"""Entity edges (real Postgres): written with the turns, followed by recall to a turn no
search finds, never across users, and gone with the turns and with a forgotten user."""

from __future__ import annotations

import uuid
from dataclasses import replace

from memory_graph_agent.recall.retrieval import retrieve
from memory_graph_agent.settings import RecallWeights, Settings
from memory_graph_agent.storage.forget import forget_user
from tests.builders import log_turns as log

QUESTION = "Where did I go hiking?"
SEED = "I hiked Mount Rainier with Priya last weekend."
LINKED = "Priya moved to Denver in May."  # shares no word with the question
FILLER = ["The weather was lovely in spring.", "My sister plays the cello."]


ENTITY_EDGES_ONLY = RecallWeights(neighbour_weight=0.0, summary_turn_weight=0.0, entity_weight=0.1)
"""No neighbour or summary links: only an entity edge reaches a turn no search found."""


async def _edges(services, user: str) -> set[tuple[str, str]]:
    rows = await services.db.query(
        f'SELECT entity, message_id FROM "{services.episodes.entities.table}" WHERE user_id = :u',
        {"u": user},
    )
    return {(r["entity"], r["message_id"]) for r in rows}


def _sources(found) -> dict[str, dict]:
    return {m["source_ids"][0]: m for m in found.items}


async def test_the_edges_are_written_with_the_turns_and_replaced_on_reindex(services, make_context):
    ctx = make_context()
    seed, linked = await log(services, ctx.user_id, "t1", SEED, LINKED)
    edges = await _edges(services, ctx.user_id)
    assert {("mount rainier", seed), ("rainier", seed), ("priya", seed)} <= edges
    assert {("priya", linked), ("denver", linked)} <= edges
    assert not {e for e, m in edges if e in ("hiked", "weekend", "i")}

    rows = await services.episodes.messages(ctx.user_id, "t1", [linked])
    changed = [replace(rows[0], content="Then we drove to Boise.")]
    await services.episodes.index(ctx.user_id, "t1", changed, services.embeddings)
    after = {e for e, m in await _edges(services, ctx.user_id) if m == linked}
    assert after == {"boise"}


async def test_recall_follows_an_entity_edge_to_a_turn_no_search_found(services, make_context):
    # no neighbour or summary links, dense-only hits dropped: only the edge reaches it
    settings = Settings().override(min_similarity=0.99, **ENTITY_EDGES_ONLY.model_dump())
    ctx = make_context()
    (seed,) = await log(services, ctx.user_id, "t1", SEED)
    (linked,) = await log(services, ctx.user_id, "t2", LINKED, day="2024-05-02")
    await log(services, ctx.user_id, "t3", *FILLER, day="2024-06-02")

    found = _sources(await retrieve(services, settings, ctx, QUESTION, "x", touch=False))
    assert seed in found and linked in found
    assert found[linked]["via"] == "entity" and found[linked]["entity_bonus"] > 0
    off = _sources(
        await retrieve(services, settings.override(entity_weight=0.0), ctx, QUESTION, "x")
    )
    assert seed in off and linked not in off


async def test_edges_never_reach_another_users_turns(services, make_context):
    settings = Settings().override(min_similarity=0.99, **ENTITY_EDGES_ONLY.model_dump())
    ctx = make_context()
    other = replace(ctx, user_id=f"u-{uuid.uuid4().hex[:8]}")
    (seed,) = await log(services, ctx.user_id, "t1", SEED)
    theirs = await log(services, other.user_id, "t1", LINKED, LINKED.replace("May", "June"))

    found = _sources(await retrieve(services, settings, ctx, QUESTION, "x", touch=False))
    assert seed in found and not set(theirs) & set(found)
    assert await services.episodes.entities.reach(ctx.user_id, ["priya"]) == []
    reached = await services.episodes.entities.reach(other.user_id, ["priya"])
    assert {r["message_id"] for r in reached} == set(theirs)


async def test_the_edges_go_with_a_forgotten_user_and_no_one_else(services, make_context):
    ctx = make_context()
    other = replace(ctx, user_id=f"u-{uuid.uuid4().hex[:8]}")
    await log(services, ctx.user_id, "t1", SEED, LINKED)
    (kept,) = await log(services, other.user_id, "t9", LINKED)
    assert await _edges(services, ctx.user_id)

    await forget_user(
        ctx.user_id, redis=services.redis, db=services.db, prefix=services.keys.prefix
    )
    assert await _edges(services, ctx.user_id) == set()
    assert await _edges(services, other.user_id) == {("priya", kept), ("denver", kept)}


async def test_backfill_links_turns_indexed_before_the_edges_existed(services, make_context):
    ctx = make_context()
    seed, linked = await log(services, ctx.user_id, "t1", SEED, LINKED)
    store = services.episodes.entities
    await services.db.query(f'DELETE FROM "{store.table}" WHERE user_id = :u', {"u": ctx.user_id})
    assert await _edges(services, ctx.user_id) == set()
    assert await store.backfill(ctx.user_id) == 2
    assert ("priya", seed) in await _edges(services, ctx.user_id)
    assert ("denver", linked) in await _edges(services, ctx.user_id)
