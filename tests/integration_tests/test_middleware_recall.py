"""Recall through `MemoryMiddleware` is our graph's: the same ids, in the same order.

One user's memory is formed by our ``memory_agent`` graph from a multi-session
conversation (several threads, memory inline, a small window so most of it is summarized
and logged). Then each question is asked, on fresh threads, of our graph and of a
``create_agent`` agent with the middleware, with the same knobs. Both runs stop before the
reply model (nothing is touched yet), so both read the same memory: what recall chose,
and the memories block each puts in its model's prompt, must be identical. A middleware
with one ranking knob changed must differ on some question: the questions can tell
rankings apart.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from graph.context import Context
from memory_graph_agent import MemoryMiddleware
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, block

SETTINGS = Settings().override(window_size=4, summary_batch=2, memory_token_budget=600)
"""A small window and budget: recall must choose among many memories."""

SESSIONS = [
    [
        "Hi! I just got back from a hiking trip in the Dolomites with my sister Maria.",
        "We walked the Alta Via 1 for six days, sleeping in mountain huts.",
        "My knee started hurting on day four, so I bought a pair of trekking poles in Cortina.",
        "Maria wants to do the Tour du Mont Blanc next summer, but I'm not sure about my knee.",
        "Anyway, work starts again Monday. I'm a nurse in the paediatric ward at St. Mary's.",
        "Night shifts this month, which always wrecks my sleep.",
    ],
    [
        "I adopted a rescue dog on Saturday! A three-year-old greyhound called Biscuit.",
        "He is very shy and hides behind the sofa when the doorbell rings.",
        "The shelter said greyhounds need two short walks a day, not long runs.",
        "I signed up for a beginner pottery class on Wednesday evenings.",
        "My first bowl came out lopsided but I love it anyway.",
        "Maria laughed at the bowl but asked me to make her a mug for her birthday in May.",
    ],
    [
        "Bad news: the physio says my knee has a mild meniscus tear.",
        "No hiking for three months, only swimming and cycling on flat roads.",
        "So I told Maria I'll skip the Tour du Mont Blanc this year.",
        "Biscuit is doing much better, he now greets the postman.",
        "I'm thinking of switching to day shifts, the night rota is too much.",
        "Also I finally finished the mug for Maria, blue glaze with a mountain on it.",
    ],
]

QUESTIONS = [
    "What did the physio say about my knee?",
    "What is my dog's name and what breed is he?",
    "Where did I go hiking and with whom?",
    "What am I making for my sister's birthday?",
    "What is my job?",
    "Which evening do I have pottery class?",
    "Am I doing the Tour du Mont Blanc?",
]


def _spec(model: ScriptedChatModel) -> str:
    return register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", model)


async def _recalled(
    agent: Any,
    asked: dict,
    config: dict,
    context: Any,
    before: str = "model",
    key: str = "memory_recalled",
) -> list[str]:
    """The ids recall chose for ``asked``, read when the run stops before ``before``."""
    await agent.ainvoke(asked, config, context=context, interrupt_before=[before])
    items = (await agent.aget_state(config)).values.get(key) or []
    return [str(item["id"]) for item in items]


async def _seed(agent: Any, user: str, spec: str) -> None:
    """Each session on its own thread, memory formed inline by our graph."""
    ctx = Context(user_id=user, model=spec)
    for session in SESSIONS:
        config = {"configurable": {"thread_id": f"s-{uuid.uuid4().hex[:8]}"}}
        for text in session:
            await agent.ainvoke({"messages": [HumanMessage(text)]}, config, context=ctx)


async def test_the_middleware_recalls_what_our_graph_recalls_in_the_same_order(
    services, checkpointer, graph_for, user_id
):
    model = ScriptedChatModel()
    spec = _spec(model)
    await _seed(graph_for(SETTINGS.override(memory_mode="inline")), user_id, spec)
    summaries = await services.memories.list(user_id, kind="summary", limit=100)
    assert len(summaries) >= 6  # most of the conversation left the windows

    ours = Context(user_id=user_id, model=spec)
    agent = graph_for(SETTINGS)
    same = MemoryMiddleware(services, model=spec, settings=SETTINGS)
    # a ranking of its own: a flatter fusion, no neighbouring turns
    flatter = SETTINGS.override(recall_rrf_k=60, neighbour_weight=0.0)
    other = MemoryMiddleware(services, model=spec, settings=flatter)
    middleware_agent = create_agent(model, [], middleware=[same], checkpointer=checkpointer)
    control_agent = create_agent(model, [], middleware=[other], checkpointer=checkpointer)
    context = {"user_id": user_id}
    differed = []
    for question in QUESTIONS:
        configs = [{"configurable": {"thread_id": f"q-{uuid.uuid4().hex[:8]}"}} for _ in "gmc"]
        asked = {"messages": [HumanMessage(question)]}
        # every side reads before any side's turn ends (ending a turn counts its accesses)
        graph_ids = await _recalled(agent, asked, configs[0], ours, "respond", "recalled")
        middleware_ids = await _recalled(middleware_agent, asked, configs[1], context)
        control_ids = await _recalled(control_agent, asked, configs[2], context)
        assert graph_ids, question  # recall had something to rank
        assert middleware_ids == graph_ids, question
        differed.append(control_ids != graph_ids)
        # and the prompts: the memories block each model was shown
        await agent.ainvoke(None, configs[0], context=ours)
        graph_block = block(model.system_prompts()[-1], "memories")
        await middleware_agent.ainvoke(None, configs[1], context=context)
        assert block(model.system_prompts()[-1], "memories") == graph_block, question
    await same.drain()
    await other.drain()
    assert any(differed), "the questions cannot tell two rankings apart"
