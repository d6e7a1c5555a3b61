"""The deployment's settings: defaults, the environment's names, bounds and copies."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memory_graph_agent.settings import (
    ENV_PATHS,
    RecallWeights,
    Settings,
    WindowSettings,
    parse_ttl_policy,
)


def test_defaults_are_grouped_by_concern() -> None:
    s = Settings()
    assert s.window.size == 20 and s.window.memory_token_budget == 1800
    assert s.recall.k == 5 and s.recall.weights.neighbour_weight == 0.5
    assert s.formation.mode == "background" and s.formation.summary_batch == 5
    assert s.queue.max_attempts == 5 and s.limits.max_tool_rounds == 4
    assert s.retention.ttl_days(0.95) is None and s.retention.ttl_days(0.6) == 30


def test_from_env_keeps_the_variable_names_of_the_deployments() -> None:
    env = {
        "WINDOW_SIZE": "6",
        "SUMMARY_BATCH": "4",
        "NEIGHBOUR_WEIGHT": "0",
        "MEMORY_MODE": "inline",
        "RECALL_K": "3",
        "NEWEST_FIRST": "false",
        "MIN_SIMILARITY": "0.3",
        "TTL_POLICY": "0.5:3",
        "MAX_ATTEMPTS": "",  # empty counts as unset
    }
    s = Settings.from_env(env)
    assert s.window.size == 6 and s.formation.summary_batch == 4
    assert s.recall.weights.neighbour_weight == 0.0 and s.formation.mode == "inline"
    assert s.recall.k == 3 and s.recall.newest_first is False
    assert s.recall.min_similarity == 0.3 and s.queue.max_attempts == 5
    assert s.retention.ttl_days(0.1) == 3.0


def test_every_setting_has_one_variable() -> None:
    assert len(ENV_PATHS) == 49
    assert ENV_PATHS["WINDOW_SIZE"] == ("window", "size")
    assert ENV_PATHS["NEIGHBOUR_WEIGHT"] == ("recall", "weights", "neighbour_weight")
    assert ENV_PATHS["CONVERSATION_SIMILARITY"] == ("recall", "conversation_similarity")


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("WINDOW_SIZE", "0"),
        ("WINDOW_TOKEN_SHARE", "1.5"),
        ("MEMORY_MODE", "later"),
        ("FACT_RULES", "maybe"),
        ("TTL_POLICY", "soon"),
        ("TTL_POLICY", "0.5:0"),
        ("NEIGHBOUR_WEIGHT", "2"),
        ("NEIGHBOUR_REACH", "0"),
        ("NEIGHBOUR_REACH", "1.5"),
        ("RECALL_K", "many"),
    ],
)
def test_a_bad_value_in_the_environment_names_its_variable(name: str, raw: str) -> None:
    with pytest.raises(ValueError, match=name):
        Settings.from_env({name: raw})


def test_settings_are_frozen_and_checked_in_code() -> None:
    s = Settings(window=WindowSettings(size=6), recall={"weights": RecallWeights(topic_weight=1)})
    assert s.window.size == 6 and s.recall.weights.topic_weight == 1
    with pytest.raises(ValidationError):
        s.window.size = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        WindowSettings(size=0)
    with pytest.raises(ValidationError):
        WindowSettings(sise=3)  # type: ignore[call-arg]


def test_override_changes_a_few_settings_by_their_variable_name() -> None:
    s = Settings().override(window_size=6, neighbour_weight=0.0, memory_mode="inline")
    assert (s.window.size, s.recall.weights.neighbour_weight) == (6, 0.0)
    assert s.formation.mode == "inline" and Settings().window.size == 20
    with pytest.raises(TypeError, match="no setting 'window_sise'"):
        Settings().override(window_sise=6)
    with pytest.raises(ValidationError):
        Settings().override(summary_batch=0)


def test_ttl_policy_parses_to_rules_highest_first() -> None:
    assert parse_ttl_policy("0:7,0.9:never,0.5:30") == [(0.9, None), (0.5, 30.0), (0.0, 7.0)]
    with pytest.raises(ValueError, match="at least one"):
        parse_ttl_policy(" , ")
