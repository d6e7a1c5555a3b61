"""What the reply call sends: complete tool-call groups, within the budget (issue 13, finding 6)."""

from __future__ import annotations

from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from memory_graph_agent.core.tokens import message_tokens
from memory_graph_agent.turn.replying import complete_tool_groups, refused, reply_prompt


def _call(*ids: str, text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[{"name": "lookup", "args": {}, "id": i} for i in ids])


def test_only_answered_tool_calls_reach_the_model() -> None:
    answered = [
        _call("a1", "a2"),
        ToolMessage("r", tool_call_id="a1"),
        ToolMessage("r", tool_call_id="a2"),
    ]
    messages = [
        HumanMessage("hi"),
        _call("dangling", text="Let me check."),  # a client's call without results
        HumanMessage("well?"),
        *answered,
        _call("b1", "b2"),
        ToolMessage("r", tool_call_id="b1"),  # b2 never answered
        ToolMessage("orphan", tool_call_id="zz"),
        _call("empty"),  # no text, no result: left out
        HumanMessage("and now?"),
    ]
    out = complete_tool_groups(messages)
    assert [type(m).__name__ for m in out] == [
        "HumanMessage", "AIMessage", "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage",
        "AIMessage", "ToolMessage", "HumanMessage",
    ]  # fmt: skip
    assert out[1].tool_calls == [] and out[1].content == "Let me check."
    assert out[3] is answered[0]
    assert [c["id"] for c in out[6].tool_calls] == ["b1"]


def test_a_turn_larger_than_the_budget_is_shown_cut_head_and_tail() -> None:
    text = "START " + "All work and no play makes Jack a dull boy. " * 700 + " END"
    prompt = reply_prompt(
        "system", [HumanMessage("earlier"), AIMessage("ok"), HumanMessage(text, id="big")], 1_000
    )
    assert message_tokens([SystemMessage("system"), *prompt.messages]) <= 1_000
    (shown,) = prompt.messages  # the older turn does not fit beside it
    assert shown.content.startswith("START ") and shown.content.endswith(" END")
    assert "characters left out here" in shown.content and prompt.cut == ["big"]


def test_refused_means_the_provider_rejected_the_request() -> None:
    class SdkError(Exception):
        status_code = 400

    assert refused(ModelInvalidRequestError("too long")) and refused(SdkError())
    assert not refused(RuntimeError("connection reset")) and not refused(TimeoutError())
