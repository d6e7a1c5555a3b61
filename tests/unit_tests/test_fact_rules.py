"""Rule-based extraction of explicit self-statements."""

from __future__ import annotations

import pytest

from memory_graph_agent.profile.fact_rules import rule_facts
from memory_graph_agent.settings import Settings


def facts(text: str) -> dict[str, str]:
    return {f.key: f.value for f in rule_facts(text)}


def test_identity_city_and_tier_from_one_introduction() -> None:
    text = "Hi! My name is Zhang San. I'm a VIP customer and I live in Berlin."
    assert facts(text) == {"name": "Zhang San", "city": "Berlin", "customer_tier": "VIP"}


def test_later_statement_of_a_key_wins() -> None:
    text = "For programming I prefer Go over Java. Actually, for coding I now prefer Rust."
    assert facts(text) == {"preferred_language": "Rust"}


@pytest.mark.parametrize(
    "text",
    [
        "Do I prefer Go for coding?",  # a question states nothing
        "I prefer tea.",  # a preference, but not about programming
        "What is a good name for a cat?",
        "The user lives in Berlin.",  # not first person
        "my name is lowercase",  # names are capitalised
    ],
)
def test_no_fact_without_an_explicit_self_statement(text: str) -> None:
    assert facts(text) == {}


def test_moving_and_employer() -> None:
    assert facts("I moved to Paris last year. I work at Acme Corp.") == {
        "city": "Paris",
        "employer": "Acme Corp",
    }


def test_rule_facts_win_over_a_model_mis_assignment() -> None:
    from memory_graph_agent.profile.facts import merge_rule_facts
    from memory_graph_agent.storage.profile import Fact

    model = [
        Fact("city", "Zhang San", 0.9),  # the small model's classic mistake
        Fact("name", "Zhang", 0.9),
        Fact("nickname", "Zhang San", 0.9),
        Fact("hobby", "chess", 0.6),
    ]
    merged = merge_rule_facts(model, "My name is Zhang San. I play chess.", ["s1"])
    assert {(f.key, f.value) for f in merged} == {("name", "Zhang San"), ("hobby", "chess")}
    assert all(f.source_ids == ["s1"] for f in merged if f.key == "name")


def test_rule_keys_are_never_taken_from_the_model_when_rules_are_on() -> None:
    from memory_graph_agent.profile.facts import merge_rule_facts
    from memory_graph_agent.storage.profile import Fact

    # a batch of small talk: no rule fires, and the model's "name" is still refused
    model = [Fact("name", "The user's preference for a healthy breakfast", 0.9)]
    assert merge_rule_facts(model, "Suggest a healthy breakfast.", ["s2"]) == []


@pytest.mark.parametrize(
    ("fact_rules", "model", "on"),
    [
        ("auto", "local:smollm2", True),
        ("auto", "openai:gpt-4o-mini", False),
        ("off", "local:x", False),
        ("on", "openai:x", True),
    ],
)
def test_rules_enabled(fact_rules: str, model: str, on: bool) -> None:
    from memory_graph_agent.profile.facts import rules_enabled

    assert rules_enabled(Settings().override(fact_rules=fact_rules), model) is on


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Actually, I moved from Lyon to Porto last month.", {"city": "Porto"}),
        ("I've relocated to New York City.", {"city": "New York City"}),
        ("I'm now living in Lisbon.", {"city": "Lisbon"}),
        ("I now prefer Rust.", {"preferred_language": "Rust"}),
        ("I switched from Go to Rust for my side project code.", {"preferred_language": "Rust"}),
    ],
)
def test_an_update_states_the_new_value(text: str, expected: dict[str, str]) -> None:
    assert facts(text) == expected


def test_an_update_after_the_first_statement_wins() -> None:
    text = "I live in Lyon. Actually, I moved from Lyon to Porto last month."
    assert facts(text) == {"city": "Porto"}
