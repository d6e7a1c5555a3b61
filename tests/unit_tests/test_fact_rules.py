"""Rule-based extraction of explicit self-statements."""

from __future__ import annotations

import pytest

from graph.fact_rules import rule_facts


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
