"""Token arithmetic of short-term compression (`memory_graph_agent.prompting.budgets`)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from memory_graph_agent.prompting.budgets import (
    batch_that_fits,
    count_tokens,
    cut_to_recent_turns,
    messages_over_budget,
    messages_within_budget,
    prompt_tokens,
    trigger_budget,
)
from memory_graph_agent.storage.window import StoredMessage

CALL = {"name": "lookup", "args": {"q": "x"}, "id": "call-1", "type": "tool_call"}


def turn(i: int, chars: int = 40, tool: bool = False) -> list:
    """One turn: a human message, optionally a tool-call chain, then the answer."""
    out = [HumanMessage("h" * chars, id=f"h{i}")]
    if tool:
        call = {**CALL, "id": f"call-{i}"}
        out += [
            AIMessage("", tool_calls=[call], id=f"c{i}"),
            ToolMessage("r" * chars, tool_call_id=f"call-{i}", id=f"t{i}"),
        ]
    return [*out, AIMessage("a" * chars, id=f"a{i}")]


def test_cut_to_recent_turns_lands_on_a_human_message_and_keeps_tool_chains():
    messages = [m for i in range(7) for m in turn(i, tool=i % 2 == 0)]
    cut = cut_to_recent_turns(messages, 5)
    kept = messages[cut:]
    assert kept[0].id == "h2" and sum(m.type == "human" for m in kept) == 5
    assert [m.id for m in kept[:4]] == ["h2", "c2", "t2", "a2"]  # chain whole
    assert cut_to_recent_turns(messages[:10], 5) == 0  # only 3 turns: nothing to cut
    assert cut_to_recent_turns(messages, 7) == 0


def test_cut_to_recent_turns_on_stored_messages():
    stored = [StoredMessage.from_message(m, ts="2026-01-01") for i in range(6) for m in turn(i)]
    assert stored[cut_to_recent_turns(stored, 2)].id == "h4"


def test_budget_helpers_count_the_system_prompt_and_messages():
    messages = turn(0, chars=4000)
    tokens = count_tokens(messages)
    assert 2000 <= tokens <= 2100  # ~4 characters a token
    assert prompt_tokens("s" * 400, messages) > tokens + 90
    assert trigger_budget(8192, 0.8) == 6553
    assert messages_over_budget("sys", messages, 1000)
    assert not messages_over_budget("sys", messages, 5000)


def test_fit_to_budget_drops_whole_old_turns_but_never_the_last():
    messages = [m for i in range(4) for m in turn(i, chars=4000, tool=i == 3)]
    # each turn ~2,000 tokens, the last (with its tool chain) ~3,000
    kept = messages_within_budget("system", messages, 5600)
    assert [m.id for m in kept][:1] == ["h2"] and kept[-1].id == "a3"
    assert messages_within_budget("system", messages, 100_000) == messages
    only_last = messages_within_budget("system", messages, 100)
    assert [m.id for m in only_last] == ["h3", "c3", "t3", "a3"]  # too big, kept whole
    assert len(messages_within_budget("system", messages, 100, min_turns=2)) == 6


def test_batch_that_fits_is_at_least_one():
    messages = turn(0, chars=4000)  # ~1,000 tokens each
    assert batch_that_fits(messages, 2100) == 2
    assert batch_that_fits(messages, 1100) == 1
    assert batch_that_fits(messages, 10) == 1
    assert batch_that_fits(messages, 1100, overhead=500) == 1
    assert batch_that_fits([], 10) == 1
