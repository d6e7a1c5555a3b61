"""The conversation in progress through the compiled graph: what recall leaves of the
budget goes to the thread's own older turns, newest first, each whole, never shown twice,
and the window and memories stay within ``memory_token_budget`` together."""

from __future__ import annotations

import uuid

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage

from memory_graph_agent import MemoryMiddleware
from memory_graph_agent.prompting.budgets import count_tokens
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import REPLY, ScriptedChatModel, block, default_handler
from tests.conftest import say
from tests.integration_tests.test_hybrid_recall import cost

TOPICS = [
    "Should I repot my fiddle-leaf fig in spring?",
    "What's a good warm-up before bouldering?",
    "How do I descale an espresso machine?",
    "Which lens is best for street photography?",
    "How long should sourdough proof overnight?",
    "What should a wedding toast for my sister say?",
    "How do I stop my cat scratching the sofa?",
    "Is a heat pump worth it in a cold climate?",
]
RECAP = "Can you recap everything we talked about in this conversation?"
FOLLOW_UP = "Anything else I should keep in mind about all of that?"
"""About the conversation, without naming a place in it (`recall.positions`)."""


def long_reply(messages: list[BaseMessage]) -> str:
    """A reply of about 110 tokens that repeats the question's first words."""
    if not messages or messages[-1].type != "human":
        return default_handler(messages)
    topic = str(messages[-1].content).rstrip("?")
    return f"On '{topic}': " + " ".join(["here is one careful consideration."] * 12)


def model() -> ScriptedChatModel:
    return ScriptedChatModel(handlers={REPLY: long_reply})


async def converse(agent, ctx, thread: str, last: str = RECAP) -> dict:
    for text in TOPICS:
        await say(agent, ctx, thread, text)
    return await say(agent, ctx, thread, last)


def shown_in(prompt: list[BaseMessage], text: str) -> int:
    """How many times ``text`` is in the prompt: its memories block and its messages."""
    memories = block(str(prompt[0].content), "memories")
    return memories.count(text) + sum(str(m.content).count(text) for m in prompt[1:])


async def test_the_thread_s_older_turns_fill_what_recall_leaves(graph_for, make_context):
    fake = model()
    ctx = make_context(model_obj=fake)
    settings = Settings().override(summary_mode="raw")
    state = await converse(graph_for(settings), ctx, f"t-{uuid.uuid4().hex[:8]}")
    prompt = fake.prompts_for(REPLY)[-1]
    # every topic of the conversation is in the prompt, once, as said
    assert [shown_in(prompt, topic) for topic in TOPICS] == [1] * len(TOPICS)
    recalled = state["recalled"]
    window = prompt[1:-1]  # what the window showed: the prompt's messages before the question
    assert cost(recalled) + count_tokens(window) <= settings.window.memory_token_budget
    assert any(item.get("via") == "conversation" for item in recalled)


async def test_a_small_budget_takes_the_newest_older_turns_whole(graph_for, make_context):
    fake = model()
    ctx = make_context(model_obj=fake)
    budget = 700
    settings = Settings().override(summary_mode="raw", memory_token_budget=budget)
    state = await converse(graph_for(settings), ctx, f"t-{uuid.uuid4().hex[:8]}", FOLLOW_UP)
    prompt = fake.prompts_for(REPLY)[-1]
    recalled = state["recalled"]
    used = cost(recalled) + count_tokens(prompt[1:-1])
    assert used <= budget
    shown = [shown_in(prompt, topic) for topic in TOPICS]
    assert max(shown) == 1, "nothing is shown twice"
    # the newest turn the window no longer shows comes first; the budget cannot hold all
    assert shown[-3] == 1 and 0 in shown
    said = [m for m in recalled if m.get("via") == "conversation"]
    assert said, "older turns of the thread were taken"
    # what is left unused could not hold any older message left out, whole
    assert budget - used < 0.1 * budget


WEAK = [  # an older conversation that resembles a question about this one, a little
    "I have so many questions about my garden.",
    "Can you tell me a joke?",
    "What did the doctor tell me about my back?",
    "Tell me again what you said about the weather.",
]
ASKED_BACK = "What did you tell me three questions ago?"


async def _asked_back(agent, ctx, user_thread) -> tuple[list[str], dict]:
    """The weak older conversation, five topics in a new thread, then ``ASKED_BACK``."""
    older = f"t-{uuid.uuid4().hex[:8]}"
    for text in [*WEAK, *TOPICS[6:]]:  # the newest two stay in its window
        await say(agent, ctx, older, text)
    replies = []
    for text in TOPICS[:5]:
        replies.append((await say(agent, ctx, user_thread, text))["messages"][-1].id)
    return replies, await say(agent, ctx, user_thread, ASKED_BACK)


async def test_a_question_about_the_conversation_gets_its_turns_before_weak_hits(
    graph_for, make_context
):
    fake = model()
    ctx = make_context(model_obj=fake)
    settings = Settings().override(summary_mode="raw", memory_token_budget=700)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    replies, state = await _asked_back(graph_for(settings), ctx, thread)
    recalled = state["recalled"]
    # nothing remembered matches the question well: the thread's older turns come first,
    # so the reply three questions back (the window holds the newest two turns) is shown
    assert replies[-3] in {m["source_ids"][0] for m in recalled if m["kind"] == "episode"}
    used = cost(recalled) + count_tokens(fake.prompts_for(REPLY)[-1][1:-1])
    assert used <= 700


async def test_a_question_memory_answers_well_keeps_recall_first(graph_for, make_context):
    fake = model()
    ctx = make_context(model_obj=fake)
    settings = Settings().override(summary_mode="raw", memory_token_budget=700, summary_batch=2)
    agent = graph_for(settings)
    older = f"t-{uuid.uuid4().hex[:8]}"
    for text in ["My sister's wedding is in Porto on June 14.", *TOPICS[6:]]:
        await say(agent, ctx, older, text)
    thread = f"t-{uuid.uuid4().hex[:8]}"
    for text in [t for t in TOPICS if "wedding" not in t]:  # more than the budget holds
        await say(agent, ctx, thread, text)
    state = await say(agent, ctx, thread, "Where is my sister's wedding?")
    prompt = fake.prompts_for(REPLY)[-1]
    assert "Porto" in block(str(prompt[0].content), "memories")
    assert any(m.get("via") == "conversation" for m in state["recalled"])  # it fills the rest


async def test_memory_middleware_decides_the_split_per_turn_too(services, checkpointer, user_id):
    fake = model()
    settings = Settings().override(summary_mode="raw", memory_token_budget=700)
    spec = register_chat_model(f"fake-{uuid.uuid4().hex[:8]}", fake)
    memory = MemoryMiddleware(services, model=spec, settings=settings)
    agent = create_agent(fake, [], middleware=[memory], checkpointer=checkpointer)

    async def ask(thread: str, text: str) -> None:
        config = {"configurable": {"thread_id": thread}}
        await agent.ainvoke(
            {"messages": [HumanMessage(text)]}, config, context={"user_id": user_id}
        )
        await memory.drain()

    older, thread = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    for text in [*WEAK, *TOPICS[6:]]:
        await ask(older, text)
    for text in TOPICS[:5]:
        await ask(thread, text)
    await ask(thread, ASKED_BACK)
    memories = block(fake.system_prompts()[-1], "memories")
    assert f"On '{TOPICS[2].rstrip('?')}'" in memories  # the reply three questions back
    assert all(memories.count(t) <= 2 for t in TOPICS[:5])  # its question and its reply, once
