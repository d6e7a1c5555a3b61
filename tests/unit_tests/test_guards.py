"""Guards that keep a weak model's inventions out of memory."""

from memory_graph_agent.prompting.guards import (
    fact_is_grounded,
    fact_key_is_valid,
    self_statements,
    summary_is_faithful,
)

SAID = "Hi! My name is Zhang San. I'm a VIP customer and I live in Berlin.\nWhat is jazz?"


def test_summary_that_keeps_the_names_is_faithful():
    assert summary_is_faithful("The user, Zhang San, is a VIP customer living in Berlin.", SAID)


def test_summary_that_drops_names_or_invents_entities_is_not():
    assert not summary_is_faithful("The conversation was about music.", SAID)
    assert not summary_is_faithful("Zhang San met Sulfite, Oslo, Kraków and Lima in Peru.", SAID)
    assert not summary_is_faithful("   ", SAID)


def test_self_statements_skip_questions_and_non_personal_sentences():
    assert self_statements(SAID) == [
        "My name is Zhang San.",
        "I'm a VIP customer and I live in Berlin.",
    ]


def test_fact_values_must_come_from_a_self_statement():
    assert fact_is_grounded("Zhang San", SAID)
    assert fact_is_grounded("Berlin", SAID)
    assert not fact_is_grounded("What is Jazz?", SAID)  # a question is not a fact
    assert not fact_is_grounded("Jazz", SAID)
    assert not fact_is_grounded("Munich", SAID)
    assert not fact_is_grounded("", SAID)


def test_placeholder_keys_copied_from_the_schema_are_rejected():
    assert fact_key_is_valid("preferred_language") and fact_key_is_valid("city")
    assert not fact_key_is_valid("short snake_case attribute")
    assert not fact_key_is_valid("")
    assert not fact_key_is_valid("a_b_c_d_e")


def test_reflection_that_invents_entities_is_rejected():
    from memory_graph_agent.prompting.guards import invents_few_entities

    summaries = "- The user Zhang San lives in Berlin and prefers Go."
    assert invents_few_entities("Zhang San, based in Berlin, likes Go.", summaries)
    assert not invents_few_entities("The user loves Paris, Rome, Tokyo and Java.", summaries)
