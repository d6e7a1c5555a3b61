"""The working window bounded in tokens, through the compiled graph on real Redis/Postgres.

An assistant's replies are long: a window of 20 messages alone can cost thousands of
tokens. The window keeps to its share of the memory budget (the newest two turns always
stay), what it drops goes to the durable queue once, and recall fills only what the
window leaves of the budget.
"""

from __future__ import annotations

import uuid
from collections import Counter

from memory_graph_agent.prompting.budgets import count_tokens
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import REPLY, ScriptedChatModel
from tests.conftest import say

REPLY_TEXT = "Here is a long answer about the harbour inventory, cranes and ropes. " * 25


def _long_replies() -> ScriptedChatModel:
    return ScriptedChatModel(handlers={REPLY: lambda messages: REPLY_TEXT})


async def _window(services, ctx, thread):
    return await services.window.window(ctx.user_id, thread)


async def test_the_window_keeps_to_its_token_share_and_loses_nothing(
    make_context, graph_for, services
):
    settings = Settings().override(memory_token_budget=1800, window_token_share=0.5)
    ctx = make_context(model_obj=_long_replies())
    agent = graph_for(settings)
    cap = int(1800 * settings.window.token_share)  # above what the newest two turns cost
    thread = f"t-{uuid.uuid4().hex[:8]}"
    said: list[str] = []
    for i in range(8):
        state = await say(agent, ctx, thread, f"Turn {i}: tell me about the harbour inventory.")
        said += [m.id for m in state["messages"][-2:]]
        window = await _window(services, ctx, thread)
        humans = sum(m.role == "human" for m in window)
        assert humans >= 2 or len(said) < 4  # the newest two turns always stay
        assert count_tokens(window) <= cap or humans <= 2
        assert [m.id for m in window] == said[-len(window) :]  # the newest, in order
        assert [m.id for m in state["messages"]] == [m.id for m in window]  # the prompt's
    assert len(window) < 20  # the count alone would have kept all 16 messages
    # every message that left the window was summarized exactly once, none is lost
    left = said[: len(said) - len(window)]
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    counts = Counter(sid for s in summaries for sid in s.source_ids)
    pending = [m.id for _, m in await services.window.pending(ctx.user_id, thread)]
    assert sorted(set(counts) | set(pending)) == sorted(left)
    assert max(counts.values()) == 1 and not set(counts) & set(pending)


async def test_recall_fills_only_what_the_window_leaves_of_the_budget(
    make_context, graph_for, services
):
    settings = Settings().override(memory_token_budget=1800, summary_batch=2)
    ctx = make_context(model_obj=_long_replies())
    agent = graph_for(settings)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    for i in range(8):
        await say(agent, ctx, thread, f"Turn {i}: the harbour inventory lists crane {i}.")
    state = await say(agent, ctx, thread, "What did the harbour inventory list?")
    window = state["messages"][:-2]  # what the prompt showed before this turn's question
    recalled = state["recalled"]
    assert recalled, "the evicted turns are recalled"
    shown = count_tokens(window) + sum(item["tokens"] for item in recalled)
    assert shown <= 1800 and count_tokens(window) > 400
