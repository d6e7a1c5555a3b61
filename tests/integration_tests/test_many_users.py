"""A user's recall returns k items whenever the user has k memories, however many other
users share the vector tables.

1,000 users get ``K`` summaries and ``K`` indexed raw turns each, inserted in bulk by SQL
with synthetic vectors that all lie close to the test question's embedding: every user's
items are about equally near, so an HNSW scan filtered by user sees mostly other users'
rows. pgvector's iterative scans (``hnsw.iterative_scan = relaxed_order``) keep scanning
until the user's k rows are found; without them the same plan returns fewer.
"""

from __future__ import annotations

import uuid

import pytest

from graph.context import Context
from memory_graph_agent.recall.channels import CHANNELS
from memory_graph_agent.recall.channels.base import Search, search_channels
from memory_graph_agent.settings import Settings
from tests.conftest import say

USERS = 1000
K = 5
SAMPLE = 40
QUESTION = "What do you remember about me?"
NOISE = 0.02
"""Per-component noise around the question's direction (MiniLM components are ~0.05)."""


async def _insert_crowd(services, users: list[str], direction: list[float]) -> None:
    """``K`` summaries and ``K`` indexed turns per user, vectors = direction + noise."""
    dim = len(direction)
    vector = (
        "(SELECT array_agg((CAST(:q AS float8[]))[d] "
        f"+ {NOISE} * sin(u.n * 12.9898 + j * 78.233 + d * 37.719) ORDER BY d) "
        f"FROM generate_series(1, {dim}) d)::halfvec"
    )
    crowd = (
        "FROM unnest(CAST(:users AS text[])) WITH ORDINALITY AS u(id, n), "
        f"generate_series(1, {K}) j"
    )
    params = {"users": users, "q": list(direction)}
    await services.db.run(
        (
            f'INSERT INTO "{services.memories.table}" (langchain_id, content, embedding, '
            "user_id, thread_id, kind, importance, created_at, access_count, source_ids) "
            f"SELECT gen_random_uuid(), 'crowd memory ' || j || ' of ' || u.id, {vector}, "
            "u.id, 'crowd', 'summary', 0.5, now(), 0, ARRAY['m' || j] "
            f"{crowd}",
            params,
        ),
        (
            "INSERT INTO episodes (user_id, thread_id, message_id, role, content, ts, "
            "summarized) SELECT u.id, 'crowd', 'e' || j, 'human', "
            f"'crowd turn ' || j || ' of ' || u.id, now(), true {crowd}",
            params,
        ),
        (
            f'INSERT INTO "{services.episodes.vector_table}" '
            "(user_id, thread_id, message_id, embedding, content, ts) "
            f"SELECT u.id, 'crowd', 'e' || j, {vector}, 'user: crowd turn ' || j, now() {crowd}",
            params,
        ),
        f'ANALYZE "{services.memories.table}"',
        f'ANALYZE "{services.episodes.vector_table}"',
    )


@pytest.fixture(scope="module")
async def crowd(services):
    """1,000 users sharing the tables; returns (their ids, the question's vector)."""
    direction = await services.embeddings.aembed_query(QUESTION)
    users = [f"crowd-{uuid.uuid4().hex[:6]}-{n}" for n in range(USERS)]
    await _insert_crowd(services, users, direction)  # ~10k HNSW inserts: 20-40 s
    return users, direction


async def test_each_user_gets_exactly_k_of_their_own_items(crowd, services):
    users, direction = crowd
    for user in users[:: USERS // SAMPLE]:
        memories = await services.memories.search(user, direction, K)
        assert len(memories) == K, user
        assert {m.user_id for m in memories} == {user}
        turns = await services.episodes.dense_search(user, direction, K)
        assert len(turns) == K, user
        assert {t.message_id for t in turns} == {f"e{j}" for j in range(1, K + 1)}
        history = {m.id for m in await services.episodes.history(user)}
        assert {t.message_id for t in turns} <= history


@pytest.mark.parametrize("table", ["memories", "episodes"])
async def test_without_iterative_scans_the_crowd_hides_a_users_rows(crowd, services, table):
    """The same HNSW plan with iterative scans off misses rows: the crowd is real."""
    users, direction = crowd
    name = services.memories.table if table == "memories" else services.episodes.vector_table
    query = (
        f'SELECT user_id FROM "{name}" WHERE user_id = :user_id '
        "ORDER BY embedding <=> CAST(:q AS halfvec) LIMIT :k"
    )
    vector = "[" + ",".join(f"{x:.7g}" for x in direction) + "]"
    counts = {}
    for mode in ("off", "relaxed_order"):
        counts[mode] = []
        for user in users[:: USERS // 10]:
            rows = await services.db.run(
                "SET LOCAL enable_sort = off",  # the btree on user_id would need a sort
                "SET LOCAL hnsw.ef_search = 100",
                f"SET LOCAL hnsw.iterative_scan = {mode}",
                (query, {"user_id": user, "q": vector, "k": K}),
            )
            counts[mode].append(len(rows))
    assert min(counts["off"]) < K  # filtered HNSW without iterative scans comes up short
    assert counts["relaxed_order"] == [K] * len(counts["relaxed_order"])


async def test_recall_through_the_graph_gets_k_items_among_a_thousand_users(
    crowd, graph_for, make_context, services
):
    users, direction = crowd
    settings = Settings().override(recall_k=K, min_similarity=0.0, memory_token_budget=10_000)
    ctx = make_context()
    agent = graph_for(settings)
    await _insert_crowd(services, [ctx.user_id], direction)
    state = await say(agent, ctx, f"t-{uuid.uuid4().hex[:8]}", QUESTION)
    recalled = state["recalled"]
    summaries = [m for m in recalled if m["kind"] == "summary"]
    episodes = [m for m in recalled if m["kind"] == "episode"]
    assert len(summaries) == K and len(episodes) == K
    assert all(m["text"].endswith(f"of {ctx.user_id}") for m in summaries)
    assert sorted(m["source_ids"][0] for m in episodes) == [f"e{j}" for j in range(1, K + 1)]
    assert all(m["thread_id"] == "crowd" for m in recalled)
    own = {m.id for m in await services.memories.list(ctx.user_id)}
    assert {m["id"] for m in summaries} == own


async def test_recalls_one_round_trip_gets_exactly_k_of_the_users_own(crowd, services):
    """The channels' searches (what `retrieve` sends) find what each store's search finds."""
    users, direction = crowd
    for user in users[:: USERS // SAMPLE]:
        settings = Settings().override(recall_k=K, speaker_turns=0)
        ctx = Context(user_id=user)
        found = await search_channels(
            services, Search(settings, ctx.user_id, "crowd turn", K), direction, CHANNELS
        )
        dense, keyword = found.ranked("dense_turns"), found.ranked("keyword_turns")
        assert len(found.memories) == K and {m.user_id for m in found.memories} == {user}
        assert found.memories == await services.memories.search(user, direction, K)
        assert dense == await services.episodes.dense_search(user, direction, K)
        assert keyword == await services.episodes.keyword_search(user, "crowd turn", K)
        assert len(dense) == len(keyword) == K
        assert {t.message_id for t in dense} == {f"e{j}" for j in range(1, K + 1)}
        assert {t.content for t in keyword} == {f"user: crowd turn {j}" for j in range(1, 6)}
