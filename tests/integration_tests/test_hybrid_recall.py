"""Hybrid recall through the compiled graph: raw turns that left the window come back as
``episode`` memories, found densely or by keyword, fused with summaries by RRF, within the
token budget, never duplicating the window and never crossing users."""

from __future__ import annotations

import re
import uuid

from sqlalchemy.exc import OperationalError

from memory_graph_agent.prompting.rendering import render_memory, text_tokens
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.window import StoredMessage
from memory_graph_agent.testing import ScriptedChatModel, block, default_handler, prompt_text
from tests.conftest import kinds, say

FILLER = [
    "How long should I boil an egg?",
    "What is the capital of Australia?",
    "Give me a tip for tidying a desk.",
    "Which planet has the most moons?",
    "How do I keep basil alive?",
    "What is a good name for a goldfish?",
]


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _fact_then_filler(agent, ctx, thread: str, fact: str, filler: int = 3) -> str:
    """Say ``fact``, then enough filler turns for it to leave the window and be summarized;
    return the fact message's id."""
    state = await say(agent, ctx, thread, fact)
    fact_id = state["messages"][-2].id
    for text in FILLER[:filler]:
        state = await say(agent, ctx, thread, text)
    assert fact_id not in {m.id for m in state["messages"]}, "the fact must have left the window"
    return fact_id


def episodes_of(state: dict) -> list[dict]:
    return [m for m in state["recalled"] if m["kind"] == "episode"]


def paraphrasing(messages) -> str:
    """A summarizer that rewords (like a real model) instead of quoting the user."""
    reply = default_handler(messages)
    if prompt_text(messages).startswith("Summarize"):
        reply = re.sub(r"\bMy\b", "The user's", reply.removeprefix("The user said: "))
    return reply


async def test_an_evicted_turn_is_recalled_as_an_episode_with_provenance(
    graph_for, make_context, services
):
    model = ScriptedChatModel(handler=paraphrasing)
    settings = Settings().override(window_size=4, summary_batch=2)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()
    fact = "My favourite hiking trail is the Kungsleden in Lapland."
    fact_id = await _fact_then_filler(agent, ctx, thread, fact)
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    assert any(fact_id in s.source_ids for s in summaries), "the fact was summarized"

    state = await say(agent, ctx, thread, "Which hiking trail do I like best?")
    (item,) = [m for m in episodes_of(state) if m["source_ids"] == [fact_id]]
    assert item["text"] == f"user: {fact}"
    assert item["thread_id"] == thread
    assert item["similarity"] >= settings.recall.min_similarity and item["dense_rank"] >= 1
    assert item["keyword_rank"] is not None  # "hiking", "trail" also match as words
    assert item["rrf"] > 0 and item["tokens"] > 0
    # the summary built from the same turn (an LLM paraphrase here) is recalled too
    assert any(m["kind"] == "summary" and fact_id in m["source_ids"] for m in state["recalled"])
    # shown under its day's line, fenced in the memories block
    day = item["created_at"][:10]
    lines = block(model.system_prompts()[-1], "memories").splitlines()
    assert f"user: {fact}" in lines
    assert f"[{day}]" in lines[: lines.index(f"user: {fact}")]
    assert ("recall", "auto") in kinds(state)


async def test_a_turn_quoted_by_a_raw_summary_is_shown_once(graph_for, make_context, fake_model):
    settings = Settings().override(window_size=4, summary_batch=2, summary_mode="raw")
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    fact = "My favourite hiking trail is the Kungsleden in Lapland."
    fact_id = await _fact_then_filler(agent, ctx, thread, fact)
    state = await say(agent, ctx, thread, "Which hiking trail do I like best?")
    showing = [m for m in state["recalled"] if fact_id in m["source_ids"]]
    # the raw transcript only quotes its turns: they are shown one by one instead
    assert [m["kind"] for m in showing] == ["episode"]
    assert not any(m["kind"] == "summary" for m in state["recalled"])
    assert block(fake_model.system_prompts()[-1], "memories").count(fact) == 1


async def test_a_rare_token_is_recalled_through_the_keyword_channel(
    graph_for, make_context, services
):
    settings = Settings().override(window_size=4, summary_batch=2)
    ctx = make_context()
    thread = _thread()
    fact_id = await _fact_then_filler(
        graph_for(settings), ctx, thread, "Please note my replacement part number: XJ-9000."
    )
    query = "XJ-9000?"
    # dense alone does not find it: a cosine floor of 0.95 drops every dense-only hit
    settings_strict = Settings().override(window_size=4, summary_batch=2, min_similarity=0.95)
    strict = make_context()
    state = await say(graph_for(settings_strict), strict, thread, query)
    (item,) = [m for m in episodes_of(state) if m["source_ids"] == [fact_id]]
    assert item["keyword_rank"] == 1 and item["keyword_score"] > 0
    assert item["similarity"] is None or item["similarity"] < 0.95
    # nothing dense-only (turns linked to a keyword hit may join)
    assert all(m["keyword_rank"] is not None or m.get("via") for m in state["recalled"])
    hits = await services.episodes.keyword_search(ctx.user_id, query, 5)
    assert hits[0].message_id == fact_id


async def test_turns_in_the_window_are_not_repeated_in_memories(
    graph_for, make_context, fake_model, services
):
    settings = Settings().override(window_size=6, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    state = await say(agent, ctx, thread, "My cat is called Pixel and she is grey.")
    cat = state["messages"][-2]
    # index the turn while it is still in the window (as a backfill or a re-queued batch
    # could): recall must still not repeat what the prompt already shows
    indexed = await services.episodes.index(
        ctx.user_id, thread, [StoredMessage.from_message(cat)], services.embeddings
    )
    assert indexed == 1
    window_ids = {m.id for m in await services.window.window(ctx.user_id, thread)}
    assert cat.id in window_ids

    state = await say(agent, ctx, thread, "What is my cat called?")
    recalled_sources = {s for m in state["recalled"] for s in m["source_ids"]}
    assert not recalled_sources & window_ids
    memories_block = block(fake_model.system_prompts()[-1], "memories")
    assert "Pixel" not in memories_block
    # from another thread of the same user the turn is not in the window: recalled
    state = await say(agent, ctx, _thread(), "What is my cat called?")
    assert any(m["source_ids"] == [cat.id] for m in episodes_of(state))


def cost(items: list[dict]) -> int:
    """What ``items`` cost in the prompt: their lines, and each day line once."""
    days = {m["group"]: m["group_tokens"] for m in items if m.get("group")}
    return sum(m["tokens"] for m in items) + sum(days.values())


async def test_the_token_budget_bounds_the_fused_list(graph_for, make_context, services):
    # summary links on: the summaries' turns rank above them, so no taken summary shows a
    # later turn verbatim (the greedy check below does not model that skip)
    knobs = {"window_size": 4, "summary_batch": 2, "min_similarity": 0.0}
    knobs["summary_turn_weight"] = 0.3
    settings = Settings().override(**knobs)
    ctx = make_context(model_obj=ScriptedChatModel(handler=paraphrasing))
    thread = _thread()
    facts = [
        "My sister Anna is a marine biologist in Oslo.",
        "My brother Ben repairs old bicycles in Ghent.",
        "My sister Anna has two children and a dog.",
        "My brother Ben plays the trombone in a brass band.",
    ]
    for fact in facts:
        await say(graph_for(settings), ctx, thread, fact)
    for text in FILLER[:3]:
        await say(graph_for(settings), ctx, thread, text)
    question = "What do my sister and my brother do?"
    wide = (await say(graph_for(settings), ctx, _thread(), question))["recalled"]
    assert len(episodes_of({"recalled": wide})) >= 4 and len(wide) > 4
    # the scored order, everything fits (what widens an idle budget comes after, unscored)
    fused = sorted((m for m in wide if m["score"] is not None), key=lambda m: -m["score"])
    for m in wide:
        assert m["tokens"] == text_tokens(render_memory(m))

    budget = cost(fused) // 2
    settings_tight = Settings().override(**knobs, memory_token_budget=budget)
    tight = make_context()
    kept = (await say(graph_for(settings_tight), tight, _thread(), question))["recalled"]
    assert kept and cost(kept) <= budget
    # greedy in fused order: an item was left out only if it did not fit at its turn
    kept_ids = {m["id"] for m in kept}
    taken: list[dict] = []
    for m in fused:
        if m["id"] in kept_ids:
            taken.append(m)
        else:
            assert cost([*taken, m]) > budget, f"{m['id']} fits but was skipped"
    # the prompt lists tiers in order: summaries before episodes
    kinds = [m["kind"] for m in kept]
    assert kinds == sorted(kinds, key=["reflection", "summary", "episode"].index)
    settings_zero = Settings().override(**knobs, memory_token_budget=0)
    zero = make_context()
    assert (await say(graph_for(settings_zero), zero, _thread(), question))["recalled"] == []


async def test_another_users_episodes_are_never_returned(graph_for, make_context, services):
    secret = "My locker code at the gym is QZ-7781, do not share it."
    settings = Settings().override(window_size=4, summary_batch=2)
    alice = make_context(user_id=f"u-{uuid.uuid4().hex[:10]}")
    alice_fact = await _fact_then_filler(graph_for(settings), alice, _thread(), secret)
    settings_bob = Settings().override(window_size=4, summary_batch=2)
    bob = make_context(user_id=f"u-{uuid.uuid4().hex[:10]}")
    await _fact_then_filler(
        graph_for(settings_bob), bob, _thread(), "My locker at the gym is number 12."
    )

    question = "What is my gym locker code QZ-7781?"
    state = await say(graph_for(settings_bob), bob, _thread(), question)
    assert episodes_of(state), "Bob's own locker turn is recalled"
    bob_ids = {m.id for m in await services.episodes.history(bob.user_id)}
    assert all(set(m["source_ids"]) <= bob_ids for m in episodes_of(state))
    assert not any("QZ-7781" in m["text"] for m in state["recalled"])
    # the stores themselves filter by user, whatever the query
    vector = await services.embeddings.aembed_query(secret)
    for hits in (
        await services.episodes.keyword_search(bob.user_id, secret, 50),
        await services.episodes.dense_search(bob.user_id, vector, 50),
    ):
        assert hits and all(h.message_id in bob_ids for h in hits)
    alice_hits = await services.episodes.keyword_search(alice.user_id, "QZ-7781", 5)
    assert [h.message_id for h in alice_hits][:1] == [alice_fact]


async def test_postgres_down_recall_returns_nothing_and_says_so(
    graph_for, make_context, services, monkeypatch
):
    settings = Settings().override(window_size=4, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    await _fact_then_filler(agent, ctx, thread, "I keep bees on my balcony.")

    async def down(*args, **kwargs):
        raise OperationalError("SELECT", {}, ConnectionRefusedError("postgres is down"))

    monkeypatch.setattr(services.db, "pipeline", down)
    state = await say(agent, ctx, thread, "Where do I keep bees?")
    assert state["recalled"] == []
    assert ("recall", "unavailable") in kinds(state)


async def test_indexing_failure_keeps_the_summary_and_is_backfilled(
    graph_for, make_context, services, monkeypatch
):
    model = ScriptedChatModel(handler=paraphrasing)
    settings = Settings().override(window_size=4, summary_batch=2)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()

    async def broken(*args, **kwargs):
        raise RuntimeError("embedding service down")

    monkeypatch.setattr(services.episodes, "index_batch", broken)
    fact_id = await _fact_then_filler(
        agent, ctx, thread, "My instrument is the cello, I play it on Sundays."
    )
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    assert any(fact_id in s.source_ids for s in summaries), "the summary is stored anyway"
    assert not await services.episodes.keyword_search(ctx.user_id, "cello", 5)
    monkeypatch.undo()

    assert await services.episodes.backfill(services.embeddings, ctx.user_id) >= 2
    assert await services.episodes.backfill(services.embeddings, ctx.user_id) == 0
    state = await say(agent, ctx, thread, "Which instrument do I play?")
    assert any(m["source_ids"] == [fact_id] for m in episodes_of(state))


async def test_forgetting_episodes_removes_their_vectors(services, user_id):
    thread = _thread()
    msg = StoredMessage(id="m1", role="human", content="I was born in Tallinn.", ts="2024-01-02")
    await services.episodes.append(user_id, thread, [msg])
    assert await services.episodes.index(user_id, thread, [msg], services.embeddings) == 1
    await services.db.run(("DELETE FROM episodes WHERE user_id = :u", {"u": user_id}))
    assert await services.episodes.keyword_search(user_id, "Tallinn", 5) == []


def test_episode_text_and_query_terms():
    from datetime import UTC, datetime

    from memory_graph_agent.storage.episodes import embedding_text, episode_content, keyword_terms

    named = StoredMessage(id="x", role="human", content="hi", ts="2024-01-02", name="Caroline")
    assert episode_content(named) == "Caroline: hi"
    assert (
        episode_content(StoredMessage(id="y", role="ai", content="yo", ts="t")) == "assistant: yo"
    )
    assert episode_content(StoredMessage(id="z", role="human", content="a", ts="t")) == "user: a"
    ts = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert embedding_text("Caroline: hi", ts) == "[2023-05-08] Caroline: hi"
    assert len(embedding_text("Ann: " + "word " * 1000, ts).split()) <= 152
    assert keyword_terms("What's the XJ-9000? it's, it's O'Neil's!") == [
        "what",
        "s",
        "the",
        "xj",
        "9000",
        "it",
        "o",
        "neil",
    ]
    assert keyword_terms("'; DROP TABLE x; --") == ["drop", "table", "x"]
    assert keyword_terms("?!") == []
