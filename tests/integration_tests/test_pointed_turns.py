"""A question that points at a place in the conversation gets the turns it points at.

"What did I ask first?", "what did you tell me five questions ago?", "my second question",
"recap what we talked about": through the compiled graph and `MemoryMiddleware`, with a
budget too small for the whole conversation, the pointed turns reach the prompt, once,
and the window and memories stay within ``memory_token_budget`` together.
"""

from __future__ import annotations

import uuid

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from memory_graph_agent import MemoryMiddleware
from memory_graph_agent.prompting.budgets import count_tokens
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import REPLY, block
from tests.conftest import say
from tests.integration_tests.test_conversation_fill import TOPICS, model, shown_in
from tests.integration_tests.test_hybrid_recall import cost

BUDGET = 700


def reply_to(topic: str) -> str:
    """The start of the scripted reply to ``topic`` (`test_conversation_fill.long_reply`)."""
    return f"On '{topic.rstrip('?')}'"


async def ask_after_topics(question: str, graph_for, make_context) -> tuple[dict, list, dict]:
    fake = model()
    ctx = make_context(model_obj=fake)
    settings = Settings().override(summary_mode="raw", memory_token_budget=BUDGET)
    agent, thread = graph_for(settings), f"t-{uuid.uuid4().hex[:8]}"
    for text in TOPICS:
        await say(agent, ctx, thread, text)
    state = await say(agent, ctx, thread, question)
    prompt = fake.prompts_for(REPLY)[-1]
    assert cost(state["recalled"]) + count_tokens(prompt[1:-1]) <= BUDGET
    return state, prompt, {t: shown_in(prompt, t) for t in TOPICS}


async def test_what_did_i_ask_first_gets_the_first_question(graph_for, make_context):
    state, prompt, shown = await ask_after_topics(
        "What did I ask first in this conversation?", graph_for, make_context
    )
    assert shown[TOPICS[0]] == 1  # the budget holds the newest turns, not the first
    memories = block(str(prompt[0].content), "memories")
    assert reply_to(TOPICS[0]) in memories  # with what I answered
    pointed = [m for m in state["recalled"] if m.get("via") == "position"]
    assert any(TOPICS[0] in m["text"] for m in pointed)
    assert max(shown.values()) == 1, "nothing is shown twice"


async def test_n_questions_ago_counts_back_from_the_newest(graph_for, make_context):
    _, prompt, shown = await ask_after_topics(
        "What did you tell me seven questions ago?", graph_for, make_context
    )
    memories = block(str(prompt[0].content), "memories")
    assert reply_to(TOPICS[-7]) in memories
    assert shown[TOPICS[-7]] == 1
    assert max(shown.values()) == 1


async def test_my_second_question(graph_for, make_context):
    _, prompt, shown = await ask_after_topics(
        "Remind me, what was my second question?", graph_for, make_context
    )
    assert shown[TOPICS[1]] == 1 and reply_to(TOPICS[1]) in str(prompt[0].content)


async def test_a_recap_gets_every_question(graph_for, make_context):
    _, prompt, shown = await ask_after_topics(
        "Can you recap everything we talked about in this conversation?", graph_for, make_context
    )
    assert list(shown.values()) == [1] * len(TOPICS)  # every question, once


async def test_a_first_time_question_is_not_a_pointer(graph_for, make_context):
    state, _, _ = await ask_after_topics(
        "When did I first ask about sourdough?", graph_for, make_context
    )
    assert not [m for m in state["recalled"] if m.get("via") == "position"]


async def test_another_thread_s_questions_are_not_counted(graph_for, make_context):
    fake = model()
    ctx = make_context(model_obj=fake)
    settings = Settings().override(summary_mode="raw", memory_token_budget=BUDGET)
    agent = graph_for(settings)
    other, thread = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    for text in TOPICS[:4]:
        await say(agent, ctx, other, text)
    for text in TOPICS[4:]:
        await say(agent, ctx, thread, text)
    state = await say(agent, ctx, thread, "What did I ask first in this conversation?")
    pointed = [m["text"] for m in state["recalled"] if m.get("via") == "position"]
    assert pointed and all(TOPICS[0] not in text for text in pointed)
    assert any(TOPICS[4] in text for text in pointed)


async def test_memory_middleware_reads_the_pointed_turns_too(services, checkpointer, user_id):
    fake = model()
    settings = Settings().override(summary_mode="raw", memory_token_budget=BUDGET)
    spec = register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", fake)
    memory = MemoryMiddleware(services, model=spec, settings=settings)
    agent = create_agent(fake, [], middleware=[memory], checkpointer=checkpointer)
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    for text in [*TOPICS, "What did I ask first in this conversation?"]:
        message = {"messages": [HumanMessage(text)]}
        await agent.ainvoke(message, config, context={"user_id": user_id})
        await memory.drain()
    memories = block(fake.system_prompts()[-1], "memories")
    assert TOPICS[0] in memories and reply_to(TOPICS[0]) in memories
