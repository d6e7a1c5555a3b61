"""Identifier validation and the run-time `Context` (pure, no servers needed)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from graph.context import OPERATOR_KNOBS, USER_KNOBS, Context
from memory_graph_agent.core.ids import InvalidIdError, validate_id
from memory_graph_agent.core.knobs import OPERATOR, SCHEDULER, USER
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
    """One declaration per knob: its tier and bounds; in-process code may set any knob."""
    for f in fields(Context):
        assert f.metadata.get("tier") in (USER, OPERATOR, SCHEDULER), f.name
        assert f.metadata.get("description"), f.name
        if "ge" in f.metadata:
            with pytest.raises(ValueError, match=f"{f.name} must be"):
                Context(**{f.name: f.metadata["ge"] - 1})
        if "choices" in f.metadata:
            with pytest.raises(ValueError, match=f"{f.name} must be"):
                Context(**{f.name: "no-such-choice"})
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
