"""Recall that ranks like a memory, through the compiled graph: every recalled item shows
its score parts, recency and importance reorder equally relevant memories, and the three
recall modes ('auto', 'tool', 'flat') respect the same token budget."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime

from memory_graph_agent.cli.main import main
from memory_graph_agent.settings import RecallWeights, Settings
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.testing import ScriptedChatModel, block
from tests.conftest import say

PARTS = ("similarity", "keyword_rank", "relevance", "recency", "importance", "score")
SISTER = "The user's sister Anna is a marine biologist in Oslo."


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def scoring(recency: float, importance: float, **more: float) -> RecallWeights:
    """The memory score's weights (relevance 1), and ``more`` of the recall weights."""
    return RecallWeights(
        weight_relevance=1.0, weight_recency=recency, weight_importance=importance, **more
    )


async def _remember(services, user_id: str, text: str, importance: float, **extra) -> Memory:
    memory = Memory(
        user_id=user_id,
        kind="summary",
        text=text,
        importance=importance,
        source_ids=[f"src-{uuid.uuid4().hex[:8]}"],
        **extra,
    )
    await services.memories.add(memory)
    return memory


class NoToolsModel(ScriptedChatModel):
    """A chat model that cannot bind tools (like the offline SmolLM2)."""

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN201, D102
        raise NotImplementedError("no tool calling")


async def test_recalled_items_carry_their_score_parts(settings, agent, make_context, services):
    ctx = make_context()
    await _remember(services, ctx.user_id, SISTER, 0.8)
    await _remember(services, ctx.user_id, "The user bakes sourdough bread on Sundays.", 0.3)
    state = await say(agent, ctx, _thread(), "What does my sister do?")
    recalled = state["recalled"]
    assert recalled and recalled[0]["text"] == SISTER
    for item in recalled:
        assert all(part in item for part in PARTS), item
        assert 0.0 <= item["relevance"] <= 1.0 and 0.0 <= item["recency"] <= 1.0
        assert 0.0 <= item["importance"] <= 1.0 and 0.0 <= item["score"] <= 1.0
    top = recalled[0]
    assert top["relevance"] == 1.0 and top["importance"] == 0.8
    assert top["recency"] > 0.99  # created a moment ago
    w = settings.recall.weights
    weights = (w.weight_relevance, w.weight_recency, w.weight_importance)
    expected = (weights[0] * 1.0 + weights[1] * top["recency"] + weights[2] * 0.8) / sum(weights)
    assert abs(top["score"] - expected) < 1e-4
    # accessed now: the next recall counts recency from this access
    (stored,) = [m for m in await services.memories.list(ctx.user_id) if m.text == SISTER]
    assert stored.last_accessed_at is not None and stored.access_count == 1


async def test_importance_and_recency_order_equally_relevant_memories(
    graph_for, make_context, services, fake_model
):
    ctx = make_context()
    old_important = await _remember(
        services, ctx.user_id, SISTER, 0.9, created_at=datetime(2023, 5, 1, tzinfo=UTC)
    )
    new_trivial = await _remember(services, ctx.user_id, SISTER, 0.2)
    question = "What does my sister do?"

    settings = Settings().override(**scoring(recency=1.0, importance=0.0).model_dump())
    by_recency = make_context()
    recalled = (await say(graph_for(settings), by_recency, _thread(), question))["recalled"]
    first, second = recalled[:2]
    assert first["relevance"] == second["relevance"] == 1.0  # same text, same rank
    assert [first["id"], second["id"]] == [new_trivial.id, old_important.id]
    assert first["recency"] > 0.99 and second["recency"] < 0.01  # old_important: 2023

    # both were just accessed (recency ~1 for both): importance decides
    settings_by_importance = Settings().override(
        **scoring(recency=0.0, importance=1.0).model_dump()
    )
    by_importance = make_context()
    recalled = (await say(graph_for(settings_by_importance), by_importance, _thread(), question))[
        "recalled"
    ]
    assert [m["id"] for m in recalled[:2]] == [old_important.id, new_trivial.id]
    assert recalled[0]["score"] > recalled[1]["score"]
    memories_block = block(fake_model.system_prompts()[-1], "memories")
    assert memories_block.count(SISTER) == 2


async def test_importance_outranks_a_slightly_better_match(graph_for, make_context, services):
    ctx = make_context()
    closer = await _remember(services, ctx.user_id, SISTER, 0.1)
    important = await _remember(
        services, ctx.user_id, "Anna, the user's sister, works as a marine biologist.", 1.0
    )
    question = "Is my sister Anna a marine biologist in Oslo?"
    # the usual RRF constant 60 makes rank 2 a close second (61/62); the default 5
    # spaces ranks further apart (6/7), which importance 0.5 still overturns
    settings = Settings().override(
        **scoring(recency=0.0, importance=0.0, recall_rrf_k=60).model_dump()
    )
    plain = make_context()
    recalled = (await say(graph_for(settings), plain, _thread(), question))["recalled"]
    assert [m["id"] for m in recalled[:2]] == [closer.id, important.id]
    assert recalled[1]["relevance"] > 0.95  # a close second
    for k in (60, 5):
        settings_weighted = Settings().override(
            **scoring(recency=0.0, importance=0.5, recall_rrf_k=k).model_dump()
        )
        weighted = make_context()
        recalled = (await say(graph_for(settings_weighted), weighted, _thread(), question))[
            "recalled"
        ]
        assert [m["id"] for m in recalled[:2]] == [important.id, closer.id]


async def test_flat_mode_injects_the_hottest_memories_without_searching(
    graph_for, make_context, services, fake_model, monkeypatch
):
    ctx = make_context()
    texts = {
        0.9: "The user is allergic to peanuts.",
        0.7: "The user's daughter is called Mia.",
        0.4: "The user once visited Lisbon.",
        0.1: "The user thinks grey is a calm colour.",
    }
    for importance, text in texts.items():
        await _remember(services, ctx.user_id, text, importance)
    await _remember(services, ctx.user_id, "The user lives in Rome.", 1.0, status="superseded")
    calls: list[str] = []

    def refuse(name):
        async def call(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"flat mode must not call {name}")

        return call

    monkeypatch.setattr(type(services.embeddings), "aembed_query", refuse("aembed_query"))
    monkeypatch.setattr(services.memories, "search", refuse("memories.search"))
    monkeypatch.setattr(services.episodes, "dense_search", refuse("dense_search"))
    monkeypatch.setattr(services.episodes, "keyword_search", refuse("keyword_search"))

    wide = make_context(recall_mode="flat")
    state = await say(graph_for(), wide, _thread(), "Tell me something nice.")
    assert [m["text"] for m in state["recalled"]] == [texts[i] for i in (0.9, 0.7, 0.4, 0.1)]
    assert all(m["relevance"] is None and m["importance"] > 0 for m in state["recalled"])
    # the budget of two lines keeps the two most important
    cost = state["recalled"][0]["tokens"] + state["recalled"][1]["tokens"]
    settings = Settings().override(memory_token_budget=cost)
    tight = make_context(recall_mode="flat")
    agent = graph_for(settings)
    state = await say(agent, tight, _thread(), "Tell me something nice.")
    assert [m["text"] for m in state["recalled"]] == [texts[0.9], texts[0.7]]
    assert sum(m["tokens"] for m in state["recalled"]) <= cost
    memories_block = block(fake_model.system_prompts()[-1], "memories")
    lines = memories_block.splitlines()
    assert [ln.startswith("- [summary ") for ln in lines] == [True, True]
    assert [ln.split("] ", 1)[1] for ln in lines] == [texts[0.9], texts[0.7]]
    assert "Rome" not in json.dumps(state["recalled"])  # superseded: not active
    assert [e["kind"] for e in state["memory_events"] if e["node"] == "recall"] == ["flat"]
    # no search; the embedding each run starts before it knows its mode (`graph.prefetch`)
    # failed, and recall never awaited it: the turns went on
    assert [c for c in calls if c != "aembed_query"] == []


async def test_tool_mode_does_not_search_and_falls_back_without_tool_calling(
    agent, make_context, services
):
    ctx = make_context(recall_mode="tool")
    await _remember(services, ctx.user_id, SISTER, 0.8)
    state = await say(agent, ctx, _thread(), "What does my sister do?")
    assert state["recalled"] == []  # the model searches with search_memory instead
    assert [e["kind"] for e in state["memory_events"] if e["node"] == "recall"] == ["tool_mode"]

    no_tools = make_context(recall_mode="tool", model_obj=NoToolsModel())
    state = await say(agent, no_tools, _thread(), "What does my sister do?")
    found = [m["text"] for m in state["recalled"] if m.get("via") != "latest conversation"]
    assert found == [SISTER]  # the rest of the budget: the question asked in tool mode
    kinds = [e["kind"] for e in state["memory_events"] if e["node"] == "recall"]
    assert kinds == ["tool_fallback", "auto"]


async def test_every_mode_respects_the_token_budget(graph_for, agent, make_context, services):
    ctx = make_context()
    for n in range(12):
        await _remember(
            services, ctx.user_id, f"The user's sister Anna told story number {n}.", n / 12
        )
    question = "What stories did my sister Anna tell?"
    full = (await say(agent, ctx, _thread(), question))["recalled"]
    budget = sum(m["tokens"] for m in full) // 2
    for mode, model in (("auto", None), ("flat", None), ("tool", NoToolsModel())):
        extra = {"model_obj": model} if model else {}
        settings = Settings().override(memory_token_budget=budget)
        tight = make_context(recall_mode=mode, **extra)
        kept = (await say(graph_for(settings), tight, _thread(), question))["recalled"]
        assert kept, mode
        assert sum(m["tokens"] for m in kept) <= budget, mode
    settings_zero = Settings().override(memory_token_budget=0)
    zero = make_context(recall_mode="flat")
    assert (await say(graph_for(settings_zero), zero, _thread(), question))["recalled"] == []


async def test_memory_show_query_prints_the_score_parts(agent, make_context, services, capsys):
    ctx = make_context()
    await _remember(services, ctx.user_id, SISTER, 0.8)
    await say(agent, ctx, _thread(), "Tell me about my sister.")
    (before,) = [m for m in await services.memories.list(ctx.user_id) if m.text == SISTER]
    query = "What does my sister do?"
    argv = ["memory", "show", "--user", ctx.user_id, "--query", query]
    assert await asyncio.to_thread(main, [*argv, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["query"] == query and shown["candidates"] >= 1
    (item,) = [m for m in shown["items"] if m["text"] == SISTER]
    assert all(part in item for part in PARTS)
    assert item["importance"] == 0.8 and item["relevance"] == 1.0
    # read-only: showing does not count as an access
    (stored,) = [m for m in await services.memories.list(ctx.user_id) if m.text == SISTER]
    assert stored.access_count == before.access_count == 1  # the turn's recall, not the show

    assert await asyncio.to_thread(main, argv) == 0
    table = capsys.readouterr().out
    for header in ("similarity", "relevance", "recency", "importance", "score"):
        assert header in table
    assert "marine biologist" in table


async def test_hot_orders_by_importance_then_last_access(services, user_id):
    old = datetime(2023, 5, 1, tzinfo=UTC)
    a = await _remember(services, user_id, "Old and never recalled.", 0.6, created_at=old)
    b = await _remember(services, user_id, "Old but recalled just now.", 0.6, created_at=old)
    c = await _remember(services, user_id, "New and minor.", 0.2)
    top = await _remember(services, user_id, "Most important.", 0.95, created_at=old)
    await services.memories.touch(user_id, [b.id])
    hot = await services.memories.hot(user_id, 10)
    assert [m.id for m in hot] == [top.id, b.id, a.id, c.id]
    assert [m.id for m in await services.memories.hot(user_id, 2)] == [top.id, b.id]
    # a pinned memory (the user asked to always remember it) is hottest of all
    assert await services.memories.set_pinned(user_id, c.id, True, None)
    assert [m.id for m in await services.memories.hot(user_id, 2)] == [c.id, top.id]
