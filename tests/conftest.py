"""Fixtures every test may use without a server: unique user ids, the fake chat model,
a `Context` builder, the default `Settings`, and `say` (one turn through a compiled graph).

A test that needs other settings builds them (``Settings().override(window_size=2)``)
and asks ``graph_for(settings)`` (``integration_tests/conftest.py``) for the graph.

The server fixtures (real Redis and Postgres) are in ``integration_tests/conftest.py``."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import HumanMessage

from graph.context import Context
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel

EMBEDDING = "local:all-minilm-l6-v2"


@pytest.fixture
def user_id() -> str:
    """A user id no other test uses."""
    return f"u-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def fake_model() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def settings() -> Settings:
    """The deployment's settings at their defaults (the environment is not read)."""
    return Settings()


@pytest.fixture
def make_context(fake_model: ScriptedChatModel, user_id: str):
    """Build a `Context` for the test's user and fake model; overrides as kwargs.

    ``model_obj=`` registers a chat model object as the context's model.
    """
    spec = register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", fake_model)

    def make(**overrides) -> Context:
        fields = {"user_id": user_id, "model": spec}
        fields.update(overrides)
        if "model_obj" in fields:
            fields["model"] = register_chat_model(
                f"fake-{uuid.uuid4().hex[:8]}", fields.pop("model_obj")
            )
        return Context(**fields)

    return make


async def say(agent, context: Context, thread_id: str, text: str) -> dict:
    """Run one user turn through the compiled graph."""
    return await agent.ainvoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread_id}},
        context=context,
    )


def kinds(state: dict) -> list[tuple[str, str]]:
    """``(node, kind)`` of each of the turn's memory events: what tests assert on."""
    return [(e["node"], e["kind"]) for e in state.get("memory_events", [])]
