"""Rule-based fact extraction through the compiled graph (``Context.fact_rules``)."""

from __future__ import annotations

import json
import uuid

from tests.conftest import say
from tests.fakes import default_handler


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
    agent, make_context, services, fake_model
):
    fake_model.handler = _mistaken_extractor
    ctx = make_context(window_size=2, summary_batch=2, fact_rules="on")
    await _introduce(agent, ctx)
    profile = await services.profile.get(ctx.user_id)
    assert {k: v["value"] for k, v in profile.items()} == {
        "name": "Zhang San",
        "city": "Berlin",
        "preferred_language": "Go",
    }
    assert all(v["source_ids"] for v in profile.values())  # provenance: the summary


async def test_without_rules_the_model_alone_decides(agent, make_context, services, fake_model):
    fake_model.handler = _mistaken_extractor
    ctx = make_context(window_size=2, summary_batch=2, fact_rules="off")
    await _introduce(agent, ctx)
    profile = await services.profile.get(ctx.user_id)
    assert {k: v["value"] for k, v in profile.items()} == {"city": "Zhang San"}
