"""`add_memory`: our memory nodes inside a user's own ``StateGraph``, with keys of its own.

Real Redis and Postgres; the user's node calls the purpose-keyed fake model itself.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graph.background import LocalScheduler
from memory_graph_agent import Context, MemoryState, add_memory, memory_prompt
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, block
from tests.integration_tests.test_durability import _assert_exactly_once


class MyState(MemoryState):
    """A user's state: ours, plus keys of their own."""

    mood: str
    answered: Annotated[int, operator.add]


def _my_graph(
    services: Any, model: ScriptedChatModel, settings: Settings, scheduler: Any = None
) -> StateGraph:
    async def agent(state: MyState, runtime: Runtime[Context]) -> dict:
        memory = memory_prompt(state, settings.window.profile_token_budget)
        system = SystemMessage(f"You are Bob.\n\n{memory}")
        reply = await model.ainvoke([system, *state["messages"]])
        return {"messages": [reply], "answered": 1, "mood": "curious"}

    builder = StateGraph(MyState, context_schema=Context)
    builder.add_node("agent", agent)
    return add_memory(builder, services, settings=settings, answer="agent", scheduler=scheduler)


async def _say(graph: Any, context: Context, thread: str, text: str) -> dict:
    return await graph.ainvoke(
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=context
    )


@pytest.mark.parametrize("background", [False, True], ids=["inline", "memory-runs"])
async def test_a_hand_built_graph_with_memory_recalls_across_threads(
    services, checkpointer, make_context, background
):
    model = ScriptedChatModel()
    scheduler = LocalScheduler() if background else None
    settings = Settings().override(window_size=4, summary_batch=2)
    graph = _my_graph(services, model, settings, scheduler).compile(checkpointer=checkpointer)
    if scheduler is not None:
        scheduler.bind(graph)  # memory runs are runs of the user's own graph
    ctx = make_context(model_obj=model)
    old = f"t-{uuid.uuid4().hex[:8]}"
    await _say(graph, ctx, old, "My name is Zhang San and I live in Berlin.")
    for i in range(4):
        state = await _say(graph, ctx, old, f"unrelated question {i}")
    if scheduler is not None:
        await scheduler.drain()
    assert state["answered"] == 5 and state["mood"] == "curious"  # the user's keys are theirs
    await _assert_exactly_once(services, ctx.user_id, old)
    await _say(graph, ctx, f"t-{uuid.uuid4().hex[:8]}", "Where do I live?")
    system = str(model.prompts_for("reply")[-1][0].content)
    assert "Berlin" in block(system, "memories") and "Berlin" in block(system, "profile")
    other = make_context(model_obj=model, user_id=f"other-{uuid.uuid4().hex[:6]}")
    await _say(graph, other, f"t-{uuid.uuid4().hex[:8]}", "Where do I live?")
    assert "Berlin" not in str(model.prompts_for("reply")[-1][0].content)


def test_add_memory_names_what_the_graph_lacks(settings, services) -> None:
    class Bare(TypedDict):
        messages: list

    with pytest.raises(TypeError, match="recalled"):
        add_memory(
            StateGraph(Bare, context_schema=Context), services, settings=settings, answer="agent"
        )
    with pytest.raises(TypeError, match="context_schema"):
        add_memory(StateGraph(MyState), services, settings=settings, answer="agent")
