"""Shared fixtures: the embedded Redis/Postgres started once, a fresh database and key
prefix per test session, unique user ids per test, and scripted fake chat models."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from graph.builder import build_graph
from graph.context import Context
from memory_graph_agent.local.embedded import ensure_services
from memory_graph_agent.models import register_chat_model
from memory_graph_agent.storage.postgres import with_database
from tests.fakes import ScriptedChatModel

EMBEDDING = "local:all-minilm-l6-v2"


@pytest.fixture(scope="session", autouse=True)
def memory_env() -> Iterator[dict[str, str]]:
    """Real servers (embedded unless REDIS_URL/DATABASE_URL are set), a fresh database."""
    urls = ensure_services()
    db = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    env = {
        "REDIS_URL": urls.redis_url,
        "DATABASE_URL": with_database(urls.database_url, db),
        "MEMORY_KEY_PREFIX": f"test-{db}",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        import redis

        r = redis.Redis.from_url(urls.redis_url)
        for key in r.scan_iter(match=f"{env['MEMORY_KEY_PREFIX']}:*", count=1000):
            r.delete(key)
        r.close()
        with psycopg.connect(urls.database_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


@pytest.fixture
def user_id() -> str:
    """A user id no other test uses."""
    return f"u-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def fake_model() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def make_context(fake_model: ScriptedChatModel, user_id: str):
    """Build a `Context` for the test's user and fake model; overrides as kwargs."""
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


@pytest.fixture(scope="session")
async def checkpointer(memory_env: dict[str, str]) -> AsyncIterator:
    from memory_graph_agent.services import open_checkpointer

    async with open_checkpointer(memory_env["DATABASE_URL"]) as saver:
        yield saver


@pytest.fixture(scope="session")
async def services(memory_env: dict[str, str]) -> AsyncIterator:
    """The session's stores, opened once (on the session's event loop) and closed at the end."""
    from memory_graph_agent.services import services_session

    async with services_session(EMBEDDING) as opened:
        yield opened


@pytest.fixture(scope="session")
def agent(services, checkpointer):
    return build_graph(services, checkpointer=checkpointer)


async def say(agent, context: Context, thread_id: str, text: str) -> dict:
    """Run one user turn through the compiled graph."""
    return await agent.ainvoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread_id}},
        context=context,
    )
