"""Recall's channels searched at once (real Postgres): the same results as each store's own
search, never another user's rows, and `retrieve` the same with a precomputed vector."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from graph.context import Context
from memory_graph_agent.recall import retrieval
from memory_graph_agent.recall.channels import CHANNELS
from memory_graph_agent.recall.channels.base import Found, Search, search_channels
from memory_graph_agent.recall.linking import summary_turns
from memory_graph_agent.recall.retrieval import retrieve
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memory_rows import Memory
from tests.builders import log_turns

TOPICS = [
    "I keep bees on my balcony in Lisbon.",
    "My sister plays the cello in the city orchestra.",
    "We painted the kitchen a pale shade of green last spring.",
    "The train to Porto takes about three hours from here.",
    "My budget for the new bike is about 500 euros.",
    "The dog we adopted is called Biscuit.",
    "I train for the half marathon on Sunday mornings.",
    "Our neighbour grows tomatoes and basil on the roof.",
]
QUESTIONS = [
    "Where do I keep bees?",
    "What instrument does my sister play?",
    "How much did I want to spend on a bike?",
    "What is the dog called?",
    "bees cello bike dog marathon tomatoes",
    "?!",  # no words: the keyword channel has nothing to search
]


REACH = 2
"""How far the searches' neighbours reach here: two turns each way, hops counted."""


async def search_all(services, user, vector, text, k, depth, around=0) -> Found:
    """Every channel's search: ``k`` memories, ``depth`` turns per turn channel."""
    settings = Settings().override(recall_k=k, speaker_turns=0, neighbour_reach=REACH)
    ctx = Context(user_id=user)
    return await search_channels(
        services, Search(settings, ctx.user_id, text, depth, around), vector, CHANNELS
    )


def dense(found: Found) -> list:
    return found.ranked("dense_turns")


def keyword(found: Found) -> list:
    return found.ranked("keyword_turns")


async def _seed(services, user: str, secret: str) -> None:
    """Two threads of turns (logged and indexed) and a summary of each, for ``user``."""
    for t, texts in enumerate((TOPICS[:4] + [secret], TOPICS[4:] + [secret])):
        ids = await log_turns(services, user, f"t{t}", *texts, day=f"2024-03-0{t + 1}")
        await services.memories.add(Memory(user, "summary", " ".join(texts), 0.5, ids, f"t{t}"))
    await services.memories.add(Memory(user, "reflection", f"The user mentions {secret}", 0.9, []))


@pytest.fixture(scope="module")
async def users(services):
    """Three users with the same conversations, each with a secret of their own."""
    names = [f"rs-{uuid.uuid4().hex[:8]}-{n}" for n in range(3)]
    for n, user in enumerate(names):
        await _seed(services, user, f"My locker code is QX-{n}{n}{n}.")
    return names


@pytest.mark.parametrize("question", QUESTIONS)
async def test_one_round_trip_finds_what_each_search_finds(users, services, question):
    vector = await services.embeddings.aembed_query(question)
    for user in users:
        found = await search_all(services, user, vector, question, 3, 4)
        assert found.memories == await services.memories.search(user, vector, 3)
        assert dense(found) == await services.episodes.dense_search(user, vector, 4)
        assert keyword(found) == await services.episodes.keyword_search(user, question, 4)
        assert len(found.memories) == 3 and len(dense(found)) == 4


async def test_another_users_rows_never_come_back(users, services):
    question = "What is my locker code QX-000?"
    vector = await services.embeddings.aembed_query(question)
    for n, user in enumerate(users):
        found = await search_all(services, user, vector, question, 50, 50)
        assert {m.user_id for m in found.memories} == {user}
        own = {m.id for m in await services.episodes.history(user)}
        hits = dense(found) + keyword(found)
        assert hits and {h.message_id for h in hits} <= own
        texts = [m.text for m in found.memories] + [h.content for h in hits]
        assert any(f"QX-{n}{n}{n}" in t for t in texts)
        assert not any(f"QX-{o}{o}{o}" in t for o in range(3) if o != n for t in texts)


async def test_retrieve_with_its_embedding_started_ahead_is_retrieve(
    settings, users, services, make_context
):
    """The embedding a turn's run started (`graph.prefetch`) finds what retrieve's own does."""
    question = QUESTIONS[1]
    ctx = make_context(user_id=users[0])
    embedded = await retrieve(services, settings, ctx, question, "x", touch=False)
    ahead = asyncio.ensure_future(services.embeddings.aembed_query(question))
    given = await retrieve(services, settings, ctx, question, "x", touch=False, vector=ahead)
    strip = [{k: v for k, v in m.items() if k != "recency"} for m in embedded.items]
    assert strip == [{k: v for k, v in m.items() if k != "recency"} for m in given.items]
    assert embedded.items and given.candidates == embedded.candidates


async def test_links_in_one_round_trip_are_the_two_lookups(users, services):
    user = users[1]
    history = await services.episodes.history(user)
    members = [("t0", m.id) for m in history[:3]]
    around = [("t1", history[-2].id), ("t0", history[1].id)]
    turns, neighbours = await services.episodes.linked(user, members, around)
    assert turns == await services.episodes.turns(user, members)
    assert neighbours == await services.episodes.neighbours(user, around)
    assert [k for k, _ in neighbours] == [around[0], around[0], around[1], around[1]]
    # another user's keys find nothing of this user's
    assert await services.episodes.linked(users[2], members, around) == ([], [])


def _searches_running() -> list[asyncio.Task]:
    """Pending tasks of the channels' own searches."""
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and getattr(t.get_coro(), "__qualname__", "").endswith("_rows")
    ]


@pytest.mark.parametrize("question", QUESTIONS)
async def test_an_embedding_still_running_gives_the_same_results(users, services, question):
    vector = await services.embeddings.aembed_query(question)
    for user in users:
        done = await search_all(services, user, vector, question, 3, 4)
        running = services.embeddings.aembed_query(question)
        found = await search_all(services, user, running, question, 3, 4)
        assert found == done


async def test_the_keyword_search_starts_before_the_embedding_ends(users, services):
    question = "Where do I keep bees?"
    seen: list[int] = []

    async def slow_embedding() -> list[float]:
        seen.append(len(_searches_running()))
        await asyncio.sleep(0.05)
        return await services.embeddings.aembed_query(question)

    found = await search_all(services, users[0], slow_embedding(), question, 3, 4)
    assert seen == [1]  # the keyword search was on its way while the query was embedded
    assert keyword(found) == await services.episodes.keyword_search(users[0], question, 4)


async def test_an_embedding_error_is_raised_as_is_and_leaves_no_search_running(users, services):
    async def failing_embedding() -> list[float]:
        await asyncio.sleep(0)
        raise ValueError("the embedding model failed")

    with pytest.raises(ValueError, match="embedding model failed"):
        await search_all(services, users[0], failing_embedding(), "bees", 3, 4)
    assert _searches_running() == []


@pytest.mark.parametrize("question", QUESTIONS)
async def test_the_searches_bring_the_links_of_what_they_find(users, services, question):
    vector = await services.embeddings.aembed_query(question)
    for user in users:
        found = await search_all(services, user, vector, question, 3, 4, around=2)
        plain = await search_all(services, user, vector, question, 3, 4)
        assert (found.memories, dense(found), keyword(found)) == (
            plain.memories,
            dense(plain),
            keyword(plain),
        )
        assert plain.neighbours == {} and plain.members == found.members
        members = summary_turns(found.memories)
        assert members and found.members == {
            (h.thread_id, h.message_id): h for h in await services.episodes.turns(user, members)
        }
        best = [(h.thread_id, h.message_id) for h in dense(found)[:2] + keyword(found)[:2]]
        assert set(found.neighbours) == set(best)
        for key, near in found.neighbours.items():
            alone = await services.episodes.neighbours(user, [key], REACH)
            assert [(key, h) for h in near] == alone
        assert all(h.thread_id.startswith("t") for near in found.neighbours.values() for h in near)


@pytest.mark.parametrize("prefetch", [20, 1, 0])
async def test_recall_fetches_only_the_links_the_searches_did_not_bring(
    settings, users, services, make_context, monkeypatch, prefetch
):
    ctx = make_context(user_id=users[0])
    expected = [await retrieve(services, settings, ctx, q, "x", touch=False) for q in QUESTIONS]
    calls: list[tuple[list, list]] = []
    linked = services.episodes.linked

    async def counted(user_id, members, around, reach=1):
        calls.append((members, around))
        return await linked(user_id, members, around, reach)

    monkeypatch.setattr(retrieval, "NEIGHBOUR_PREFETCH", prefetch)
    monkeypatch.setattr(services.episodes, "linked", counted)
    got = [await retrieve(services, settings, ctx, q, "x", touch=False) for q in QUESTIONS]
    strip = [[{k: v for k, v in m.items() if k != "recency"} for m in r.items] for r in got]
    assert strip == [
        [{k: v for k, v in m.items() if k != "recency"} for m in r.items] for r in expected
    ]
    if prefetch == 20:  # a few turns each: every best turn was among the searches' best
        assert calls == []
    else:  # only neighbours are fetched: the summaries' turns came with the memory search
        assert calls and all(members == [] and around for members, around in calls)


class NearestTurnsAgain:
    """A channel of the test's own: the dense turn search again, under another name."""

    name = ranking = "nearest_again"
    rank_field, score_field, floor, needs_vector = "dense_rank", "similarity", True, True

    def statements(self, services, search):
        return services.episodes.dense_statements(search.user_id, search.vector, search.depth)

    def read(self, rows, search):
        return CHANNELS[1].read(rows, search)


async def test_a_channel_added_to_the_list_is_searched_beside_the_others(users, services):
    question = QUESTIONS[0]
    vector = await services.embeddings.aembed_query(question)
    settings = Settings().override(recall_k=3, speaker_turns=0)
    ctx = Context(user_id=users[0])
    channels = (*CHANNELS, NearestTurnsAgain())
    found = await search_channels(
        services, Search(settings, ctx.user_id, question, 4), vector, channels
    )
    assert found.ranked("nearest_again") == dense(found)
    assert dense(found) == await services.episodes.dense_search(users[0], vector, 4)
