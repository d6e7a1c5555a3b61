"""Identifier validation and the run-time `Context` (pure, no servers needed)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from graph.context import KNOB_FIELDS, OPERATOR_KNOBS, USER_KNOBS, Context
from memory_graph_agent.core.ids import InvalidIdError, validate_id
from memory_graph_agent.core.knobs import OPERATOR, SCHEDULER, USER, knob_values, with_knobs
from memory_graph_agent.recall.weights import RecallWeights
from memory_graph_agent.services.models import default_embedding_model
from memory_graph_agent.storage.memories import _IterativeHNSW


@pytest.mark.parametrize(
    "good",
    ["u1", "default-user", "alice@example.com", "a.b_c-d", "A", "0", "x" * 64, "t-1f2e3d4c"],
)
def test_validate_id_accepts_normal_ids(good):
    assert validate_id(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "a:*",
        "../x",
        "*",
        "a b",
        "a\nb",
        "a\n",  # `$` would accept a trailing newline; fullmatch must not
        "x" * 10_000,
        "x" * 65,
        "'; DROP TABLE x;--",
        "",
        None,
        "-leading-dash",
        ".hidden",
        "a?b",
        "a[b]",
        "user:other",
        "ü",
        "a\x00b",
        42,
        b"bytes",
    ],
)
def test_validate_id_rejects_hostile_ids(bad):
    with pytest.raises(InvalidIdError):
        validate_id(bad, "user_id")


def test_invalid_id_error_is_a_value_error_with_short_message():
    with pytest.raises(ValueError, match="invalid thread_id") as info:
        validate_id("x" * 10_000 + "!", "thread_id")
    assert len(str(info.value)) < 300  # the 10 KB value is not echoed back
    with pytest.raises(ValueError, match="user_id is required"):
        validate_id(None, "user_id")


# ---------------------------------------------------------------- Context

ENV_NAMES = [f.name.upper() for f in fields(Context)] + ["OPENAI_API_KEY"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def test_defaults_without_env():
    ctx = Context()
    assert ctx.user_id == "default-user"
    assert ctx.window_size == 20 and ctx.summary_batch == 5 and ctx.recall_k == 5
    assert ctx.min_similarity == 0.2 and ctx.model_timeout_s == 60.0


def test_env_fills_fields(monkeypatch):
    monkeypatch.setenv("WINDOW_SIZE", "7")
    monkeypatch.setenv("MIN_SIMILARITY", "0.35")
    monkeypatch.setenv("MODEL_TIMEOUT_S", "12")
    monkeypatch.setenv("USER_ID", "env-user")
    monkeypatch.setenv("SUMMARY_BATCH", "")  # empty means unset
    ctx = Context()
    assert ctx.window_size == 7 and isinstance(ctx.window_size, int)
    assert ctx.min_similarity == 0.35
    assert ctx.model_timeout_s == 12.0 and isinstance(ctx.model_timeout_s, float)
    assert ctx.user_id == "env-user"
    assert ctx.summary_batch == 5


def test_explicit_argument_beats_env(monkeypatch):
    monkeypatch.setenv("WINDOW_SIZE", "7")
    monkeypatch.setenv("MODEL", "openai:gpt-4.1")
    ctx = Context(window_size=9, model="registered:x")
    assert ctx.window_size == 9
    assert ctx.model == "registered:x"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WINDOW_SIZE", "seven"),
        ("WINDOW_SIZE", "7.5"),
        ("MIN_SIMILARITY", "high"),
        ("RECALL_K", "1e3x"),
    ],
)
def test_invalid_env_value_names_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name) as info:
        Context()
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("WINDOW_SIZE", "0", "window_size must be >= 1"),
        ("RECALL_K", "-3", "recall_k must be >= 1"),
        ("MIN_SIMILARITY", "1.5", "min_similarity"),
        ("MEMORY_TOKEN_BUDGET", "-1", "memory_token_budget"),
    ],
)
def test_out_of_range_env_values_rejected(monkeypatch, name, value, match):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=match):
        Context()


def test_the_recall_weights_are_one_group_each_weight_read_from_its_own_variable(monkeypatch):
    """The tuned weights live in `RecallWeights`; the variables are the flat knobs' names."""
    monkeypatch.setenv("NEIGHBOUR_WEIGHT", "0.25")
    monkeypatch.setenv("RECALL_RRF_K", "60")
    monkeypatch.setenv("WEIGHT_RECENCY", "")  # empty means unset
    weights = Context().recall_weights
    assert isinstance(weights, RecallWeights)
    assert weights.neighbour_weight == 0.25 and weights.recall_rrf_k == 60
    assert isinstance(weights.recall_rrf_k, int) and weights.weight_recency == 0.0
    assert RecallWeights().neighbour_weight == 0.5  # the group alone reads no variable
    # a group passed in: its weights left at their default still come from the environment
    mine = Context(recall_weights=RecallWeights(speaker_weight=2.0)).recall_weights
    assert mine.speaker_weight == 2.0 and mine.neighbour_weight == 0.25
    with pytest.raises(AttributeError):
        Context().neighbour_weight  # noqa: B018 - no flat copy left behind
    with pytest.raises(TypeError):
        Context(neighbour_weight=0.1)


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("NEIGHBOUR_WEIGHT", "lots", "NEIGHBOUR_WEIGHT='lots' is not a valid float"),
        ("NEIGHBOUR_WEIGHT", "1.5", r"neighbour_weight must be in \[0, 1\], got 1.5"),
        ("RECALL_RRF_K", "5.5", "RECALL_RRF_K='5.5' is not a valid int"),
        ("TOPIC_WEIGHT", "-0.1", "topic_weight must be >= 0"),
        ("RECENCY_HALF_LIFE_DAYS", "0", "recency_half_life_days must be > 0"),
    ],
)
def test_a_bad_weight_from_the_environment_names_it(monkeypatch, name, value, match):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=match):
        Context()


def test_a_bad_weight_in_code_names_it_too():
    with pytest.raises(ValueError, match="speaker_weight must be >= 0, got -1"):
        RecallWeights(speaker_weight=-1)
    with pytest.raises(ValueError, match="recall_weights has no knob speed"):
        Context(recall_weights={"speed": 1})
    with pytest.raises(ValueError, match="recall_weights must be a RecallWeights"):
        Context(recall_weights=0.5)
    as_mapping = Context(recall_weights={"topic_weight": 0.5}).recall_weights
    assert as_mapping == RecallWeights(topic_weight=0.5)


def test_knobs_are_set_and_read_by_name_in_or_out_of_the_group():
    """What the benchmarks' grids and the tests use: one name per knob, wherever it lives."""
    ctx = Context(user_id="u1")
    changed = with_knobs(ctx, topic_weight=0.5, recall_k=3, newest_first=False)
    assert changed.recall_weights.topic_weight == 0.5 and changed.recall_k == 3
    assert changed.newest_first is False and ctx.recall_weights.topic_weight == 0.0
    assert changed.recall_weights.neighbour_weight == ctx.recall_weights.neighbour_weight
    values = knob_values(changed)
    assert values["topic_weight"] == 0.5 and values["recall_k"] == 3
    assert "recall_weights" not in values and set(values) == set(KNOB_FIELDS)
    assert KNOB_FIELDS["neighbour_weight"].default == 0.5
    with pytest.raises(TypeError):
        with_knobs(ctx, no_such_knob=1)


def test_out_of_range_arguments_rejected():
    with pytest.raises(ValueError, match="summary_batch"):
        Context(summary_batch=0)
    with pytest.raises(ValueError, match="reflect_after"):
        Context(reflect_after=-1)
    with pytest.raises(ValueError, match="min_similarity"):
        Context(min_similarity=-0.1)


def test_default_models_offline():
    ctx = Context()
    assert ctx.model == "local:smollm2"
    assert default_embedding_model() == "local:all-minilm-l6-v2"


def test_default_models_with_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ctx = Context()
    assert ctx.model.startswith("openai:")
    assert default_embedding_model().startswith("openai:")
    # an explicit model still wins over the key-based default
    assert Context(model="local:smollm2").model == "local:smollm2"


def test_empty_openai_key_counts_as_absent(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert Context().model == "local:smollm2"


@pytest.mark.parametrize("bad", ["a:*", "../x", "", "a b", "x" * 65, "'; DROP TABLE x;--"])
def test_invalid_user_id_in_context_raises(bad):
    with pytest.raises(InvalidIdError):
        Context(user_id=bad)


def test_invalid_user_id_from_env_raises(monkeypatch):
    monkeypatch.setenv("USER_ID", "a:*")
    with pytest.raises(InvalidIdError):
        Context()


def test_iterative_hnsw_query_options():
    assert _IterativeHNSW().to_parameter() == [
        "hnsw.ef_search = 100",
        "hnsw.iterative_scan = relaxed_order",
    ]
    assert _IterativeHNSW(ef_search=40, iterative=False).to_parameter() == ["hnsw.ef_search = 40"]


def test_every_knob_declares_its_tier_and_its_bounds_are_checked() -> None:
    """One declaration per knob: its tier and bounds; in-process code may set any knob.

    The recall weights' group is the operator's as a whole, and so is each weight in it.
    """
    for f in fields(Context):
        assert f.metadata.get("tier") in (USER, OPERATOR, SCHEDULER), f.name
        assert f.metadata.get("description"), f.name
    (group,) = [f for f in fields(Context) if f.name == "recall_weights"]
    assert group.metadata["tier"] == OPERATOR
    for f in fields(RecallWeights):
        assert f.metadata.get("tier") == OPERATOR and f.metadata.get("description"), f.name
    for name, f in KNOB_FIELDS.items():
        if "ge" in f.metadata:
            with pytest.raises(ValueError, match=f"{name} must be"):
                with_knobs(Context(), **{name: f.metadata["ge"] - 1})
        if "choices" in f.metadata:
            with pytest.raises(ValueError, match=f"{name} must be"):
                with_knobs(Context(), **{name: "no-such-choice"})
    assert Context(window_size=3, max_message_chars=10).max_message_chars == 10
    assert callable(Context().ttl_days)


def test_studios_form_shows_the_users_knobs_only() -> None:
    """The graph's context schema (what Studio renders) holds the user's knobs and bounds."""
    from langgraph.graph import StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        x: int

    builder = StateGraph(S, context_schema=Context)
    builder.add_node("noop", lambda state: {})
    builder.set_entry_point("noop")
    form = builder.compile().get_context_jsonschema()
    # memory_of too: the server passes a run only the keys the schema names
    assert set(form["properties"]) == USER_KNOBS | {"memory_of"} and len(USER_KNOBS) <= 15
    assert form["properties"]["recall_mode"]["enum"] == ["auto", "tool", "flat"]
    assert form["properties"]["min_similarity"]["maximum"] == 1
    assert not USER_KNOBS & OPERATOR_KNOBS and "max_message_chars" in OPERATOR_KNOBS
    # the recall weights' group is the operator's: neither it nor its definition is shown
    assert {"recall_weights", "neighbour_weight"} <= OPERATOR_KNOBS
    assert "RecallWeights" not in str(form)
