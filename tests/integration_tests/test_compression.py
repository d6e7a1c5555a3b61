"""Short-term compression by tokens, through the compiled graph on real Redis/Postgres."""

from __future__ import annotations

import uuid
from collections import Counter

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from memory_graph_agent.prompting.budgets import count_tokens
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel, default_handler, prompt_text
from tests.conftest import kinds, say

WIDE = {"memory_token_budget": 20_000, "window_token_share": 1.0}
"""The window's own token cap left wide: compression by the prompt's size is tested here."""
SENTENCE = "The quarterly harbour inventory lists cranes, ropes, anchors and buoys. "


def long_text(i: int, tokens: int = 1500) -> str:
    """A human message of about ``tokens`` tokens, tagged with a unique marker."""
    head = f"Turn {i} marker Kw{i}q. "
    return head + SENTENCE * ((tokens * 4 - len(head)) // len(SENTENCE))


def _thread() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def _turn(agent, ctx, thread: str, messages: list) -> dict:
    return await agent.ainvoke(
        {"messages": messages}, {"configurable": {"thread_id": thread}}, context=ctx
    )


async def test_long_turns_compress_all_but_the_last_five_turns(graph_for, make_context, services):
    settings = Settings().override(
        window_size=50, context_window_tokens=8192, trigger_ratio=0.8, **WIDE
    )
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    turns: list[list[str]] = []
    for i in range(8):
        state = await say(agent, ctx, thread, long_text(i))
        turns.append([m.id for m in state["messages"][-2:]])
        assert count_tokens(state["messages"][-2:-1]) > 1450
    # the last five turns stay, verbatim, in the graph state and the Redis window
    kept = [mid for t in turns[3:] for mid in t]
    assert [m.id for m in state["messages"]] == kept
    assert [m.id for m in await services.window.window(ctx.user_id, thread)] == kept
    assert [m.content for m in state["messages"] if m.type == "human"] == [
        long_text(i) for i in range(3, 8)
    ]
    # the three older turns are in exactly one stored summary each, nothing pending
    evicted = [mid for t in turns[:3] for mid in t]
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    counts = Counter(sid for s in summaries for sid in s.source_ids)
    assert set(counts) == set(evicted) and max(counts.values()) == 1
    assert await services.queue.backlog(ctx.user_id, thread) == 0
    assert [m.id for m in await services.episodes.unsummarized(ctx.user_id, thread)] == kept
    # ... and in the running thread summary the next prompt carries
    assert "Kw2q" in state["thread_summary"]
    assert state["compress"] is False and state["pending_count"] == 0
    assert ("trim_window", "compressed") in kinds(state)


async def test_short_turns_do_not_compress(graph_for, make_context, services):
    settings = Settings().override(window_size=50, context_window_tokens=8192, **WIDE)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    for i in range(8):
        state = await say(agent, ctx, thread, f"short message {i}")
    assert len(state["messages"]) == 16 and not state.get("thread_summary")
    assert await services.memories.list(ctx.user_id, kind="summary") == []
    assert not state["compress"]


async def test_a_small_context_compresses_even_short_turns(graph_for, make_context, services):
    settings = Settings().override(
        window_size=50, context_window_tokens=900, keep_recent_turns=2, **WIDE
    )
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    for i in range(6):
        state = await say(agent, ctx, thread, f"message {i} " + SENTENCE * 8)  # ~150 tokens
    humans = [m.content for m in state["messages"] if m.type == "human"]
    assert 2 <= len(humans) <= 3 and humans[-1].startswith("message 5")
    assert await services.queue.backlog(ctx.user_id, thread) == 0
    unsummarized = await services.episodes.unsummarized(ctx.user_id, thread)
    assert [m.id for m in unsummarized] == [m.id for m in state["messages"]]
    assert state["thread_summary"]


async def test_tool_call_chains_are_never_split(graph_for, make_context, services):
    settings = Settings().override(window_size=50, context_window_tokens=8192, **WIDE)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()

    def chain(name: str) -> list:
        call = {"name": "lookup", "args": {"q": name}, "id": f"call-{name}", "type": "tool_call"}
        return [
            AIMessage("", tool_calls=[call], id=f"ai-{name}-{uuid.uuid4().hex[:6]}"),
            ToolMessage(f"result {name}", tool_call_id=f"call-{name}", id=f"tool-{name}"),
            AIMessage(f"looked up {name}", id=f"ai2-{name}-{uuid.uuid4().hex[:6]}"),
        ]

    for i in range(8):
        prefix = chain("old") if i == 3 else chain("kept") if i == 6 else []
        state = await _turn(agent, ctx, thread, [*prefix, HumanMessage(long_text(i))])
    # the "old" chain closed turn 2 and left with it; the "kept" one closes turn 5
    window = await services.window.window(ctx.user_id, thread)
    assert window[0].role == "human" and window[0].content == long_text(3)
    assert [m.id for m in window] == [m.id for m in state["messages"]]
    roles = [(m.role, bool(m.tool_calls), m.tool_call_id) for m in window]
    i = roles.index(("ai", True, None))
    assert roles[i + 1] == ("tool", False, "call-kept")
    assert window[i].tool_calls[0]["id"] == "call-kept"
    assert "tool-old" not in {m.id for m in window}
    summarized = {sid for s in await services.memories.list(ctx.user_id) for sid in s.source_ids}
    assert "tool-old" in summarized and "tool-kept" not in summarized
    for m in state["messages"]:  # every tool result sits right after its call
        if m.type == "tool":
            previous = state["messages"][state["messages"].index(m) - 1]
            assert m.tool_call_id in {c["id"] for c in previous.tool_calls}


async def test_summaries_of_long_turns_fit_the_summarizer_context(
    graph_for, make_context, services
):
    seen: list[int] = []

    def recording(messages):
        if prompt_text(messages).startswith("Summarize"):
            seen.append(count_tokens(messages))
        return default_handler(messages)

    model = ScriptedChatModel(handler=recording)
    # four pending messages hold two ~1,500-token turns: more than 80% of 3,000 tokens
    settings = Settings().override(window_size=2, summary_batch=4, context_window_tokens=3000)
    ctx = make_context(model_obj=model)
    agent = graph_for(settings)
    thread = _thread()
    for i in range(6):
        await say(agent, ctx, thread, long_text(i))
    assert len(seen) >= 2 and max(seen) <= 3000 * 0.8
    summaries = await services.memories.list(ctx.user_id, kind="summary")
    assert all(len(s.source_ids) <= 2 for s in summaries)
    assert await services.queue.backlog(ctx.user_id, thread) < settings.formation.summary_batch


async def test_a_rejected_turn_after_compression_loses_nothing(graph_for, make_context, services):
    import pytest

    from memory_graph_agent.turn.validation import InvalidInputError, discard_rejected

    settings = Settings().override(window_size=50, context_window_tokens=8192, **WIDE)
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    for i in range(7):
        await say(agent, ctx, thread, long_text(i))
    before_window = await services.window.window(ctx.user_id, thread)
    before_summaries = await services.memories.list(ctx.user_id, kind="summary")
    config = {"configurable": {"thread_id": thread}}
    with pytest.raises(InvalidInputError) as err:
        await agent.ainvoke({"messages": [HumanMessage("x" * 40_000)]}, config, context=ctx)
    assert await services.window.window(ctx.user_id, thread) == before_window
    assert await services.memories.list(ctx.user_id, kind="summary") == before_summaries
    await discard_rejected(agent, config, err.value)
    state = await say(agent, ctx, thread, long_text(7))
    humans = [m.content for m in state["messages"] if m.type == "human"]
    assert humans == [long_text(i) for i in range(3, 8)]
    logged = await services.episodes.history(ctx.user_id, thread)
    assert len(logged) == 16 and not any(m.content == "x" * 40_000 for m in logged)


async def test_window_store_evict_before_turns_and_flush(services, user_id):
    from memory_graph_agent.storage.window import StoredMessage

    thread = _thread()
    msgs = [
        StoredMessage.from_message(m, ts="2026-01-01T00:00:00+00:00")
        for i in range(4)
        for m in (HumanMessage(f"h{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}"))
    ]
    await services.window.push(user_id, thread, msgs)
    moved = await services.window.evict_before_turns(user_id, thread, 3)
    assert [m.id for m in moved] == ["h0", "a0"]
    assert await services.window.evict_before_turns(user_id, thread, 3) == []
    assert [m.id for _, m in await services.window.pending(user_id, thread)] == ["h0", "a0"]
    flushed = await services.window.flush(user_id, thread)
    assert [m.id for m in flushed] == ["h1", "a1", "h2", "a2", "h3", "a3"]
    assert await services.window.window(user_id, thread) == []
    assert await services.window.pending_len(user_id, thread) == 8
    assert await services.window.flush(user_id, thread) == []


async def test_respond_never_sends_a_prompt_larger_than_the_context(
    graph_for, make_context, fake_model
):
    # 8 turns of ~1,500 tokens: without the respond-side fit the later prompts reached
    # ~11k tokens of an 8,192-token context (trim_window compresses only after respond).
    settings = Settings().override(
        window_size=50, context_window_tokens=8192, trigger_ratio=0.8, **WIDE
    )
    ctx = make_context()
    agent = graph_for(settings)
    thread = _thread()
    for i in range(8):
        await say(agent, ctx, thread, long_text(i))
    responds = [p for p in fake_model.prompts if p and p[0].type == "system"]
    sent = [count_tokens(p) for p in responds]
    assert len(sent) == 8
    assert max(sent) <= 8192 - 512
    assert "Kw7q" in prompt_text(responds[-1][1:])  # the current turn is always sent
