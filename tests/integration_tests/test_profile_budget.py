"""The profile block of the prompt has a budget (issue 13, finding 12).

It used to be rendered in full into every prompt, outside any budget: a profile grown
by tools or extraction (hundreds of facts, long values) crowded out the conversation.
"""

from __future__ import annotations

import uuid

from memory_graph_agent.core.tokens import text_tokens
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.profile import Fact
from memory_graph_agent.testing import block
from tests.conftest import say

DEFAULT_BUDGET = 400  # Context.profile_token_budget


async def test_the_profile_block_keeps_to_its_budget_most_important_facts_first(
    settings, agent, make_context, services, fake_model
):
    ctx = make_context()
    facts = [Fact("name", "Zhang San", 0.95), Fact("city", "Berlin", 0.9)]
    facts += [Fact(f"hobby_{i}", f"collecting things number {i}", 0.5) for i in range(120)]
    facts += [Fact("life_story", "I was born in a small town and then " * 200, 0.6)]
    await services.profile.upsert(ctx.user_id, facts, settings.retention.ttl_days)
    state = await say(agent, ctx, f"t-{uuid.uuid4().hex[:8]}", "Who am I?")
    assert len(state["profile"]) == len(facts)  # all loaded; the prompt shows what fits

    profile = block(fake_model.system_prompts()[-1], "profile")
    assert text_tokens(profile) <= DEFAULT_BUDGET, text_tokens(profile)
    lines = profile.splitlines()
    assert lines[:2] == ["name: Zhang San", "city: Berlin"], "most important first"
    story = next(line for line in lines if line.startswith("life_story: "))
    assert text_tokens(story) <= 70, "one long value cannot take the whole budget"
    assert lines[-1].startswith("(") and "more facts not shown" in lines[-1]


async def test_a_smaller_profile_budget_is_honoured(graph_for, make_context, services, fake_model):
    settings = Settings().override(profile_token_budget=40)
    ctx = make_context()
    agent = graph_for(settings)
    facts = [Fact(f"fact_{i:02d}", f"value {i}", 0.5 + i / 100) for i in range(30)]
    await services.profile.upsert(ctx.user_id, facts, settings.retention.ttl_days)
    await say(agent, ctx, f"t-{uuid.uuid4().hex[:8]}", "Hello")
    profile = block(fake_model.system_prompts()[-1], "profile")
    assert text_tokens(profile) <= 40
    assert profile.splitlines()[0] == "fact_29: value 29"
