"""The window's token cap and what it leaves recall: pure rules, no server."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from memory_graph_agent.prompting.budgets import (
    count_tokens,
    recall_budget,
    window_cut,
    window_token_cap,
)
from tests.builders import msg, tc


def _turns(n: int, reply_words: int = 10) -> list:
    out = []
    for i in range(n):
        out.append(HumanMessage(f"question {i}", id=f"h{i}"))
        out.append(AIMessage("word " * reply_words, id=f"a{i}"))
    return out


def test_a_short_window_is_cut_by_count_only():
    messages = _turns(15)  # 30 messages of a few tokens
    assert window_cut(messages, 20, 10_000) == 10
    assert window_cut(messages[:20], 20, 10_000) == 0


def test_a_window_over_its_tokens_drops_whole_old_turns_until_it_fits():
    messages = _turns(6, reply_words=100)  # ~100 tokens a turn
    cap = 350
    cut = window_cut(messages, 20, cap)
    kept = messages[cut:]
    assert count_tokens(kept) <= cap < count_tokens(messages[cut - 2 :])
    assert kept[0].type == "human" and cut % 2 == 0  # on a turn boundary


def test_the_newest_two_turns_stay_whatever_they_cost():
    messages = _turns(5, reply_words=2000)
    assert window_cut(messages, 20, 100) == 6  # the last two turns: 4 messages
    assert window_cut(messages[-4:], 20, 100) == 0
    assert window_cut(messages[-3:], 20, 0) == 0  # one turn and a half: nothing to cut


def test_a_cut_never_separates_a_tool_call_from_its_result():
    messages = [
        msg("human", "h1", "first " * 300),
        msg("ai", "a1", tool_calls=[tc("c1")]),
        msg("tool", "t1", "result " * 300, tool_call_id="c1"),
        msg("ai", "a1b", "answer"),
        msg("human", "h2", "second"),
        msg("ai", "a2", "answer two"),
        msg("human", "h3", "third"),
        msg("ai", "a3", "answer three"),
    ]
    assert window_cut(messages, 20, 50) == 4  # the whole first turn, tool chain included


def test_the_cap_is_the_share_of_the_memory_budget():
    assert window_token_cap(1800, 0.5) == 900
    assert window_token_cap(1800, 0.0) == 0


def test_recall_gets_what_the_window_leaves_of_the_budget():
    window = _turns(3, reply_words=100)
    question = HumanMessage("what did I say?", id="q")
    assert recall_budget(1800, [*window, question]) == 1800 - count_tokens(window)
    assert recall_budget(1800, [question]) == 1800
    assert recall_budget(100, [*window, question]) == 0  # never negative
    # the current turn's own tool round is not window
    call = AIMessage("", tool_calls=[tc("c9")], id="c")
    assert recall_budget(1800, [*window, question, call]) == 1800 - count_tokens(window)
