"""Contextual turn vectors (`turn_context_weight`): a raw turn's stored vector also carries
its adjacent turns, so a short answer is found by the question it answers. Real Postgres,
real Redis, the real MiniLM; only the chat model is fake."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory_graph_agent.settings import RecallWeights, Settings
from memory_graph_agent.storage.episode_index import (
    contextual_vectors,
    embedding_text,
    episode_content,
)
from memory_graph_agent.storage.window import StoredMessage, parse_ts
from tests.conftest import say

DIALOGUE = [
    ("Caroline", "Did you manage to go surfing at Ocean Beach this summer?"),
    ("Melanie", "Yes, last Saturday, with my two kids!"),
    ("Caroline", "I have been painting sunsets for my art class."),
    ("Melanie", "I bake sourdough bread every Sunday morning."),
    ("Caroline", "My cat knocked a plant off the shelf again."),
    ("Melanie", "We are thinking about adopting a puppy."),
]
QUESTION = "When did Melanie go surfing at Ocean Beach?"
ANSWER = 1  # "Yes, last Saturday, ...": shares no word with the question but its speaker
HALF = 2.5e-4
"""How far a stored component may be from the computed one: ``halfvec`` rounds a unit
vector's components (all under 1) by at most 2.44e-4."""


def _dialogue() -> list[StoredMessage]:
    start = datetime(2023, 7, 1, 10, tzinfo=UTC)
    return [
        StoredMessage(f"m{i}", "human", text, (start + timedelta(minutes=i)).isoformat(), name=name)
        for i, (name, text) in enumerate(DIALOGUE)
    ]


async def _stored(services, user: str, thread: str) -> dict[str, np.ndarray]:
    rows = await services.db.run(
        (
            f'SELECT message_id, embedding::text AS e FROM "{services.episodes.vector_table}" '
            "WHERE user_id = :user_id AND thread_id = :thread_id",
            {"user_id": user, "thread_id": thread},
        ),
    )
    return {r["message_id"]: np.array(json.loads(r["e"])) for r in rows}


async def _own(services, messages: list[StoredMessage]) -> list[list[float]]:
    texts = [embedding_text(episode_content(m), parse_ts(m.ts)) for m in messages]
    return await services.embeddings.aembed_documents(texts)


async def _logged(services, user: str) -> tuple[str, list[StoredMessage]]:
    thread = f"t-{uuid.uuid4().hex[:8]}"
    messages = _dialogue()
    await services.episodes.append(user, thread, messages)
    return thread, messages


async def test_a_turn_vector_mixes_its_adjacent_turns_however_the_turns_were_batched(
    services, user_id
):
    whole, messages = await _logged(services, user_id)
    assert await services.episodes.index(user_id, whole, messages, services.embeddings, 0.25) == 6
    batched, _ = await _logged(services, user_id)
    for part in (messages[:2], messages[2:5], messages[5:]):  # as summaries index them
        await services.episodes.index(user_id, batched, part, services.embeddings, 0.25)

    own = await _own(services, messages)
    expected = contextual_vectors(own, None, None, 0.25)
    for stored in (
        await _stored(services, user_id, whole),
        await _stored(services, user_id, batched),
    ):
        for i, m in enumerate(messages):
            assert np.allclose(stored[m.id], expected[i], atol=HALF)
            assert np.isclose(np.linalg.norm(stored[m.id]), 1.0, atol=HALF)
    # the first turn has no turn before it: only the one after is mixed in
    assert np.allclose(expected[0], contextual_vectors(own[:2], None, None, 0.25)[0])
    assert not np.allclose(expected[ANSWER], own[ANSWER], atol=1e-3)


async def test_tool_calls_between_a_question_and_its_answer_are_no_turns(services, user_id):
    """An answer after a tool loop (AI messages with no text, tool results) still has the
    question as the turn before it, also when its batch starts with the answer."""
    thread = f"t-{uuid.uuid4().hex[:8]}"
    question, answer = _dialogue()[:2]
    answer = StoredMessage("m-answer", "ai", answer.content, answer.ts)
    loop = []
    for i in range(4):  # `max_tool_rounds` calls, each with its result
        loop.append(StoredMessage(f"call{i}", "ai", "", question.ts))
        loop.append(StoredMessage(f"result{i}", "tool", "42 km of coast", question.ts))
    await services.episodes.append(user_id, thread, [question, *loop, answer])
    await services.episodes.index(user_id, thread, [answer], services.embeddings, 0.25)
    stored = await _stored(services, user_id, thread)
    own = await _own(services, [question, answer])
    assert np.allclose(stored["m-answer"], contextual_vectors(own, None, None, 0.25)[1], atol=HALF)


async def test_backfill_gives_the_vectors_indexing_would_have(services, user_id):
    thread, messages = await _logged(services, user_id)
    await services.episodes.mark_summarized(user_id, thread, [m.id for m in messages])
    await services.episodes.index(user_id, thread, messages[2:4], services.embeddings, 0.25)
    # m0, m1, m4, m5 have no vector (a failed index step): backfill makes them
    assert await services.episodes.backfill(services.embeddings, user_id, context_weight=0.25) == 4
    stored = await _stored(services, user_id, thread)
    expected = contextual_vectors(await _own(services, messages), None, None, 0.25)
    for i, m in enumerate(messages):
        assert np.allclose(stored[m.id], expected[i], atol=HALF)


async def test_with_weight_zero_a_turn_keeps_its_own_vector(services, user_id):
    thread, messages = await _logged(services, user_id)
    await services.episodes.index(user_id, thread, messages[1:4], services.embeddings, 0.0)
    stored = await _stored(services, user_id, thread)
    own = await _own(services, messages[1:4])
    assert sorted(stored) == ["m1", "m2", "m3"]
    for i, m in enumerate(messages[1:4]):
        assert np.allclose(stored[m.id], own[i], atol=HALF)


async def test_the_answer_is_found_by_the_question_it_answers(services, user_id):
    vector = await services.embeddings.aembed_query(QUESTION)
    ranks = {}
    for weight in (0.0, 0.25):
        thread, messages = await _logged(services, f"{user_id}-{int(weight * 100)}")
        user = f"{user_id}-{int(weight * 100)}"
        await services.episodes.index(user, thread, messages, services.embeddings, weight)
        hits = await services.episodes.dense_search(user, vector, len(messages))
        order = [h.message_id for h in hits]
        ranks[weight] = (order.index("m1"), hits[order.index("m1")].similarity)
    # the answer moves towards the question it answers (0.40 -> 0.46 here), never down
    assert ranks[0.25][1] > ranks[0.0][1] + 0.03, ranks
    assert ranks[0.25][0] <= ranks[0.0][0], ranks


@pytest.mark.parametrize("weight", [0.0, 0.25])
async def test_turns_indexed_through_the_graph_use_the_contexts_weight(
    graph_for, make_context, services, weight
):
    weights = RecallWeights(turn_context_weight=weight)
    settings = Settings().override(window_size=4, summary_batch=2, **weights.model_dump())
    ctx = make_context()
    agent = graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    for _, text in DIALOGUE:
        await say(agent, ctx, thread, text)
    stored = await _stored(services, ctx.user_id, thread)
    log = [
        m for m in await services.episodes.history(ctx.user_id, thread) if m.role in ("human", "ai")
    ]
    assert len(stored) >= 4, "turns left the window and were indexed"
    expected = contextual_vectors(await _own(services, log), None, None, weight)
    for i, m in enumerate(log):
        if m.id in stored:  # the turns still in the window are not indexed yet
            assert np.allclose(stored[m.id], expected[i], atol=HALF), m.content
