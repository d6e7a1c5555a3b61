"""In a new thread, what recall leaves of the budget goes where a user would expect.

A user told the agent where they live and what they are allergic to, later that they
moved, then talked at length of other things in another thread. In a new thread they ask
both at once: the turns of both parts are recalled, the move with them (it names the city
it replaced). A question that finds nothing gets the user's latest conversation, newest
first, each turn whole; the budget holds and nothing is shown twice.
"""

from __future__ import annotations

import uuid

from memory_graph_agent.prompting.budgets import count_tokens
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import REPLY, ScriptedChatModel
from tests.conftest import say
from tests.integration_tests.test_conversation_fill import TOPICS as OTHER
from tests.integration_tests.test_conversation_fill import long_reply
from tests.integration_tests.test_hybrid_recall import cost

FIRST = "I live in Lyon and I'm allergic to peanuts, so I have to read every label."
MOVED = "Actually, I moved from Lyon to Porto last month, the flat is near the river."
BOTH = "Remind me: where do I live now, and what food must I avoid?"
BUDGET = 1800


def texts(state: dict) -> list[str]:
    return [str(item.get("text") or "") for item in state["recalled"]]


async def history(agent, ctx) -> str:
    """Where and what first, the move later; then a long talk in a newer thread."""
    first = f"t-{uuid.uuid4().hex[:8]}"
    for text in [FIRST, *OTHER[:4], MOVED, *OTHER[4:]]:
        await say(agent, ctx, first, text)
    latest = f"t-{uuid.uuid4().hex[:8]}"
    for text in OTHER + [q.replace("?", " again?") for q in OTHER]:
        await say(agent, ctx, latest, text)
    return latest


async def test_both_parts_of_a_question_in_a_new_thread_find_their_turns(graph_for, make_context):
    settings = Settings().override(summary_mode="raw", memory_token_budget=BUDGET)
    agent, ctx, thread = graph_for(settings), make_context(), f"t-{uuid.uuid4().hex[:8]}"
    for text in [FIRST, *OTHER, MOVED, *OTHER[:6]]:  # short replies: "ok"
        await say(agent, ctx, thread, text)
    state = await say(agent, ctx, f"t-{uuid.uuid4().hex[:8]}", BOTH)
    said = texts(state)
    assert any("allergic to peanuts" in t for t in said), said
    # "where do I live now" finds nothing of the move; the Lyon turn it finds leads there
    moved = [i for i in state["recalled"] if "moved from Lyon to Porto" in str(i["text"])]
    assert moved and moved[0]["via"] == "entity", said
    assert cost(state["recalled"]) <= BUDGET


async def test_a_question_that_finds_nothing_gets_the_latest_conversation(graph_for, make_context):
    # "Shall we go on?" is near nothing: at the default floor its weak hits (cosine 0.2 to
    # 0.35) and their neighbours fill nine tenths of the budget or more, which is no test
    settings = Settings().override(
        summary_mode="raw", memory_token_budget=BUDGET, min_similarity=0.4
    )
    fake = ScriptedChatModel(handlers={REPLY: long_reply})
    ctx = make_context(model_obj=fake)
    agent = graph_for(settings)
    latest = await history(agent, ctx)
    state = await say(agent, ctx, f"t-{uuid.uuid4().hex[:8]}", "Shall we go on?")
    items = state["recalled"]
    prompt = fake.prompts_for(REPLY)[-1]
    used = cost(items) + count_tokens(prompt[1:-1])
    assert BUDGET - used < 0.1 * BUDGET, "the budget does not idle"
    assert used <= BUDGET
    ids = [i["id"] for i in items]
    assert len(ids) == len(set(ids)), "nothing is shown twice"
    from_latest = [i for i in items if i.get("via") == "latest conversation"]
    assert from_latest and all(i["thread_id"] == latest for i in from_latest)
    # the newest turns of that conversation, not its oldest (short questions may fill gaps)
    newest, oldest_reply = OTHER[-1].replace("?", " again?"), f"On '{OTHER[0].rstrip('?')}'"
    assert any(newest in i["text"] for i in from_latest)
    assert not any(oldest_reply in i["text"] for i in from_latest)
