"""A run that took its process down is re-run by the server; the second time, never again.

``langgraph dev`` and the LangGraph server retry a run left running by a crashed process
under the same ``configurable.run_id``. A run whose process died twice (a model that
segfaults on this input, say) must fail cleanly instead of crashing the restarted server.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from langchain_core.messages import HumanMessage

from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel
from nodes.respond import ModelUnavailableError


def _crashing_model() -> ScriptedChatModel:
    """Its reply call ends the run, as a segfault inside llama.cpp would end the process."""

    def crash(messages):
        raise RuntimeError("the process died here")

    return ScriptedChatModel(handlers={"reply": crash})


async def test_a_run_that_crashed_twice_is_not_run_a_third_time(graph_for, make_context, services):
    model = _crashing_model()
    settings = Settings().override(window_size=4)
    ctx = make_context(model_obj=model)
    thread, run_id = f"t-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread, "run_id": run_id}}
    graph_input = {"messages": [HumanMessage("this input kills the model", id="m-1")]}
    for _ in range(2):  # the first attempt, and the server's retry after the restart
        with pytest.raises(ModelUnavailableError):
            await graph_for(settings).ainvoke(graph_input, config, context=ctx)
    calls = len(model.prompts)

    with pytest.raises(Exception, match=run_id) as raised:
        await graph_for(settings).ainvoke(graph_input, config, context=ctx)
    assert len(model.prompts) == calls, "the model was called a third time"
    assert type(raised.value).__name__ == "RepeatedCrashError"

    # another run of the thread goes on normally, and nothing was stored twice
    settings_healthy = Settings().override(window_size=4)
    healthy = make_context()
    other = {"configurable": {"thread_id": thread, "run_id": str(uuid.uuid4())}}
    state = await graph_for(settings_healthy).ainvoke(
        {"messages": [HumanMessage("hello again")]}, other, context=healthy
    )
    assert state["messages"][-1].type == "ai"
    window = await services.window.window(ctx.user_id, thread)
    assert max(Counter(m.id for m in window).values()) == 1
    assert "this input kills the model" in [m.content for m in window]


async def test_runs_without_a_server_run_id_are_never_counted(agent, make_context):
    """The CLI, notebooks and tests pass no run id: every call is a new run."""
    ctx = make_context()
    thread = f"t-{uuid.uuid4().hex[:8]}"
    for i in range(4):
        state = await agent.ainvoke(
            {"messages": [HumanMessage(f"turn {i}")]},
            {"configurable": {"thread_id": thread}},
            context=ctx,
        )
        assert state["messages"][-1].type == "ai"
