"""Which runs prefetch their question (`graph.prefetch.turn_question`), and taking it once."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from graph.context import Context
from graph.prefetch import QueryPrefetch, turn_question

Q = "Where did I go hiking last spring?"


@pytest.mark.parametrize(
    "messages",
    [
        [HumanMessage(Q)],
        [{"role": "user", "content": Q}],
        [("human", Q)],
        [HumanMessage("an older question"), AIMessage("an answer"), HumanMessage(Q)],
        [HumanMessage(Q), AIMessage("an AI message after it")],
        [HumanMessage([{"type": "text", "text": Q}])],
    ],
    ids=["message", "dict", "tuple", "newest-human", "ai-last", "text-blocks"],
)
def test_a_turn_prefetches_its_newest_human_text(messages):
    assert turn_question({"messages": messages}, Context(user_id="u1")) == Q
    assert turn_question({"messages": messages}, {"user_id": "u1"}) == Q  # the server's dict
    assert turn_question({"messages": messages}, None) == Q  # the defaults


@pytest.mark.parametrize(
    "input, context",
    [
        ({"messages": [HumanMessage(Q)]}, {"recall_mode": "flat"}),
        ({"messages": [HumanMessage(Q)]}, {"recall_mode": "tool"}),
        ({"messages": [HumanMessage(Q)]}, {"memory_token_budget": 0}),
        ({"messages": [HumanMessage(Q)]}, {"memory_of": "u1"}),  # a memory run
        ({"messages": [HumanMessage(Q)], "end_session": True}, {}),
        ({"messages": [AIMessage(Q)]}, {}),
        ({"messages": [HumanMessage("")]}, {}),
        ({}, {}),
        (None, {}),
        (Command(resume="yes"), {}),
        ({"messages": [{"role": "nobody", "content": Q}]}, {}),  # the graph refuses it
        ({"messages": [HumanMessage(Q)]}, {"user_id": "no spaces allowed"}),
        ({"messages": [HumanMessage(Q)]}, {"recall_k": 0}),
        ({"messages": [HumanMessage(Q)]}, {"no_such_knob": 1}),
    ],
    ids=[
        "flat",
        "tool",
        "no-budget",
        "memory-run",
        "session-end",
        "no-human",
        "empty-text",
        "no-messages",
        "no-input",
        "command",
        "bad-message",
        "bad-user",
        "bad-knob",
        "unknown-knob",
    ],
)
def test_runs_that_will_not_search_or_will_be_refused_prefetch_nothing(input, context):
    assert turn_question(input, context) is None


async def test_a_prefetch_is_taken_once_and_only_for_its_own_text():
    future = asyncio.get_running_loop().create_future()
    prefetch = QueryPrefetch(Q, future)
    assert prefetch.take("another question") is None
    assert prefetch.take(Q) is future
    assert prefetch.take(Q) is None  # a second recall in the run embeds for itself


async def test_closing_cancels_a_running_prefetch_and_reads_a_failed_one():
    loop = asyncio.get_running_loop()
    running = QueryPrefetch(Q, loop.create_future())
    running.close()
    assert running.vector.cancelled()
    assert running.take(Q) is None  # a cancelled embedding is never handed out

    failed = QueryPrefetch(Q, loop.create_future())
    failed.vector.set_exception(RuntimeError("down"))
    failed.close()
    assert failed.vector._log_traceback is False  # read: asyncio will not log it as lost
