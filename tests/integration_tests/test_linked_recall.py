"""Turns linked to what recall found (real Postgres): the turn said next to a hit, and the
turns a recalled summary was made from, reach the prompt even when they share no word
with the question; links never cross a thread, a sitting or a user."""

from __future__ import annotations

import uuid

from memory_graph_agent.recall.retrieval import retrieve
from memory_graph_agent.settings import RecallWeights, Settings
from memory_graph_agent.storage.memory_rows import Memory
from tests.builders import log_turns as log
from tests.builders import turns_table_record, without_component

DOG = "I adopted a dog from the shelter last week."
NAME = "Biscuit, because of the colour of his fur."  # shares no word with the question
QUESTION = "What did I call the dog I adopted?"
FILLER = [
    "The weather in Lisbon was lovely in spring.",
    "My sister plays the cello in an orchestra.",
    "We painted the kitchen a pale shade of green.",
    "The train to Porto takes about three hours.",
]


def sources(found) -> set[str]:
    return {s for item in found.items for s in item["source_ids"]}


NO_SUMMARY_LINKS = RecallWeights(summary_turn_weight=0.0)


async def test_the_turn_next_to_a_hit_is_recalled(services, make_context):
    # a high cosine floor: only keyword hits count, and the name shares no word
    settings = Settings().override(**NO_SUMMARY_LINKS.model_dump(), min_similarity=0.9)
    ctx = make_context()
    ids = await log(services, ctx.user_id, "t1", *FILLER[:2], DOG, NAME, *FILLER[2:])
    dog, name = ids[2], ids[3]

    found = await retrieve(services, settings, ctx, QUESTION, "other-thread", touch=False)
    assert {dog, name} <= sources(found)
    (item,) = [m for m in found.items if m["source_ids"] == [name]]
    assert item["via"] == "neighbour" and item["keyword_rank"] is None

    off = await retrieve(
        services,
        settings.override(neighbour_weight=0.0),
        ctx,
        QUESTION,
        "x",
        touch=False,
    )
    assert name not in sources(off)


async def test_a_turn_two_away_from_a_hit_is_recalled_at_reach_two(services, make_context):
    """The name comes after the assistant's reply to the dog turn: reach 2 brings it."""
    settings = Settings().override(**NO_SUMMARY_LINKS.model_dump(), min_similarity=0.9)
    ctx = make_context()
    ids = await log(services, ctx.user_id, "t1", FILLER[0], DOG, FILLER[1], NAME, *FILLER[2:])
    dog, reply, name = ids[1], ids[2], ids[3]

    two = await retrieve(
        services, settings.override(neighbour_reach=2), ctx, QUESTION, "x", touch=False
    )
    by_source = {m["source_ids"][0]: m for m in two.items}
    assert {dog, reply, name} <= set(by_source)
    assert by_source[name]["via"] == "neighbour" and by_source[name]["keyword_rank"] is None
    weight = settings.recall.weights.neighbour_weight
    assert by_source[name]["rrf"] == round(weight**2 * by_source[dog]["rrf"], 6)
    assert by_source[reply]["rrf"] == round(weight * by_source[dog]["rrf"], 6)

    one = await retrieve(
        services, settings.override(neighbour_reach=1), ctx, QUESTION, "x", touch=False
    )
    assert reply in sources(one) and name not in sources(one)


async def test_neighbours_stay_in_their_thread_sitting_and_user(services, make_context):
    settings = Settings().override(**NO_SUMMARY_LINKS.model_dump(), min_similarity=0.9)
    ctx = make_context()
    (dog,) = await log(services, ctx.user_id, "t1", DOG)
    await log(services, ctx.user_id, "t2", NAME)  # another thread
    later = await log(services, ctx.user_id, "t1", NAME, day="2024-03-02")  # next day
    other = make_context(user_id=f"u-{uuid.uuid4().hex[:8]}")
    theirs = await log(services, other.user_id, "t1", NAME, hour=9)

    pairs = await services.episodes.neighbours(ctx.user_id, [("t1", dog)])
    assert pairs == []  # same thread only, same sitting only
    found = await retrieve(services, settings, ctx, QUESTION, "x", touch=False)
    assert not set(later + theirs) & sources(found)
    # the other user's own neighbour query never reaches this user's turns
    assert await services.episodes.neighbours(other.user_id, [("t1", dog)]) == []


async def test_the_turns_of_a_recalled_summary_are_ranked_in(services, make_context):
    weights = RecallWeights(neighbour_weight=0.0, summary_turn_weight=0.3)
    settings = Settings().override(**weights.model_dump(), min_similarity=0.9)
    ctx = make_context()
    ids = await log(services, ctx.user_id, "t1", *FILLER, NAME)
    summary = Memory(
        ctx.user_id,
        "summary",
        "The user adopted a shelter dog and named it.",
        0.5,
        [ids[-1]],
        thread_id="t1",
    )
    await services.memories.add(summary)
    found = await retrieve(services, settings, ctx, QUESTION, "x", touch=False)
    (item,) = [m for m in found.items if m["source_ids"] == [ids[-1]]]
    assert item["kind"] == "episode" and item["via"] == "summary"

    plain = await retrieve(
        services, settings.override(summary_turn_weight=0.0), ctx, QUESTION, "x", touch=False
    )
    linked = [m for m in plain.items if m["source_ids"] == [ids[-1]] and m["kind"] == "episode"]
    assert not linked or "via" not in linked[0]


async def test_a_turn_sharing_a_rare_word_with_the_best_hit_gets_a_topic_link(
    services, make_context
):
    # different days: no neighbour links; only keyword hits count (high cosine floor)
    weights = RecallWeights(neighbour_weight=0.0, summary_turn_weight=0.0)
    settings = Settings().override(**weights.model_dump(), min_similarity=0.9)
    ctx = make_context()
    (best,) = await log(services, ctx.user_id, "t1", "I adopted a dog: Biscuit!")
    (fan,) = await log(
        services, ctx.user_id, "t2", "Biscuit the dog ate my shoes.", day="2024-04-02"
    )
    (other,) = await log(
        services, ctx.user_id, "t3", "My friend adopted a dog too.", day="2024-05-02"
    )

    def by_source(found):
        return {m["source_ids"][0]: m for m in found.items}

    linked = by_source(
        await retrieve(services, settings.override(topic_weight=0.5), ctx, QUESTION, "x")
    )
    plain = by_source(
        await retrieve(services, settings.override(topic_weight=0.0), ctx, QUESTION, "x")
    )
    assert {best, fan, other} <= set(linked) and {best, fan, other} <= set(plain)
    assert linked[fan]["topic_bonus"] > 0  # "Biscuit", a word the question does not have
    assert linked[fan]["rrf"] > plain[fan]["rrf"]
    assert "topic_bonus" not in linked[other] and "topic_bonus" not in plain[fan]


async def test_a_search_looks_its_neighbours_up_through_the_planned_function(
    services, make_context
):
    """The searches call ``{table}_neighbours`` (its lookups planned once per connection)
    instead of planning the lookups inline with every search; the neighbours are the same
    as the neighbours' own query finds."""
    ctx = make_context()
    ids = await log(services, ctx.user_id, "t1", *FILLER[:2], DOG, NAME, *FILLER[2:])
    vector = await services.embeddings.aembed_query(QUESTION)
    *options, (sql, params) = services.episodes.linked_dense_statements(ctx.user_id, vector, 6, 3)
    rows = await services.db.run(*options, ("EXPLAIN (COSTS OFF) " + sql, params))
    plan = "\n".join(next(iter(r.values())) for r in rows)
    assert f"Function Scan on {services.episodes.vector_table}_neighbours" in plan
    found = await services.episodes.neighbours(ctx.user_id, [("t1", ids[2])])
    assert {hit.message_id for _, hit in found} == {ids[1], ids[3]}  # before and after


async def test_a_database_made_before_gets_the_neighbours_function(services, make_context):
    table = services.episodes.vector_table
    exists = "SELECT count(*) AS n FROM pg_proc WHERE proname = :f"
    params = {"f": f"{table}_neighbours"}
    before = await turns_table_record(services)
    drop = f'DROP FUNCTION "{table}_neighbours"(text, text, text, numeric, int)'
    async with without_component(services, f"{table}_neighbours", drop):
        assert (await services.db.query(exists, params))[0]["n"] == 0
    assert (await services.db.query(exists, params))[0]["n"] == 1
    # only the function was made: the turns table's own DDL did not run again (its record
    # would have been written anew)
    assert await turns_table_record(services) == before
    ctx = make_context()
    ids = await log(services, ctx.user_id, "t1", DOG, NAME)
    found = await services.episodes.neighbours(ctx.user_id, [("t1", ids[0])])
    assert [hit.message_id for _, hit in found] == [ids[1]]
