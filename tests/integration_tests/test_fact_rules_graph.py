"""Rule-based fact extraction through the compiled graph (``Context.fact_rules``)."""

from __future__ import annotations

import json
import uuid

import pytest

from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import default_handler
from tests.conftest import say


def _mistaken_extractor(messages) -> str:  # noqa: ANN001
    """A small model's answer: the right value under the wrong key."""
    text = "\n".join(str(m.content) for m in messages)
    if text.startswith("Extract durable facts"):
        return json.dumps({"facts": [{"key": "city", "value": "Zhang San", "importance": 0.9}]})
    return default_handler(messages)


async def _introduce(agent, ctx) -> None:
    thread = f"t-{uuid.uuid4().hex[:8]}"
    await say(agent, ctx, thread, "Hi, my name is Zhang San and I live in Berlin.")
    await say(agent, ctx, thread, "For programming I prefer Go over Java.")
    await say(agent, ctx, thread, "What is a haiku?")
    await say(agent, ctx, thread, "How do tides work?")


async def test_rules_fix_a_small_models_mis_assigned_fact(
    graph_for, make_context, services, fake_model
):
    fake_model.handler = _mistaken_extractor
    settings = Settings().override(window_size=2, summary_batch=2, fact_rules="on")
    ctx = make_context()
    agent = graph_for(settings)
    await _introduce(agent, ctx)
    profile = await services.profile.get(ctx.user_id)
    assert {k: v["value"] for k, v in profile.items()} == {
        "name": "Zhang San",
        "city": "Berlin",
        "preferred_language": "Go",
    }
    assert all(v["source_ids"] for v in profile.values())  # provenance: the summary


async def test_without_rules_the_model_alone_decides(graph_for, make_context, services, fake_model):
    fake_model.handler = _mistaken_extractor
    settings = Settings().override(window_size=2, summary_batch=2, fact_rules="off")
    ctx = make_context()
    agent = graph_for(settings)
    await _introduce(agent, ctx)
    profile = await services.profile.get(ctx.user_id)
    assert {k: v["value"] for k, v in profile.items()} == {"city": "Zhang San"}


async def _lyon_then_porto(agent, ctx) -> None:
    thread = f"t-{uuid.uuid4().hex[:8]}"
    await say(agent, ctx, thread, "Hi, I live in Lyon.")
    await say(agent, ctx, thread, "What is a haiku?")
    await say(agent, ctx, thread, "Actually, I moved from Lyon to Porto last month.")
    await say(agent, ctx, thread, "How do tides work?")
    await say(agent, ctx, thread, "Tell me about tide pools.")


async def _assert_moved(services, ctx) -> None:
    profile = await services.profile.get(ctx.user_id)
    assert profile["city"]["value"] == "Porto"
    (lyon,) = await services.profile.history(ctx.user_id, "city")
    assert (lyon["value"], lyon["reason"], lyon["replaced_by"]) == ("Lyon", "updated", "Porto")
    assert lyon["valid_to"] == profile["city"]["valid_from"]


async def test_a_move_replaces_the_city_and_keeps_the_old_one_in_history(
    graph_for, make_context, services, fake_model
):
    fake_model.handler = _mistaken_extractor  # the model proposes nonsense for the city
    settings = Settings().override(window_size=2, summary_batch=2, fact_rules="on")
    ctx = make_context()
    agent = graph_for(settings)
    await _lyon_then_porto(agent, ctx)
    await _assert_moved(services, ctx)


@pytest.mark.local_model
@pytest.mark.slow
async def test_a_move_replaces_the_city_with_the_local_model(graph_for, make_context, services):
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context(model="local:smollm2")
    agent = graph_for(settings)
    await _lyon_then_porto(agent, ctx)
    await _assert_moved(services, ctx)
