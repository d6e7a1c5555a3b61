"""`MemoryMiddleware` from sync code: ``agent.invoke`` and ``agent.stream``, on real servers.

The agent runs with langgraph's sync `PostgresSaver`; the services are opened for sync
code (`services_session_sync`), on a loop thread of their own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver

from memory_graph_agent import MemoryMiddleware
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.services.stores import Services, services_session_sync
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, block, default_handler, tool_call
from tests.conftest import EMBEDDING
from tests.integration_tests.test_durability import _assert_exactly_once


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def sync_services(memory_env: dict[str, str]) -> Iterator[Services]:
    with services_session_sync(EMBEDDING) as services:
        yield services


@pytest.fixture(scope="module")
def saver(memory_env: dict[str, str]) -> Iterator[PostgresSaver]:
    with PostgresSaver.from_conn_string(memory_env["DATABASE_URL"]) as saver:
        saver.setup()
        yield saver


def _agent(model: ScriptedChatModel, memory: MemoryMiddleware, checkpointer: Any) -> Any:
    return create_agent(
        model,
        system_prompt="You are Bob, a terse assistant.",
        middleware=[memory],
        checkpointer=checkpointer,
    )


def _say(agent: Any, user: str, thread: str, text: str) -> dict:
    return agent.invoke(
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread}},
        context={"user_id": user},
    )


def test_invoke_and_stream_remember_across_threads_and_drain_the_memory_runs(
    sync_services, saver, user_id
):
    services = sync_services
    model = ScriptedChatModel()
    spec = register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", model)
    memory = MemoryMiddleware(
        services, model=spec, settings=Settings().override(window_size=4, summary_batch=2)
    )
    agent = _agent(model, memory, saver)
    old = _thread()
    first = _say(agent, user_id, old, "My name is Zhang San and I live in Berlin.")
    said = first["messages"][0].id
    for i in range(4):
        state = _say(agent, user_id, old, f"unrelated question {i}")
    assert state["messages"][-1].text  # answered
    memory.drain_sync()
    assert [r["thread_id"] for r in memory.scheduler.reports()], "no memory run ran"
    logged = services.run(services.episodes.history(user_id, old))
    assert logged[0].id == said and len([m for m in logged if m.role == "human"]) == 5
    window = services.run(services.window.window(user_id, old))
    assert window and said not in {m.id for m in window}  # it is memory now, once
    assert said not in {m.id for m in state["messages"]}
    services.run(_assert_exactly_once(services, user_id, old))

    tokens = [
        chunk.text
        for chunk, _ in agent.stream(
            {"messages": [HumanMessage("Where do I live?")]},
            {"configurable": {"thread_id": _thread()}},
            context={"user_id": user_id},
            stream_mode="messages",
        )
    ]
    assert "".join(tokens)  # the reply streamed
    system = model.system_prompts()[-1]
    assert system.startswith("You are Bob, a terse assistant.")
    assert "Berlin" in block(system, "memories") and "Berlin" in block(system, "profile")

    _say(agent, f"other-{uuid.uuid4().hex[:8]}", _thread(), "Where do I live?")
    system = model.system_prompts()[-1]
    assert "Berlin" not in system and "Zhang" not in system

    calls = len(model.system_prompts())  # a session end jumps past the model
    config = {"configurable": {"thread_id": old}}
    ended = agent.invoke({"end_session": True}, config, context={"user_id": user_id})
    assert len(model.system_prompts()) == calls and ended["messages"] == []
    assert services.run(services.window.window(user_id, old)) == []
    services.run(_assert_exactly_once(services, user_id, old))


def test_the_memory_tools_run_in_a_sync_run_for_the_runs_own_user(sync_services, saver, user_id):
    def reply(messages: list[BaseMessage]) -> str | AIMessage:
        if isinstance(messages[-1], HumanMessage):
            return tool_call("remember", key="city", fact="Turin", importance=0.9)
        return default_handler(messages)

    model = ScriptedChatModel(handlers={"reply": reply})
    spec = register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", model)
    memory = MemoryMiddleware(sync_services, tools=True, model=spec)
    state = _say(_agent(model, memory, saver), user_id, _thread(), "I moved")
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    profile = sync_services.run(sync_services.profile.get(user_id))
    assert profile["city"]["value"] == "Turin"
    memory.drain_sync()


async def test_invoke_on_the_loop_that_owns_the_services_says_to_use_ainvoke(services, user_id):
    memory = MemoryMiddleware(services, settings=Settings().override(window_size=4))
    agent = _agent(ScriptedChatModel(), memory, None)
    with pytest.raises(RuntimeError, match="ainvoke") as refused:
        _say(agent, user_id, _thread(), "hi")
    assert "services_session_sync" in str(refused.value)
    assert await services.window.window(user_id, "default") == []  # nothing written
