"""Memory that evolves, through the compiled graph: consolidation decisions per summary
(created / merged / updated / strengthened / discarded), the decision log, reflections
due by summed importance that propose grounded profile facts."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.testing import ScriptedChatModel, block, default_handler, prompt_text
from tests.conftest import say

OLD = "The user said: I live in Lisbon and I love the old yellow trams."
NEW_TURN = "I live in Lisbon and I love the yellow trams."
NEW_SUMMARY = f"The user said: {NEW_TURN}"
MERGED = "The user lives in Lisbon and loves the old yellow trams."


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _seed(services, user_id: str, text: str = OLD, importance: float = 0.5) -> Memory:
    memory = Memory(
        user_id=user_id,
        kind="summary",
        text=text,
        importance=importance,
        source_ids=[f"seed-{uuid.uuid4().hex[:6]}"],
        thread_id="seed",
    )
    await services.memories.add(memory)
    return memory


def _deciding(action: str, target: str = "", merged: str | None = None, log: list | None = None):
    """A model whose consolidation answer is scripted; other prompts as the default."""

    def handler(messages):
        text = prompt_text(messages)
        if text.startswith("Compare a new memory"):
            if log is not None:
                log.append(text)
            return json.dumps(
                {"action": action, "target_id": target, "merged_text": merged, "reason": "test"}
            )
        return default_handler(messages)

    return ScriptedChatModel(handler=handler)


async def _two_turns(agent, ctx) -> dict:
    """Turn 1 leaves the window on turn 2 and becomes one summary (``NEW_SUMMARY``)."""
    thread = _thread()
    await say(agent, ctx, thread, NEW_TURN)
    return await say(agent, ctx, thread, "What is a haiku?")


async def _by_id(services, user_id: str) -> dict[str, Memory]:
    return {m.id: m for m in await services.memories.list(user_id)}


@pytest.mark.parametrize("action", ["created", "merged", "updated", "strengthened", "discarded"])
async def test_a_near_duplicate_summary_gets_the_model_decision(
    graph_for, make_context, services, user_id, action
):
    old = await _seed(services, user_id)
    prompts: list[str] = []
    model = _deciding(
        action,
        target=old.id[:8],  # the prompt shows 8-character ids
        merged=MERGED if action == "merged" else None,
        log=prompts,
    )
    # no recall into the prompt: access counts then only move by consolidation
    settings = Settings().override(window_size=2, summary_batch=2, memory_token_budget=0)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    state = await _two_turns(agent, ctx)

    # the model compared the new summary with the stored memory
    (prompt,) = prompts
    assert NEW_TURN in block(prompt, "new") and OLD in block(prompt, "existing")
    by_id = await _by_id(services, user_id)
    (new,) = [m for m in by_id.values() if m.kind == "summary" and m.id != old.id]
    target = by_id[old.id]
    expected_state = {
        "created": ("active", None, "active", None),
        "merged": ("active", None, "superseded", new.id),
        "updated": ("active", None, "superseded", new.id),
        "strengthened": ("superseded", old.id, "active", None),
        "discarded": ("superseded", old.id, "active", None),
    }[action]
    assert (new.status, new.superseded_by, target.status, target.superseded_by) == expected_state
    assert len(new.source_ids) == 2  # the summary row is always stored, with provenance
    assert new.text == (MERGED if action == "merged" else NEW_SUMMARY)
    if action == "strengthened":
        assert target.importance == pytest.approx(0.6) and target.access_count == 1
        assert target.last_accessed_at is not None
    else:
        assert target.importance == 0.5 and target.access_count == 0
    # importance decides the expiry of the new memory (0.5 -> 30 days by default)
    assert new.expires_at is not None
    assert 29 <= (new.expires_at - new.created_at).total_seconds() / 86400 <= 31

    (decision,) = await services.decisions.list(user_id, action=action, item_kind="summary")
    assert decision.item_id == new.id and decision.thread_id == new.thread_id
    assert decision.target_id == (None if action == "created" else old.id)
    assert [d["action"] for d in state["memory_decisions"] if d["item_id"] == new.id] == [action]

    # only active memories are recalled
    vector = await services.embeddings.aembed_query(NEW_TURN)
    recalled = {m.id for m in await services.memories.search(user_id, vector, k=10)}
    assert recalled == {m.id for m in by_id.values() if m.status == "active"}


async def test_a_summary_with_nothing_similar_is_created_without_a_model_call(
    graph_for, make_context, services, user_id
):
    await _seed(services, user_id, text="The user keeps bees on a rooftop in Oslo.")
    prompts: list[str] = []
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context(model_obj=_deciding("merged", log=prompts))
    agent = graph_for(settings)
    await _two_turns(agent, ctx)
    assert prompts == []
    (decision,) = await services.decisions.list(user_id, item_kind="summary")
    assert decision.action == "created" and "no memory with similarity" in decision.detail["reason"]


@pytest.mark.parametrize(
    ("target", "merged", "why"),
    [
        ("deadbeef", None, "model named no candidate"),  # not one of the candidates
        (None, "The user moved to Paris, Tokyo, Rome and Lima in 2031.", "not faithful"),
    ],
)
async def test_an_invalid_decision_falls_back_to_created(
    graph_for, make_context, services, user_id, target, merged, why
):
    old = await _seed(services, user_id)
    model = _deciding("merged", target=target or old.id, merged=merged)
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    await _two_turns(agent, ctx)
    by_id = await _by_id(services, user_id)
    assert {m.status for m in by_id.values()} == {"active"}
    (decision,) = await services.decisions.list(user_id, item_kind="summary")
    assert decision.action == "created" and why in decision.detail["reason"]
    assert decision.detail["model_action"] == "merged"


async def test_a_replayed_summary_keeps_its_decision_and_bumps_once(
    make_context, services, user_id
):
    from nodes.consolidate import consolidate
    from nodes.summarize import summarize
    from tests.integration_tests.test_nodes import fill_pending, run_node

    thread = _thread()
    await fill_pending(services, user_id, thread, 2)
    summary = (
        await run_node(
            services,
            summarize,
            {"messages": []},
            make_context(),
            thread,
            settings=Settings().override(summary_batch=4),
        )
    )["summary"]
    old = await _seed(services, user_id, text=summary["text"])  # an exact repeat
    calls: list[str] = []
    ctx = make_context(model_obj=_deciding("strengthened", target=old.id, log=calls))
    for _ in range(3):  # e.g. a run retried after a lost ack
        out = await run_node(
            services, consolidate, {"messages": [], "summary": summary}, ctx, thread
        )
        assert out["summary_stored"] is True
    assert len(calls) == 1, "the recorded decision is reused, the model asked once"
    by_id = await _by_id(services, user_id)
    assert by_id[old.id].importance == pytest.approx(0.6) and by_id[old.id].access_count == 1
    assert len(by_id) == 2
    assert [d.action for d in await services.decisions.list(user_id, item_kind="summary")] == [
        "strengthened"
    ]


# ---------------------------------------------------------------- reflection


def _reflector(facts: list[dict]):
    def handler(messages):
        text = prompt_text(messages)
        if text.startswith("Here are summaries of past conversations"):
            insight = "The user works as a nurse and enjoys long walks by the river."
            return json.dumps({"insight": insight, "facts": facts})
        return default_handler(messages)

    return ScriptedChatModel(handler=handler)


async def test_reflection_fires_on_summed_importance_and_proposes_grounded_facts(
    graph_for, make_context, services, user_id
):
    facts = [
        {"key": "occupation", "value": "nurse", "importance": 0.8},
        {"key": "employer", "value": "Google", "importance": 0.9},  # never said
    ]
    settings = Settings().override(  # two summaries of importance 0.5
        window_size=2, summary_batch=2, reflect_after=10, reflect_importance_threshold=1.0
    )
    ctx = make_context(model_obj=_reflector(facts))
    agent = graph_for(settings)
    thread = _thread()
    await say(agent, ctx, thread, "I work as a nurse at the city hospital.")
    state = await say(agent, ctx, thread, "I enjoy long walks by the river.")
    assert await services.memories.count(user_id) == {"summary": 1}
    assert state["importance_since_reflection"] == pytest.approx(0.5)
    state = await say(agent, ctx, thread, "What is a haiku?")

    counts = await services.memories.count(user_id)
    assert counts == {"summary": 2, "reflection": 1}, "2 summaries < reflect_after=10"
    (reflection,) = await services.memories.list(user_id, kind="reflection")
    summaries = await services.memories.list(user_id, kind="summary")
    assert set(reflection.source_ids) == {s.id for s in summaries}
    assert "nurse" in reflection.text and reflection.expires_at is None  # 0.9: never
    assert state["summaries_since_reflection"] == 0
    assert state["importance_since_reflection"] == 0.0

    profile = await services.profile.get(user_id)
    assert profile["occupation"]["value"] == "nurse"
    assert profile["occupation"]["source_ids"] == [reflection.id]
    assert "employer" not in profile
    (fact,) = await services.decisions.list(user_id, item_kind="fact")
    assert fact.item_id == f"{reflection.id}:occupation" and fact.action == "created"
    (logged,) = await services.decisions.list(user_id, item_kind="reflection")
    assert logged.item_id == reflection.id
    kinds = {(d["item_kind"], d["action"]) for d in state["memory_decisions"]}
    assert {("reflection", "created"), ("fact", "created")} <= kinds


async def test_reflection_ignores_superseded_summaries(graph_for, make_context, services, user_id):
    old = await _seed(services, user_id)
    settings = Settings().override(window_size=2, summary_batch=2, reflect_after=2)
    ctx = make_context(model_obj=_deciding("discarded", target=old.id))
    agent = graph_for(settings)
    thread = _thread()
    await say(agent, ctx, thread, NEW_TURN)
    state = await say(agent, ctx, thread, "Tell me about volcanoes.")
    # the discarded summary does not count: only the seed is active since no reflection
    assert state["summaries_since_reflection"] == 1
    assert await services.memories.count(user_id) == {"summary": 2}


@pytest.mark.parametrize(
    ("since", "importance", "expected"),
    [
        (1, 0.5, "__end__"),
        (2, 1.0, "reflect"),  # importance threshold reached before reflect_after
        (0, 3.0, "__end__"),  # nothing new to reflect on
        (10, 0.0, "reflect"),  # reflect_after reached
    ],
)
def test_route_after_consolidate_reflects_by_importance_or_count(since, importance, expected):

    from graph.routing import route_after_consolidate

    settings = Settings().override(reflect_after=10, reflect_importance_threshold=1)
    state = {"summaries_since_reflection": since, "importance_since_reflection": importance}
    assert route_after_consolidate(state, settings=settings) == expected


async def test_memory_show_lists_the_decisions(graph_for, make_context, services, user_id, capsys):
    from memory_graph_agent.cli.main import main

    old = await _seed(services, user_id)
    settings = Settings().override(window_size=2, summary_batch=2)
    ctx = make_context(model_obj=_deciding("updated", old.id))
    agent = graph_for(settings)
    await _two_turns(agent, ctx)
    code = await asyncio.to_thread(main, ["memory", "show", "--user", user_id, "--json"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    summary_decisions = [d for d in shown["decisions"] if d["item_kind"] == "summary"]
    assert [(d["action"], d["target_id"]) for d in summary_decisions] == [("updated", old.id)]
    statuses = {m["id"]: m["status"] for m in shown["memories"]}
    assert statuses[old.id] == "superseded"

    assert await asyncio.to_thread(main, ["memory", "show", "--user", user_id]) == 0
    out = capsys.readouterr().out
    assert "memory decisions" in out and "updated" in out


async def test_raw_summary_mode_consolidates_without_a_model_call(
    graph_for, make_context, services, user_id
):
    await _seed(services, user_id, text=f"human: {NEW_TURN}")
    prompts: list[str] = []
    settings = Settings().override(window_size=2, summary_batch=2, summary_mode="raw")
    ctx = make_context(model_obj=_deciding("merged", log=prompts))
    agent = graph_for(settings)
    await _two_turns(agent, ctx)
    assert prompts == []
    (decision,) = await services.decisions.list(user_id, item_kind="summary")
    assert decision.action == "created" and "raw summary mode" in decision.detail["reason"]


async def test_a_reflection_never_replaces_a_profile_value(
    graph_for, make_context, services, user_id
):
    from memory_graph_agent.storage.profile import Fact

    # consolidation already learned the user's latest city; the reflection, reading
    # older summaries, proposes the old one
    await services.profile.upsert(
        user_id, [Fact("city", "Berlin", 0.8, ["s-new"])], lambda i, p=False: 30
    )
    facts = [{"key": "city", "value": "Paris", "importance": 0.8}]
    settings = Settings().override(window_size=2, summary_batch=2, reflect_importance_threshold=1.0)
    ctx = make_context(model_obj=_reflector(facts))
    agent = graph_for(settings)
    thread = _thread()
    await say(agent, ctx, thread, "Paris was my home for years.")
    await say(agent, ctx, thread, "I enjoy long walks by the river.")
    await say(agent, ctx, thread, "What is a haiku?")
    assert (await services.memories.count(user_id)).get("reflection") == 1
    assert (await services.profile.get(user_id))["city"]["value"] == "Berlin"
