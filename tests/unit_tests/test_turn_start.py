"""A turn starts with load_profile and recall side by side: their events and their routes."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from graph.routing import TURN_START, route_turn
from graph.state import session_ends, turn_start
from memory_graph_agent.core.records import TurnStart, add_events, event
from memory_graph_agent.core.turns import ends_session

OLD = [{**event("respond", "answered", "last turn"), "turn": 3}, event("trim_window", "x", "y")]


def test_both_starting_writes_survive_in_either_order_and_the_last_turn_goes():
    profile = TurnStart(turn=7, events=[event("load_profile", "loaded", "p")])
    recall = TurnStart(turn=7, events=[event("recall", "auto", "r")])
    one = add_events(add_events(OLD, profile), recall)
    other = add_events(add_events(OLD, recall), profile)
    assert sorted(e["node"] for e in one) == sorted(e["node"] for e in other)
    assert {e["node"] for e in one} == {"load_profile", "recall"}
    assert all(e["turn"] == 7 for e in one)
    # later nodes of the turn append
    assert [e["node"] for e in add_events(one, [event("respond", "a", "b")])][-1] == "respond"


class _S(TypedDict, total=False):
    n: int
    memory_events: Annotated[list, add_events]
    log: Annotated[list, operator.add]


async def _profile(state: _S) -> dict:
    return {"memory_events": turn_start([event("load_profile", "loaded", str(state["n"]))])}


async def _recall(state: _S) -> dict:
    return {"memory_events": turn_start([event("recall", "auto", str(state["n"]))])}


async def _respond(state: _S) -> dict:
    return {"memory_events": [event("respond", "answered", str(state["n"]))]}


async def test_a_real_graph_keeps_each_turn_s_events_only():
    """LangGraph applies the two writes of one step; each run shows its own three events."""
    builder = StateGraph(_S)
    builder.add_node("load_profile", _profile)
    builder.add_node("recall", _recall)
    builder.add_node("respond", _respond)
    builder.add_conditional_edges(START, lambda s: list(TURN_START), list(TURN_START))
    builder.add_edge("load_profile", "respond")
    builder.add_edge("recall", "respond")
    builder.add_edge("respond", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for n in (1, 2, 3):
        out = await graph.ainvoke({"n": n}, config)
        events = out["memory_events"]
        assert sorted(e["node"] for e in events) == ["load_profile", "recall", "respond"]
        assert {e["text"] for e in events} == {str(n)}


CASES = [
    ([], True),
    ([HumanMessage("hi")], True),
    ([HumanMessage("hi")], False),
    ([HumanMessage("hi"), AIMessage("hello")], True),
    ([HumanMessage("hi"), AIMessage("hello")], False),
    ([AIMessage("hello"), HumanMessage("again")], True),
]


@pytest.mark.parametrize(("messages", "end_session"), CASES)
def test_load_profile_routes_by_the_flag_it_wrote_back_as_the_start_did(messages, end_session):
    """START sends a session end to load_profile alone; load_profile then archives it."""
    state = {"messages": messages, "end_session": end_session}
    written = {**state, "end_session": ends_session(messages, end_session)}
    assert (route_turn(written) == "trim_window") == session_ends(state)


def test_a_turn_whose_human_message_load_profile_dropped_is_still_answered():
    """Both branches of the first step must agree: recall's edge leads to respond too."""
    written = {"messages": [AIMessage("hello")], "end_session": False}  # the input was a turn
    assert route_turn(written) == "respond"


def test_a_session_end_with_a_message_to_answer_is_a_turn():
    assert ends_session([HumanMessage("hi"), AIMessage("hello")], True)
    assert not ends_session([AIMessage("hello"), HumanMessage("one more thing")], True)
    assert not ends_session([HumanMessage("hi"), AIMessage("hello")], False)
