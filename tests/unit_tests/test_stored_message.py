"""StoredMessage and the turn-boundary cut: pure logic, no server."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from memory_graph_agent.core.turns import turn_boundary_cut
from memory_graph_agent.storage.window import StoredMessage
from tests.builders import TS, assert_tool_groups_intact, msg, tc, tool_conversation


def roles(spec: str) -> list[StoredMessage]:
    """'h a T t a' -> human, ai, ai-with-tool-call, tool, ai."""
    out = []
    for i, r in enumerate(spec.split()):
        if r == "h":
            out.append(msg("human", f"m{i}"))
        elif r == "a":
            out.append(msg("ai", f"m{i}"))
        elif r == "T":
            out.append(msg("ai", f"m{i}", tool_calls=[tc(f"c{i}")]))
        elif r == "t":
            out.append(msg("tool", f"m{i}", tool_call_id=f"c{i - 1}"))
        elif r == "s":
            out.append(msg("system", f"m{i}"))
    return out


def _round_trip(message):
    stored = StoredMessage.from_message(message, ts=TS)
    raw = stored.to_json()
    json.loads(raw)  # valid JSON
    again = StoredMessage.from_json(raw)
    assert again == stored
    assert StoredMessage.from_json(raw.encode()) == stored
    return stored, again.to_message()


@pytest.mark.parametrize(
    ("spec", "size", "expected"),
    [
        ("", 3, 0),  # empty
        ("h a", 3, 0),  # under the limit
        ("h a h", 3, 0),  # exactly at the limit
        ("h a h a", 3, 2),  # cut before the second human
        ("h a h a h a", 3, 4),  # excess 3 -> next human at 4
        ("h a h a h a", 4, 2),  # excess 2 lands exactly on a human
        ("h a a a a a", 3, 3),  # no human after excess: any non-tool boundary
        ("h T t a", 2, 3),  # never between T and t; after the tool result is fine
        ("h T t t a", 3, 4),  # two results stay with their call
        ("h T t", 1, 0),  # no safe cut yet
        ("h T t t", 2, 0),  # no safe cut yet: only cuts inside the tool group remain
        ("h a T t t", 2, 0),  # cut after 'a' would be below excess; rest is one group
        ("h T t h a", 2, 3),  # cut after the whole tool group, before the human
        ("s h a h a", 2, 3),  # system message moves like any other message
    ],
)
def test_turn_boundary_cut_table(spec, size, expected):
    items = roles(spec)
    cut = turn_boundary_cut(items, size)
    assert cut == expected
    if cut:
        assert len(items) - cut <= size
        assert items[cut].role != "tool"
        assert not (items[cut - 1].role == "ai" and items[cut - 1].tool_calls)


def test_turn_boundary_cut_never_splits_tool_groups_for_any_size():
    items = [m for turn in tool_conversation() for m in turn]
    for size in range(1, len(items) + 2):
        cut = turn_boundary_cut(items, size)
        assert 0 <= cut < max(len(items), 1)
        if cut:
            assert_tool_groups_intact(items[:cut], items[cut:])
            assert len(items) - cut <= size


def test_round_trip_human():
    original = HumanMessage("héllo ✓", id="h1", name="alice")
    stored, back = _round_trip(original)
    assert stored.role == "human" and stored.ts == TS
    assert isinstance(back, HumanMessage)
    assert (back.id, back.content, back.name) == ("h1", "héllo ✓", "alice")
    assert "\\u" not in stored.to_json()  # stored as UTF-8, not escaped


def test_round_trip_ai_with_tool_calls():
    calls = [
        tc("call_1"),
        {"name": "other", "args": {"x": [1, 2]}, "id": "call_2", "type": "tool_call"},
    ]
    original = AIMessage("", id="a1", tool_calls=calls)
    stored, back = _round_trip(original)
    assert stored.role == "ai" and len(stored.tool_calls) == 2
    assert isinstance(back, AIMessage)
    assert back.id == "a1" and back.content == ""
    assert [(c["name"], c["args"], c["id"]) for c in back.tool_calls] == [
        (c["name"], c["args"], c["id"]) for c in calls
    ]


def test_round_trip_ai_without_tool_calls_omits_them():
    stored, back = _round_trip(AIMessage("plain", id="a2"))
    assert "tool_calls" not in json.loads(stored.to_json())
    assert isinstance(back, AIMessage) and back.tool_calls == [] and back.content == "plain"


def test_round_trip_tool():
    original = ToolMessage("42 degrees", tool_call_id="call_1", id="t1", name="lookup")
    stored, back = _round_trip(original)
    assert stored.role == "tool" and stored.tool_call_id == "call_1"
    assert isinstance(back, ToolMessage)
    assert (back.id, back.content, back.tool_call_id, back.name) == (
        "t1",
        "42 degrees",
        "call_1",
        "lookup",
    )


def test_round_trip_system_and_list_content():
    _, back = _round_trip(SystemMessage("be brief", id="s1"))
    assert isinstance(back, SystemMessage) and back.content == "be brief"
    stored = StoredMessage.from_message(
        HumanMessage([{"type": "text", "text": "part one"}], id="h2"), ts=TS
    )
    assert stored.content == "part one"


def test_timestamp_from_additional_kwargs_or_now():
    stored = StoredMessage.from_message(
        HumanMessage("x", id="h", additional_kwargs={"timestamp": TS})
    )
    assert stored.ts == TS
    assert StoredMessage.from_message(HumanMessage("x", id="h")).ts[:2] == "20"


def test_message_without_id_rejected():
    with pytest.raises(ValueError, match="id"):
        StoredMessage.from_message(HumanMessage("no id"))


@pytest.mark.parametrize(
    "message",
    [
        ChatMessage(content="x", role="wizard", id="c1"),
        FunctionMessage(content="x", name="f", id="f1"),
    ],
)
def test_unknown_role_rejected(message):
    with pytest.raises(ValueError, match="unsupported message role"):
        StoredMessage.from_message(message)


def test_render_line():
    assert msg("human", "h", content="hello").render() == "[2026-01-02T03:04] human: hello"


def test_from_json_rejects_unknown_role():
    with pytest.raises(ValueError, match="role"):
        StoredMessage.from_json('{"id":"x","role":"bogus","content":"c","ts":"t"}')


def test_transcript_shows_tool_calls_and_skips_recalled_memories() -> None:
    call = StoredMessage(
        id="a1",
        role="ai",
        content="",
        ts="2026-01-02T03:04:00",
        tool_calls=[{"name": "remember", "args": {"key": "city", "fact": "Berlin"}, "id": "c1"}],
    )
    assert call.render() == (
        '[2026-01-02T03:04] ai: (called remember({"key": "city", "fact": "Berlin"}))'
    )
    found = StoredMessage(
        id="t1",
        role="tool",
        name="search_memory",
        content="- [summary 2026-01-01] The user lives in Berlin.",
        ts="2026-01-02T03:04:00",
        tool_call_id="c2",
    )
    assert "Berlin" not in found.render()
    result = StoredMessage(
        id="t2",
        role="tool",
        name="remember",
        content="created city: 'Berlin'",
        ts="2026-01-02T03:04:00",
        tool_call_id="c1",
    )
    assert result.render().endswith("remember: created city: 'Berlin'")
