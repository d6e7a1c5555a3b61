"""Profile history, change notes, expiry and pins through the compiled graph."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

from memory_graph_agent.cli.main import main
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.window import parse_ts
from memory_graph_agent.testing import block
from tests.conftest import say


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _java_then_go(agent, ctx) -> dict[str, str]:
    """The user prefers Java, later Go; returns the ids of the two human messages."""
    thread = _thread()
    java = await say(agent, ctx, thread, "I prefer Java for backend work.")
    await say(agent, ctx, thread, "What is a monad?")
    go = await say(agent, ctx, thread, "I used to like Java, but now I prefer Go.")
    await say(agent, ctx, thread, "Tell me about tide pools.")  # consolidates the Go turn
    return {"java": java["messages"][-2].id, "go": go["messages"][-2].id, "thread": thread}


async def test_a_changed_preference_keeps_its_history_and_is_noted_next_turn(
    graph_for, make_context, services, fake_model
):
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    said = await _java_then_go(agent, ctx)

    profile = await services.profile.get(ctx.user_id)
    current = profile["preferred_language"]
    assert current["value"] == "Go"
    (java,) = await services.profile.history(ctx.user_id, "preferred_language")
    assert (java["value"], java["reason"], java["replaced_by"]) == ("Java", "updated", "Go")
    assert parse_ts(java["valid_from"]) < parse_ts(java["valid_to"])
    assert java["valid_to"] == current["valid_from"]
    # provenance: each value cites the summary it came from, which cites the user's turn
    memories = {m.id: m for m in await services.memories.list(ctx.user_id)}
    (java_source,) = java["source_ids"]
    (go_source,) = current["source_ids"]
    assert said["java"] in memories[java_source].source_ids
    assert said["go"] in memories[go_source].source_ids

    state = await say(agent, ctx, said["thread"], "Which language should I use?")
    day = java["valid_to"][:10]
    assert state["profile_changes"] == [
        {"key": "preferred_language", "old": "Java", "new": "Go", "at": java["valid_to"]}
    ]
    profile_block = block(fake_model.system_prompts()[-1], "profile")
    assert "preferred_language: Go" in profile_block
    assert f"changed: preferred_language Java → Go ({day})" in profile_block


async def test_change_notes_stop_after_change_note_days(
    graph_for, make_context, services, fake_model
):
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    said = await _java_then_go(graph_for(settings), ctx)
    # the same history seen by a later turn configured to note only today's changes,
    # after the change was dated back two days
    raw = await services.redis.lrange(services.profile.history_key(ctx.user_id), 0, -1)
    key = services.profile.history_key(ctx.user_id)
    for i, entry in enumerate(json.loads(r) for r in raw):
        entry["valid_to"] = (datetime.now(UTC) - timedelta(days=2)).isoformat()
        await services.redis.lset(key, i, json.dumps(entry))
    settings_late = Settings().override(window_size=2, summary_batch=2, change_note_days=1)
    late = make_context()
    state = await say(
        graph_for(settings_late), late, said["thread"], "Which language should I use?"
    )
    assert state["profile_changes"] == []
    assert "changed:" not in block(fake_model.system_prompts()[-1], "profile")


async def test_unimportant_facts_expire_from_the_prompt_while_pinned_ones_stay(
    graph_for, make_context, services, fake_model
):
    # below 0.9 a fact lives 0.0001 days (8.6 s); 0.9 and above never expires
    settings = Settings().override(
        window_size=2, summary_batch=2, ttl_policy="0.9:never,0.5:0.0001,0:0.0001"
    )
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    await say(agent, ctx, thread, "My name is Ada Byron, I live in Paris and I prefer Rust.")
    await say(agent, ctx, thread, "What is a haiku?")  # consolidates turn 1
    profile = await services.profile.get(ctx.user_id)
    assert {k: v["value"] for k, v in profile.items()} == {
        "name": "Ada Byron",
        "city": "Paris",
        "preferred_language": "Rust",
    }
    assert profile["name"]["expires_at"] is None
    expires = parse_ts(profile["preferred_language"]["expires_at"])
    assert expires - datetime.now(UTC) < timedelta(days=0.0001)
    assert await services.profile.set_pinned(ctx.user_id, "city", True, settings.retention.ttl_days)

    await asyncio.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.2)
    await say(agent, ctx, thread, "Recommend a weekend plan.")
    profile_block = block(fake_model.system_prompts()[-1], "profile")
    assert "name: Ada Byron" in profile_block and "city: Paris" in profile_block
    assert "Rust" not in profile_block
    (expired,) = await services.profile.history(ctx.user_id)
    assert (expired["key"], expired["value"], expired["reason"]) == (
        "preferred_language",
        "Rust",
        "expired",
    )


async def test_memory_show_prints_the_history_under_each_key(
    graph_for, make_context, services, capsys
):
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context()
    agent = graph_for(settings)
    await _java_then_go(agent, ctx)
    assert await asyncio.to_thread(main, ["memory", "show", "--user", ctx.user_id]) == 0
    out = capsys.readouterr().out
    table = out.split("summaries and reflections", 1)[0]
    current, _, below = table.partition("preferred_language")
    assert "Go" in below.splitlines()[0]  # the current value on the key's row
    assert "was Java" in below and "(updated)" in " ".join(below.split())  # then the past
    assert "Java" not in current

    assert await asyncio.to_thread(main, ["memory", "show", "--user", ctx.user_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["profile"]["preferred_language"]["value"] == "Go"
    assert [(h["key"], h["value"]) for h in shown["profile_history"]] == [
        ("preferred_language", "Java")
    ]
