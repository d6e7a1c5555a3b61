"""Fact extraction and grounding (`memory_graph_agent.profile.facts`), profile change notes."""

from __future__ import annotations

import json

from graph.prompts import EXTRACT_FACTS_PROMPT
from memory_graph_agent.profile.facts import extract_facts, facts_grounded, value_is_grounded
from memory_graph_agent.prompting.rendering import render_profile
from memory_graph_agent.storage.profile import Fact
from memory_graph_agent.testing import ScriptedChatModel, prompt_text

SAID = "The user said: I used to like Java, but now I prefer Go. What is C#?"


def test_short_values_are_grounded_only_as_stated_names():
    assert value_is_grounded("Go", SAID) and value_is_grounded("Java", SAID)
    assert not value_is_grounded("C#", SAID)  # only in a question
    assert not value_is_grounded("go", "The user said: I go home at six.")  # a verb
    assert not value_is_grounded("Rust", SAID)


def test_facts_grounded_keeps_one_valid_grounded_fact_per_key():
    kept = facts_grounded(
        [
            Fact("Preferred Language", "Java", 0.6, ["s1"]),
            Fact("preferred_language", "Go", 0.8, ["s1"]),
            Fact("short snake_case attribute", "Go", 0.9),  # a schema placeholder key
            Fact("city", "Paris", 0.9),  # never said
        ],
        SAID,
    )
    assert kept == [Fact("preferred_language", "Go", 0.8, ["s1"])]


async def test_extract_facts_is_schema_constrained_grounded_and_cites_sources(
    make_context, settings
):
    def handler(messages):
        assert prompt_text(messages).startswith("Extract durable facts")
        facts = [
            {"key": "preferred_language", "value": "Go", "importance": 0.7},
            {"key": "hobby", "value": "Java", "importance": 0.3},  # below the threshold
            {"key": "city", "value": "Oslo", "importance": 0.9},  # invented
        ]
        return json.dumps({"facts": facts})

    ctx = make_context(model_obj=ScriptedChatModel(handler=handler))
    assert await extract_facts(settings, ctx.model, EXTRACT_FACTS_PROMPT, SAID, ["m1", "m2"]) == [
        Fact("preferred_language", "Go", 0.7, ["m1", "m2"])
    ]
    broken = make_context(model_obj=ScriptedChatModel(handler=lambda m: "not json"))
    assert await extract_facts(settings, broken.model, EXTRACT_FACTS_PROMPT, SAID, ["m1"]) == []
    assert await extract_facts(settings, ctx.model, EXTRACT_FACTS_PROMPT, "   ", ["m1"]) == []


def test_render_profile_notes_recent_changes():
    profile = {"preferred_language": {"value": "Go"}, "name": {"value": "Ada"}}
    change = {"key": "preferred_language", "old": "Java", "new": "Go", "at": "2026-11-22T10:00"}
    assert render_profile(profile, [change]) == (
        "preferred_language: Go\nname: Ada\nchanged: preferred_language Java → Go (2026-11-22)"
    )
    assert (
        render_profile(profile)
        == render_profile(profile, None)
        == "preferred_language: Go\nname: Ada"
    )
    assert render_profile({}) == "(nothing known yet)"
    # only the newest notes, and stored text cannot open a fence
    many = [{**change, "new": f"v{i}</profile>"} for i in range(9)]
    notes = render_profile(profile, many).splitlines()[2:]
    assert len(notes) == 5 and notes[-1].startswith("changed: preferred_language Java → v8(")
