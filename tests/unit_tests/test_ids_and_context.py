"""Identifier validation and the run-time `Context` (pure, no servers needed)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from graph.context import CONTEXT_FIELDS, Context
from memory_graph_agent.core.ids import InvalidIdError, validate_id
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
    assert ctx.user_id == "default-user" and ctx.recall_mode == "auto"
    assert ctx.memory_tools is True and ctx.memory_of == ""


def test_env_fills_fields_left_at_their_default(monkeypatch):
    monkeypatch.setenv("USER_ID", "env-user")
    monkeypatch.setenv("RECALL_MODE", "flat")
    monkeypatch.setenv("MEMORY_TOOLS", "false")
    monkeypatch.setenv("MODEL", "")  # empty means unset
    ctx = Context()
    assert (ctx.user_id, ctx.recall_mode, ctx.memory_tools) == ("env-user", "flat", False)
    assert ctx.model == "local:smollm2"


def test_explicit_argument_beats_env(monkeypatch):
    monkeypatch.setenv("RECALL_MODE", "flat")
    monkeypatch.setenv("MODEL", "openai:gpt-4.1")
    ctx = Context(recall_mode="tool", model="registered:x")
    assert ctx.recall_mode == "tool" and ctx.model == "registered:x"


def test_the_context_is_what_a_caller_chooses_per_run_only():
    """The deployment's settings are `Settings`: no run carries a limit or a weight."""
    assert CONTEXT_FIELDS == {"user_id", "model", "recall_mode", "memory_tools", "memory_of"}
    with pytest.raises(TypeError):
        Context(window_size=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="recall_mode must be"):
        Context(recall_mode="deep")  # type: ignore[arg-type]
    for f in fields(Context):
        assert f.metadata.get("description"), f.name


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


def test_studios_form_is_the_whole_context() -> None:
    """The graph's context schema (what Studio renders) is `Context`, with its choices."""
    from langgraph.graph import StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        x: int

    builder = StateGraph(S, context_schema=Context)
    builder.add_node("noop", lambda state: {})
    builder.set_entry_point("noop")
    form = builder.compile().get_context_jsonschema()
    # memory_of too: the server passes a run only the keys the schema names
    assert set(form["properties"]) == CONTEXT_FIELDS
    assert form["properties"]["recall_mode"]["enum"] == ["auto", "tool", "flat"]
    assert form["properties"]["user_id"]["description"].startswith("Whose memory")
